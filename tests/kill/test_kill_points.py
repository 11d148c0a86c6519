"""Kill tests (issue 43, item 6): the real ``workbench`` CLI SIGKILLed, with every process of its group, at 10
seeded random points each of ``run --resume``, ``refine``, ``memory rollback``, ``merge-runs`` and a sweep over two
Ray workers; after every kill the folder reads strictly and nothing is lost or duplicated, and the command run
again completes into exactly what an uninterrupted one writes.

A kill point is drawn from ``random.Random(43)``: a delay from the start of the process (start-up, the first
write, the middle of the first episode), or a number of records the process must write first plus a delay (the
middle of the next episode, the gap between two writes, a commit between its history append and its entries
rename). The delay ranges are calibrated on an uninterrupted run of the same command where one is played anyway.

Each test prints one line (``-s``) with its counts: kills, those that landed while the command was still working
(``mid_run``), those that caught a write half done (``mid_write``), episodes or records lost and duplicated
(both 0); with ``WORKBENCH_KILL_REPORT=DIR`` each also writes ``DIR/<test>.json`` with the counts and every
kill point. The games are real ALFWorld games played by a tiny random model saved as a local folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from workbench.eval.run_folder import episode_lines, read_config, read_metrics

pytestmark = [pytest.mark.integration, pytest.mark.game]

SEED = 43
KILLS = 10
# tasks 0, 35, 70, 105 of valid_unseen: the 0:140:35, with a stop inside the split's 134 tasks (a grid
# file refuses a stop past them)
TASKS = "0:134:35"
N_TASKS = 4
WB = [sys.executable, "-m", "workbench.cli"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


# -- processes -----------------------------------------------------------------------------------------------
class Proc:
    """A CLI process (or a shell running several) in a session of its own; stdout and stderr go to files."""

    def __init__(self, argv: list[str] | str, logs: Path, name: str):
        logs.mkdir(parents=True, exist_ok=True)
        self.stdout, self.stderr = logs / f"{name}.out", logs / f"{name}.err"
        self.t0 = time.monotonic()
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.p = subprocess.Popen(argv, shell=isinstance(argv, str), env=ENV, stdout=out, stderr=err,
                                      start_new_session=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def alive(self) -> bool:
        return self.p.poll() is None

    def err(self) -> str:
        return self.stderr.read_text(errors="replace")[-3000:]

    def kill(self) -> tuple[bool, list[str]]:
        """SIGKILL the process group; returns whether the command was still running, and the names of its
        processes that outlived the group kill by 5 s (processes in a group of their own, as Ray's workers are:
        they are killed by pid here)."""
        alive = self.alive()
        try:
            kids = psutil.Process(self.p.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            kids = []
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait()
        _, left = psutil.wait_procs(kids, timeout=5)
        names = []
        for p in left:
            with contextlib.suppress(psutil.Error):
                names.append(_name(p))
                p.kill()
        return alive, names + _kill_session(self.p.pid)


def _kill_session(sid: int) -> list[str]:
    """kill -9 whatever is left in session ``sid``; their names."""
    names = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(p.pid) == sid:
                names.append(_name(p))
                p.kill()
    return names


def _name(p: psutil.Process) -> str:
    """What a process is, in a few words (``ray::IDLE``, ``raylet``, ``python -m workbench.cli``)."""
    argv = p.cmdline() or [p.name()]
    return " ".join(Path(a).name if a.startswith("/") else a for a in argv[:3])[:80]


def _sleep_unless_done(proc: Proc, seconds: float) -> None:
    end = time.monotonic() + seconds
    while proc.alive() and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 0.02))


def _wait_for(proc: Proc, cond: Callable[[], bool], timeout: float = 600, poll: float = 0.02) -> bool:
    """Wait until ``cond()`` holds (True) or the process ends (False)."""
    deadline = time.monotonic() + timeout
    while proc.alive():
        if cond():
            return True
        assert time.monotonic() < deadline, f"nothing happened in {timeout} s: {proc.err()}"
        time.sleep(poll)
    return cond()


def _land(proc: Proc, point: dict, count: Callable[[], int] | None = None, poll: float = 0.02) -> None:
    """Wait for the kill point: ``{"after": K, "delay": S}`` waits for ``count()`` to reach K, then S seconds;
    ``{"delay": S}`` waits until S seconds after the start."""
    if "after" in point:
        _wait_for(proc, lambda: count() >= point["after"], poll=poll)
        if point["delay"] > 0.05:
            _sleep_unless_done(proc, point["delay"])
        elif point["delay"] > 0:
            time.sleep(point["delay"])
    else:
        _sleep_unless_done(proc, point["delay"] - proc.elapsed())


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _cli(*argv: str) -> tuple[int, str]:
    """``workbench ARGV`` in this process: (exit status, stdout + stderr)."""
    from workbench.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        rc = main(list(argv))
    return rc, buf.getvalue()


def _report(name: str, started: float, **summary) -> dict:
    """Print the test's one-line summary; write it (and its points) to $WORKBENCH_KILL_REPORT/NAME.json."""
    summary = {"test": name, "wall_s": round(time.monotonic() - started, 1), **summary}
    print("\nkill-test " + " ".join(f"{k}={v}" for k, v in summary.items() if k != "points"))
    if folder := os.environ.get("WORKBENCH_KILL_REPORT"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(summary, indent=1))
    return summary


# -- run folders ---------------------------------------------------------------------------------------------
def _run_argv(model: Path, out: Path, tasks: str = TASKS) -> list[str]:
    return WB + ["run", "--model", str(model), "--split", "valid_unseen", "--tasks", tasks, "--memory", "none",
                 "--max-steps", "4", "--no-teacher-forcing", "--out", str(out)]


def _episodes(folder: Path) -> dict[str, str]:
    """task id -> the line as written, strictly: a torn last line is skipped, anything else malformed (a task's
    episode twice included) raises; config.json and metrics.json, when there, are read strictly too."""
    if (folder / "config.json").exists():
        read_config(folder)
    read_metrics(folder)
    return {tid: line for _, tid, line in episode_lines(folder / "trajectories.jsonl")}


def _torn(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _folder_bytes(folder: Path) -> dict:
    """What must be identical between two runs of one configuration: the episodes byte for byte, the metrics
    but for wall time, config.json's run record."""
    metrics = {k: v for k, v in json.loads((folder / "metrics.json").read_text()).items() if "wall" not in k}
    return {"trajectories.jsonl": (folder / "trajectories.jsonl").read_bytes(), "metrics.json": metrics,
            "run": json.loads((folder / "config.json").read_text())["run"]}


@pytest.fixture(scope="module")
def reference_run(tiny_model_dir, tmp_path_factory) -> dict:
    """The 4 tasks played once, uninterrupted, by the CLI; its timeline (seconds after the start: config.json
    written, first and last episode written, exit) calibrates the kill points."""
    out = tmp_path_factory.mktemp("reference") / "run"
    proc = Proc(_run_argv(tiny_model_dir, out), out.parent / "logs", "reference")
    rows, times = out / "trajectories.jsonl", {}
    while proc.alive():
        if "config" not in times and (out / "config.json").exists():
            times["config"] = proc.elapsed()
        n = _lines(rows)
        if "first" not in times and n >= 1:
            times["first"] = proc.elapsed()
        if "last" not in times and n >= N_TASKS:
            times["last"] = proc.elapsed()
        time.sleep(0.02)
    times["end"] = proc.elapsed()
    assert proc.p.returncode == 0, proc.err()
    assert len(_episodes(out)) == N_TASKS
    times.setdefault("first", times["end"])
    times.setdefault("last", times["end"])
    return {"out": out, "times": times, "folder": _folder_bytes(out)}


def _same_as_reference(folder: Path, reference: dict, model: Path, scratch: Path) -> None:
    if _folder_bytes(folder) != reference["folder"]:  # is the tiny model deterministic at all? say which it is
        subprocess.run(_run_argv(model, scratch), env=ENV, capture_output=True, timeout=600, check=True)
        same = _folder_bytes(scratch) == reference["folder"]
        pytest.fail(f"{folder}: the resumed run differs from the uninterrupted one (two uninterrupted runs "
                    f"{'agree' if same else 'differ too: the model is not deterministic'})")


def test_run_resume_killed_at_ten_points(tiny_model_dir, reference_run, tmp_path):
    """``workbench run --resume`` killed 10 times: no episode lost or repeated, each kill's folder reads; the
    resumed run is byte for byte the uninterrupted one. A run that completes between kills is checked so, and
    the next kills go to a new folder (a new round), so that they land mid-run."""
    started = time.monotonic()
    t = reference_run["times"]
    gap = max((t["last"] - t["first"]) / (N_TASKS - 1), 0.5)  # one episode
    rng = random.Random(SEED)
    rounds = 0
    out = tmp_path / f"run{rounds}"
    rows = out / "trajectories.jsonl"
    kept: dict[str, str] = {}
    points, lost, torn = [], 0, 0
    for i in range(KILLS):
        u, a, b = rng.random(), rng.random(), rng.random()
        remaining = N_TASKS - len(kept)
        # after the next episode's line, into the one after (or between the two writes); or a delay from the
        # start: start-up, config.json, the first episode (the last one, when only one is left)
        if remaining >= 2 and u < 0.35:
            point = {"after": _lines(rows) + 1, "delay": round(a * gap, 3)}
        else:
            point = {"delay": round(b * t["first"], 3)}
        config_before = _inode(out / "config.json")
        proc = Proc(_run_argv(tiny_model_dir, out) + (["--resume"] if (out / "config.json").exists() else []),
                    tmp_path / "logs", f"kill{i}")
        _land(proc, point, lambda rows=rows: _lines(rows))
        at = round(proc.elapsed(), 2)
        alive, stray = proc.kill()
        if not alive:
            assert proc.p.returncode == 0, proc.err()
        torn += _torn(rows)
        now = _episodes(out)  # strict: a task twice raises
        gone = [tid for tid, line in kept.items() if now.get(tid) != line]
        lost += len(gone)
        assert not gone, f"kill {i}: episodes lost or changed: {gone}"
        new = len(now) - len(kept)
        complete = bool(read_metrics(out))
        phase = ("exited" if not alive else "complete" if complete else
                 "before its first write" if new == 0 and _inode(out / "config.json") == config_before else
                 "config.json written, no episode yet" if new == 0 else f"after writing {new} episode(s)")
        points.append({**point, "round": rounds, "killed_at_s": at, "phase": phase, "episodes": len(now),
                       "torn_line": _torn(rows), "stray_processes": stray, "mid_run": alive and not complete})
        kept = now
        if complete:
            _same_as_reference(out, reference_run, tiny_model_dir, tmp_path / "again")
            rounds += 1
            out = tmp_path / f"run{rounds}"
            rows = out / "trajectories.jsonl"
            kept = {}
    rc = subprocess.run(_run_argv(tiny_model_dir, out) + ["--resume"], env=ENV, capture_output=True, text=True,
                        check=False, timeout=600)
    assert rc.returncode == 0, rc.stderr[-3000:]
    final = _episodes(out)
    assert len(final) == N_TASKS and all(final[tid] == line for tid, line in kept.items())
    _same_as_reference(out, reference_run, tiny_model_dir, tmp_path / "again")
    _report("run_resume", started, kills=KILLS, mid_run=sum(p["mid_run"] for p in points),
            mid_write=torn, lost=lost, duplicated=0, rounds=rounds + 1,
            stray_processes=sum(len(p["stray_processes"]) for p in points),
            phases=_count(p["phase"] for p in points), points=points)


def _count(items) -> dict:
    out: dict = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


# -- refine --------------------------------------------------------------------------------------------------
def test_refine_killed_at_ten_points(tiny_model_dir, tmp_path):
    """``workbench refine`` killed 10 times: after each kill the base passes ``memory check`` and its log and
    executions read; at the end every task is refined once, execution ids are unique, the base has 200 entries."""
    from workbench.memory.base import MemoryBase
    from workbench.methods.agmr.refine_folder import load_executions, load_log

    started = time.monotonic()
    out = tmp_path / "base"
    argv = WB + ["refine", "--model", str(tiny_model_dir), "--heads", "0.0", "1.2", "--tasks", TASKS,
                 "--max-steps", "3", "--retriever", "bm25", "--base-out", str(out)]
    execs = out / "refine" / "executions.jsonl"
    rng = random.Random(SEED)
    done: dict[str, dict] = {}  # task id -> its log record
    done_execs: dict[str, dict] = {}  # id -> execution of a finished task
    points, lost, duplicated, mid_write = [], 0, 0, 0
    for i in range(KILLS):
        u, a, b, c = rng.random(), rng.random(), rng.random(), rng.random()
        # after 1-5 more executions (3-4 make a task, then its log line), 0-2 s on: into the next execution,
        # between two writes, into the next task; or a delay from the start: the copy of the source base (~2 s),
        # start-up, the first execution (~6-10 s)
        if len(done) <= N_TASKS - 2 and u < 0.5:
            point = {"after": len(done_execs) + 1 + int(c * 5), "delay": round(a * 2.0, 3)}
        else:
            point = {"delay": round(b * 13.0, 3)}
        # executions of a task the last kill interrupted stay in the file until this process drops them (by
        # rewriting it): count only what this process wrote
        stale, inode = _lines(execs) > len(done_execs), _inode(execs)
        n_done = len(done_execs)

        def count(stale=stale, inode=inode, n_done=n_done) -> int:
            return n_done if stale and _inode(execs) == inode else _lines(execs)

        proc = Proc(argv, tmp_path / "logs", f"kill{i}")
        _land(proc, point, count)
        at = round(proc.elapsed(), 2)
        alive, stray = proc.kill()
        if not alive:
            assert proc.p.returncode == 0, proc.err()
        new_execs = count() - n_done  # what this process executed (kept or not)
        cfg = out / "refine" / "config.json"
        cloning = cfg.exists() and json.loads(cfg.read_text()).get("cloning", False)
        check = None
        if (out / "entries.jsonl").exists():
            check, said = _cli("memory", "check", str(out))
            # a kill mid-copy leaves a folder marked as such, which the next refine copies again
            assert check == 0 or cloning, f"kill {i}: memory check: {said}"
            if check == 0:
                assert len(MemoryBase(out)) == 200
        torn = _torn(execs) or _torn(out / "refine" / "log.jsonl") or _torn(out / "history.jsonl")
        mid_write += torn or cloning
        records = load_log(out)
        ids = [r.task_id for r in records]
        duplicated += len(ids) - len(set(ids))
        assert len(ids) == len(set(ids)), f"kill {i}: a task refined twice: {ids}"
        now = {r.task_id: r.model_dump() for r in records}
        executions = {e.id: e.model_dump() for e in load_executions(out)}
        exec_ids = [e.id for e in load_executions(out)]
        assert len(exec_ids) == len(set(exec_ids)), f"kill {i}: an execution id twice"
        gone = [t for t in done if now.get(t) != done[t]] + [x for x in done_execs if executions.get(x) != done_execs[x]]
        lost += len(gone)
        assert not gone, f"kill {i}: lost or changed: {gone}"
        new = len(now) - len(done)
        unfinished = len(set(executions) - set(done_execs) - {x for x, e in executions.items() if e["task_id"] in now})
        phase = ("exited" if not alive else "mid-copy" if cloning else
                 "before the copy" if not cfg.exists() else
                 f"after refining {new} task(s)" if new else
                 f"mid-task, after {new_execs} execution(s)" if new_execs else "before its first execution")
        points.append({**point, "killed_at_s": at, "phase": phase, "tasks_done": len(now), "memory_check": check,
                       "unfinished_task_executions_left": unfinished,
                       "torn_line": torn, "stray_processes": stray, "mid_run": alive and len(now) < N_TASKS})
        done = now
        done_execs = {x: e for x, e in executions.items() if e["task_id"] in done}
    rc = subprocess.run(argv, env=ENV, capture_output=True, text=True, check=False, timeout=900)
    assert rc.returncode == 0, rc.stderr[-3000:]
    records = load_log(out)
    assert len(records) == N_TASKS and len({r.task_id for r in records}) == N_TASKS
    assert all(now[t] == r.model_dump() for r in records if (t := r.task_id) in now)
    ids = [e.id for e in load_executions(out)]
    assert len(ids) == len(set(ids)) and {x.split("#")[0] for x in ids} == {r.task_id for r in records}
    assert set(done_execs) <= set(ids)
    for r in records:
        assert set(r.executions) <= set(ids)
    assert len(MemoryBase(out)) == 200
    assert _cli("memory", "check", str(out))[0] == 0
    assert json.loads(rc.stdout.strip().splitlines()[-1])["tasks"] == N_TASKS
    _report("refine", started, kills=KILLS, mid_run=sum(p["mid_run"] for p in points), mid_write=mid_write,
            left_a_task_half_written=sum(p["unfinished_task_executions_left"] > 0 for p in points),
            lost=lost, duplicated=duplicated, stray_processes=sum(len(p["stray_processes"]) for p in points),
            phases=_count(p["phase"] for p in points), points=points)


# -- memory rollback -----------------------------------------------------------------------------------------
def _small_base(root: Path, n_entries: int = 60, n_edited: int = 4, n_versions: int = 4):
    """A base of ``n_entries`` entries of 20 segments (~300 KB, so a rewrite takes a few ms), the first
    ``n_edited`` committed ``n_versions`` times each; returns their ids."""
    from workbench.memory import MemoryBase
    from workbench.memory.trajectory import MemoryEntry, Segment

    base = MemoryBase(root)
    base.add_many(MemoryEntry(
        entry_id=f"e{i:03d}", task_id=f"valid_train/task-{i:03d}", task_type="pick", goal=f"put object {i} away",
        initial_observation="You are in the middle of a room. " * 4,
        segments=tuple(Segment(observation=f"step {k}: you see a drawer {k} and a shelf {k}. " * 3,
                               thought=f"I should check drawer {k}.", action=f"go to drawer {k}")
                       for k in range(20))) for i in range(n_entries))
    edited = [f"e{i:03d}" for i in range(n_edited)]
    for v in range(1, n_versions):
        for eid in edited:
            e = base.get(eid)
            base.commit(e.model_copy(update={"goal": f"put object {eid} away (edit {v})"}), reason=f"edit {v}")
    return edited


def test_memory_rollback_killed_at_ten_points(tmp_path):
    """Chains of ``workbench memory rollback`` killed 10 times, some between a commit's history append and its
    entries rename: after each kill the base passes ``memory check`` and loads, every entry's versions grow and
    its current version is its last record, and no history record is lost."""
    from workbench.memory import MemoryBase
    from workbench.memory.base import read_store

    started = time.monotonic()
    root = tmp_path / "base"
    edited = _small_base(root)
    history = root / "history.jsonl"
    rng = random.Random(SEED)
    records = [r for _, r in read_store(root).history]
    points, lost, mid_write = [], 0, 0
    chain = 3  # rollbacks per shell command

    def writes() -> int:  # how many times this chain has written the history so far
        sig = _signature(history)
        if sig != last[0]:
            last[0], last[1] = sig, last[1] + 1
        return last[1]

    for i in range(KILLS + 1):  # the last chain runs to completion
        targets = [(edited[rng.randrange(len(edited))], rng.randrange(3)) for _ in range(chain)]
        cmds = [shlex.join(WB + ["memory", "rollback", str(root), eid, "--to", str(v)]) for eid, v in targets]
        u, k, d = rng.random(), rng.randrange(1, chain + 1), rng.random()
        scale = rng.choice([0.0, 0.01, 0.02, 0.5, 3.0])
        # after the chain's K-th history append, 0-3 s later (0-20 ms: between the append and the entries
        # rename); or a delay from the start (the first process's start-up and load)
        point = {"after": k, "delay": round(d * scale, 4)} if u < 0.7 else {"delay": round(d * 3.0, 3)}
        last = [_signature(history), 0]
        temp_before = set(root.glob(".*.tmp"))
        proc = Proc(" && ".join(cmds), tmp_path / "logs", f"chain{i}")
        if i == KILLS:
            assert proc.p.wait(timeout=600) == 0, proc.err()
        else:
            _land(proc, point, writes, poll=0.0005)
            at = round(proc.elapsed(), 3)
            alive, stray = proc.kill()
            if not alive:
                assert proc.p.returncode == 0, proc.err()
        st = read_store(root)
        check, said = _cli("memory", "check", str(root))
        assert check == 0, f"kill {i}: {said}"
        base = MemoryBase(root)
        for e in base:
            versions = [r.version for r in base.history(e.entry_id)]
            assert versions == sorted(set(versions)), f"kill {i}: {e.entry_id}: versions {versions}"
            assert base.history(e.entry_id)[-1].entry == e, f"kill {i}: {e.entry_id}: current != last record"
        now = [r for _, r in st.history]
        kept = now[: len(records)] == records
        lost += 0 if kept else len(records) - sum(a == b for a, b in zip(records, now))
        assert kept, f"kill {i}: the history lost or changed records ({len(records)} -> {len(now)})"
        if i == KILLS:
            assert len(now) == len(records) + chain
            break
        # this chain's kill caught a commit half done: its history record written, entries.jsonl not renamed
        # (or the record torn); a state an earlier kill left and this chain never reached does not count
        landed = writes() > 0 and bool(st.pending or st.torn)
        mid_write += landed
        points.append({**point, "killed_at_s": at, "rollbacks_done": len(now) - len(records),
                       "mid_write": landed, "pending_commit": bool(st.pending), "torn_history_line": bool(st.torn),
                       "temp_files_left": len(set(root.glob(".*.tmp")) - temp_before), "stray_processes": stray,
                       "mid_run": alive})
        records = now
    _report("memory_rollback", started, kills=KILLS, mid_run=sum(p["mid_run"] for p in points),
            mid_write=mid_write, lost=lost, duplicated=0,
            rollbacks_committed=sum(p["rollbacks_done"] for p in points) + chain, history_records=len(records),
            temp_files_left=len(list(root.glob(".*.tmp"))),
            stray_processes=sum(len(p["stray_processes"]) for p in points), points=points)


def _signature(path: Path) -> tuple:
    """(size, inode, mtime): an append changes the first, an atomic rewrite the second."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return ()
    return st.st_size, st.st_ino, st.st_mtime_ns


# -- merge-runs ----------------------------------------------------------------------------------------------
def _part(reference: Path, folder: Path, tasks: str) -> Path:
    """A run folder of the reference run's episodes of ``tasks``, as `workbench run --tasks TASKS` writes it."""
    from workbench.eval.config import RunConfig, select_tasks
    from workbench.eval.run_folder import write_run_config

    cfg = RunConfig.from_identity(str(folder), read_config(reference).run, tasks=tasks)
    write_run_config(cfg)
    lines = _episodes(reference)
    (folder / "trajectories.jsonl").write_text("".join(lines[t.task_id] + "\n" for t in select_tasks(cfg)))
    return folder


MERGED = ("config.json", "trajectories.jsonl", "metrics.json")  # what merge-runs writes, in this order


def _merge_state(out: Path) -> str:
    if not out.exists():
        return "absent"
    names = {p.name for p in out.iterdir()}
    if "metrics.json" in names:
        return "complete"
    if "trajectories.jsonl" in names:
        return "config and episodes"
    if "config.json" in names:
        return "config only"
    return "lock only" if names <= {".workbench.lock", ".workbench.lock.json"} else f"other: {sorted(names)}"


def test_merge_runs_killed_at_ten_points(reference_run, tmp_path):
    """``workbench merge-runs`` of two halves killed 10 times (into a new folder, or over a finished merge):
    the folder is absent or reads, a rerun completes, and it equals an uninterrupted merge byte for byte."""
    started = time.monotonic()
    ref = reference_run["out"]
    a, b = _part(ref, tmp_path / "a", "0:134:70"), _part(ref, tmp_path / "b", "35:134:70")
    argv = lambda out: WB + ["merge-runs", str(a), str(b), "--tasks", TASKS, "--out", str(out)]
    whole = tmp_path / "whole"
    proc = Proc(argv(whole), tmp_path / "logs", "reference")
    t_config = t_metrics = None
    while proc.alive():  # calibration: when config.json lands, when metrics.json (the last write) lands, the end
        if t_config is None and (whole / "config.json").exists():
            t_config = proc.elapsed()
        if t_metrics is None and (whole / "metrics.json").exists():
            t_metrics = proc.elapsed()
        time.sleep(0.0005)
    t_end = proc.elapsed()
    assert proc.p.returncode == 0, proc.err()
    expected = _folder_bytes(whole)
    # the merge of the halves is the run of all four tasks
    assert expected["trajectories.jsonl"] == reference_run["folder"]["trajectories.jsonl"]
    assert expected["run"] == reference_run["folder"]["run"]
    window = max((t_metrics or t_end) - (t_config or t_end), 0.002)  # config.json to metrics.json
    out = tmp_path / "out"
    rng = random.Random(SEED)
    points = []
    for i in range(KILLS):
        fresh, u, d, scale = rng.random() < 0.7, rng.random(), rng.random(), rng.choice([0.0, 0.05, 0.2, 1.0, 100.0])
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        before = {f: _inode(out / f) for f in MERGED}
        config_before = before["config.json"]
        # when config.json is (re)written, 0 to 1 write window later (between the merge's three writes) or up
        # to 100 (the exit); or a delay from the start (start-up, reading the parts)
        point = ({"after": 1, "delay": round(d * scale * window, 4)} if u < 0.6 else
                 {"delay": round(d * t_end * 1.1, 3)})
        proc = Proc(argv(out), tmp_path / "logs", f"kill{i}")
        _land(proc, point, lambda before=config_before: int(_inode(out / "config.json") not in (None, before)),
              poll=0.0005)
        at = round(proc.elapsed(), 3)
        alive, stray = proc.kill()
        if not alive:
            assert proc.p.returncode == 0, proc.err()
        state = _merge_state(out)
        assert not state.startswith("other"), state
        if state != "absent":
            eps = _episodes(out)  # config, episodes and metrics, strictly
            assert not eps or eps == {t: ln for t, ln in _episodes(whole).items()}, f"kill {i}: partial episodes"
        # which of its three writes (each a whole-file rename) this process made before the kill
        written = sum(_inode(out / f) not in (None, before[f]) for f in MERGED)
        points.append({**point, "over_a_finished_merge": not fresh, "killed_at_s": at, "state": state,
                       "files_written": written, "stray_processes": stray, "mid_run": alive and written < 3,
                       "after_last_write": alive and written == 3, "mid_write": alive and 0 < written < 3})
        rc = subprocess.run(argv(out), env=ENV, capture_output=True, text=True, check=False, timeout=300)
        assert rc.returncode == 0, f"kill {i}: the rerun failed: {rc.stderr[-2000:]}"
        assert _folder_bytes(out) == expected, f"kill {i}: the rerun differs from the uninterrupted merge"
    _report("merge_runs", started, kills=KILLS, mid_run=sum(p["mid_run"] for p in points),
            mid_write=sum(p["mid_write"] for p in points), lost=0, duplicated=0,
            killed_after_last_write=sum(p["after_last_write"] for p in points),
            finished_before_kill=KILLS - sum(p["mid_run"] or p["after_last_write"] for p in points),
            merge_s=round(t_end, 2), write_window_ms=round(window * 1000, 1),
            states=_count(p["state"] for p in points), stray_processes=sum(len(p["stray_processes"]) for p in points),
            points=points)


# -- a sweep over two Ray workers ----------------------------------------------------------------------------
def _grid(path: Path, out: Path, model: Path) -> Path:
    path.write_text(f"out: {out}\ndefaults: {{model: {model}, split: valid_unseen, tasks: '{TASKS}', "
                    "max_steps: 4, teacher_forcing: false}\nconfigurations:\n  - {name: a, memory: none}\n"
                    "  - {name: b, memory: none, max_steps: 3}\n")
    return path


def test_ray_sweep_killed_at_ten_points(tiny_model_dir, tmp_path):
    """``workbench sweep GRID --workers 2`` (a local Ray instance) killed 10 times with its Ray processes:
    every configuration's folder reads, nothing is lost or repeated, and the resumed sweep writes what a serial
    sweep writes."""
    started = time.monotonic()
    names = ("a", "b")
    ref_out = tmp_path / "serial"
    rc = subprocess.run(WB + ["sweep", str(_grid(tmp_path / "serial.yaml", ref_out, tiny_model_dir))], env=ENV,
                        capture_output=True, text=True, check=False, timeout=600)
    assert rc.returncode == 0, rc.stderr[-3000:]
    expected = {n: _folder_bytes(ref_out / n) for n in names}
    out = tmp_path / "ray"
    argv = WB + ["sweep", str(_grid(tmp_path / "ray.yaml", out, tiny_model_dir)), "--workers", "2"]
    total = lambda: sum(_lines(out / n / "trajectories.jsonl") for n in names)
    rng = random.Random(SEED)
    kept: dict[str, dict[str, str]] = {n: {} for n in names}
    startup = 35.0  # until the first episode: Ray's start-up, the workers' model load, an ALFWorld reset
    points, lost, torn = [], 0, 0
    for i in range(KILLS):
        u, a, b, c = rng.random(), rng.random(), rng.random(), rng.random()
        remaining = 2 * N_TASKS - sum(map(len, kept.values()))
        # after 1-2 more episodes, 0-3 s on (the next episodes, mid-play on both workers); or a delay from the
        # start (Ray starting, workers loading the model, the first episodes)
        point = ({"after": total() + 1 + int(c * 2), "delay": round(a * 3.0, 3)} if remaining >= 3 and u < 0.4
                 else {"delay": round(b * startup * 1.1, 3)})
        base, first = total(), []

        proc = Proc(argv, tmp_path / "logs", f"kill{i}")

        def count(proc=proc, base=base, first=first) -> int:
            n = total()
            if n > base and not first:
                first.append(proc.elapsed())  # when this process's first episode landed
            return n

        _land(proc, point, count, poll=0.05)
        at = round(proc.elapsed(), 2)
        if first:
            startup = first[0]
        alive, stray = proc.kill()
        if not alive:
            assert proc.p.returncode == 0, proc.err()
        gone, new, complete = [], 0, True
        for n in names:
            torn += _torn(out / n / "trajectories.jsonl")
            now = _episodes(out / n) if (out / n).exists() else {}
            gone += [f"{n}/{t}" for t, line in kept[n].items() if now.get(t) != line]
            new += len(now) - len(kept[n])
            complete &= bool(read_metrics(out / n)) if (out / n).exists() else False
            kept[n] = now
        if (out / "sweep.json").exists():
            json.loads((out / "sweep.json").read_text())
        lost += len(gone)
        assert not gone, f"kill {i}: episodes lost or changed: {gone}"
        points.append({**point, "killed_at_s": at, "new_episodes": new, "episodes": sum(map(len, kept.values())),
                       "stray_processes": stray, "mid_run": alive and not complete})
    rc = subprocess.run(argv, env=ENV, capture_output=True, text=True, check=False, timeout=600)
    assert rc.returncode == 0, rc.stderr[-3000:]
    for n in names:
        final = _episodes(out / n)
        assert len(final) == N_TASKS and all(final[t] == line for t, line in kept[n].items())
        assert _folder_bytes(out / n) == expected[n], f"{n}: differs from the serial sweep"
    _report("ray_sweep", started, kills=KILLS, mid_run=sum(p["mid_run"] for p in points), mid_write=torn,
            lost=lost, duplicated=0, killed_before_first_episode=sum(p["new_episodes"] == 0 for p in points),
            stray_processes=sum(len(p["stray_processes"]) for p in points),
            stray_names=_count(n for p in points for n in p["stray_processes"]), points=points)
