"""Issue 43's findings, each reproduced as a hostile user would and shown with what the workbench does now.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/hostile_inputs.py [--out FILE.md]

Every case runs the real command line (``workbench ...``, in this process through ``workbench.cli.main``, or in a
child process where two processes are the point) or, for a file only the library reads, the library's reader.
A case passes when the outcome is the expected one -- a one-line error naming the file (exit 2), a refusal naming
the holder's PID -- and nothing stored changed. The table lists each case with its exit status and first line.
Needs no model but for the concurrent-run case, which starts one real ``workbench run`` of the default agent.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.cli import main
from workbench.eval.config import RunConfig
from workbench.eval.run_folder import write_run_config
from workbench.files import FormatError
from workbench.memory import MemoryBase
from workbench.memory.trajectory import MemoryEntry, Segment, Step, Trajectory

ROWS: list[tuple[str, str, int | str, str, bool]] = []


def cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse's own errors
            rc = e.code
    return rc, err.getvalue().strip()


def record(group: str, case: str, rc: int | str, message: str, ok: bool) -> None:
    first = message.splitlines()[0] if message else ""
    ROWS.append((group, case, rc, first, ok))
    print(f"[{'ok' if ok else 'FAIL'}] {group}: {case}: {rc}: {first[:160]}", flush=True)


def expect_cli(group: str, case: str, argv: list[str], names: str, unchanged: list[Path] = ()) -> None:
    before = {p: p.read_bytes() for p in unchanged if p.is_file()}
    rc, err = cli(argv)
    same = all(p.read_bytes() == b for p, b in before.items())
    record(group, case, rc, err, rc == 2 and names in err and "Traceback" not in err and same)


def expect_error(group: str, case: str, fn, names: str) -> None:
    try:
        fn()
    except (FormatError, ValueError, FileNotFoundError) as e:
        record(group, case, "error", f"{type(e).__name__}: {e}", names in str(e))
        return
    except Exception as e:  # noqa: BLE001 (the point: anything else is a finding)
        record(group, case, "crash", f"{type(e).__name__}: {e}", False)
        return
    record(group, case, "accepted", "read without an error", False)


# -- memory bases --------------------------------------------------------------------------------------------

def make_base(root: Path) -> Path:
    mb = MemoryBase(root)
    mb.add_many([MemoryEntry(entry_id=f"e{i}", task_id=f"t{i}", goal=f"goal {i}", segments=(Segment(action="look"),))
                 for i in range(3)])
    for k in (1, 2):
        mb.commit(mb.get("e1").model_copy(update={"goal": f"goal 1, edit {k}"}), "edit")
    return root


def memory_cases(tmp: Path) -> None:
    g = "memory base"
    b = make_base(tmp / "b0")
    history = (b / "history.jsonl").read_text()
    (b / "entries.jsonl").write_text("\n".join((b / "entries.jsonl").read_text().splitlines()[1:]) + "\n")
    rc, err = cli(["memory", "check", str(b)])
    record(g, "sed -i 1d entries.jsonl (line 1 is now the store header): every entry and record still there", rc,
           err, rc == 0 and len(MemoryBase(b)) == 3 and (b / "history.jsonl").read_text() == history)
    b = make_base(tmp / "b1")
    lines = (b / "entries.jsonl").read_text().splitlines()
    (b / "entries.jsonl").write_text("\n".join(lines[:1] + lines[2:]) + "\n")
    expect_cli(g, "sed -i 2d entries.jsonl (the first entry); memory log", ["memory", "log", str(b)],
               "of an entry entries.jsonl lacks")
    expect_cli(g, "then memory rollback of another entry: refused, history kept",
               ["memory", "rollback", str(b), "e1", "--to", "0"], "integrity problem", [b / "history.jsonl"])
    rc, _ = cli(["memory", "check", str(b), "--repair"])
    record(g, "memory check --repair restores the entry from its history", rc, "", rc == 0 and len(MemoryBase(b)) == 3)
    b = make_base(tmp / "b2")
    (b / "history.jsonl").write_bytes(b"\0" * 100)
    expect_cli(g, "history.jsonl of 100 NUL bytes; memory diff 0 2", ["memory", "diff", str(b), "e1", "--from", "0",
                                                                      "--to", "2"], "history.jsonl: line 1")
    b = make_base(tmp / "b3")
    data = (b / "history.jsonl").read_bytes()
    (b / "history.jsonl").write_bytes(data[: len(data) // 2])
    expect_cli(g, "history.jsonl cut in half; memory diff 0 2", ["memory", "diff", str(b), "e1", "--from", "0", "--to",
                                                                 "2"], "integrity problem")
    b = make_base(tmp / "b-appended")
    h = (b / "history.jsonl").read_text().splitlines()
    (b / "history.jsonl").write_text("\n".join(h + [h[0]]) + "\n")
    rc, err = cli(["memory", "log", str(b)])
    record(g, "a record appended after the last commit: an unfinished write, ignored and said so", rc, err,
           rc == 0 and "never reached entries.jsonl" in err)
    for case, edit, says in [
        ("a duplicate history record", lambda h: h[:1] + [h[0]] + h[1:], "version 0 again"),
        ("a record of an unknown entry", lambda h: h[:3] + [h[0].replace('"e0"', '"ghost"')] + h[3:], "ghost"),
        ("versions out of order", lambda h: [h[0], h[1], h[2], h[4], h[3]], "after version"),
        ("a negative version", lambda h: [h[0].replace('"version":0', '"version":-1', 1)] + h[1:], "version"),
        ("a version of 1e30", lambda h: [h[0].replace('"version":0', '"version":1e30', 1)] + h[1:], "version"),
        ('success: "yes"', lambda h: [h[0].replace('"success":true', '"success":"yes"')] + h[1:], "success"),
        ('entry_id: ""', lambda h: [h[0].replace('"entry_id":"e0"', '"entry_id":""', 1)] + h[1:], "entry_id"),
    ]:
        b = make_base(tmp / f"b-{len(ROWS)}")
        (b / "history.jsonl").write_text("\n".join(edit((b / "history.jsonl").read_text().splitlines())) + "\n")
        expect_cli(g, case, ["memory", "log", str(b)], says, [b / "history.jsonl", b / "entries.jsonl"])


# -- run folders ---------------------------------------------------------------------------------------------

def make_run(root: Path) -> Path:
    write_run_config(RunConfig(out=str(root), memory="none", tasks="0:2", teacher_forcing=False))
    eps = [Trajectory(task_id=f"valid_unseen/t{i}", goal="g", steps=(Step(observation="o", action="look"),))
           for i in range(2)]
    (root / "trajectories.jsonl").write_text("".join(e.model_dump_json() + "\n" for e in eps))
    return root


def run_cases(tmp: Path) -> None:
    g = "run folder"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    for case, line, says in [
        ('--resume over {"task_id": ..., "steps": "garbage"}', '{"task_id": "valid_unseen/x", "goal": "g", '
         '"steps": "garbage"}', "line 3: field 'steps'"),
        ("--resume over a line that is a list", "[1, 2]", "line 3: a JSON list"),
        ("--resume over a line that is a number", "7", "line 3: a JSON int"),
        ("--resume over a line that is a string", '"x"', "line 3: a JSON str"),
        ("--resume over a line without task_id", '{"goal": "g"}', "line 3: field 'task_id'"),
    ]:
        r = make_run(tmp / f"r-{len(ROWS)}")
        with open(r / "trajectories.jsonl", "a") as fh:
            fh.write(line + "\n")
        t0 = time.time()
        p = subprocess.run([sys.executable, "-m", "workbench.cli", "run", "--memory", "none", "--tasks", "0:2",
                            "--no-teacher-forcing", "--resume", "--out", str(r)], capture_output=True, text=True,
                           env=env, timeout=600)
        msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        record(g, case + f" (refused before playing, {time.time() - t0:.0f} s)", p.returncode, msg,
               p.returncode == 2 and says in msg)
    r = make_run(tmp / "cfg-empty")
    (r / "config.json").write_text("")
    expect_cli(g, "an empty config.json (merge-runs)", ["merge-runs", str(r), "--tasks", "0:2", "--out",
                                                        str(tmp / "m0")], "config.json: empty")
    r = make_run(tmp / "cfg-list")
    (r / "config.json").write_text("[1]")
    expect_cli(g, "a config.json that is a list (merge-runs)", ["merge-runs", str(r), "--tasks", "0:2", "--out",
                                                                str(tmp / "m1")], "holds a JSON list")
    for value in (-5, "50", "NaN", 1e30):
        r = make_run(tmp / f"cfg-{len(ROWS)}")
        d = json.loads((r / "config.json").read_text())
        text = json.dumps({**d, "run": {**d["run"], "max_steps": value}}).replace('"NaN"', "NaN")
        (r / "config.json").write_text(text)
        expect_cli(g, f"merge-runs over max_steps: {json.dumps(value) if value != 'NaN' else 'NaN'}",
                   ["merge-runs", str(r), "--tasks", "0:2", "--out", str(tmp / f"m-{len(ROWS)}")], "config.json")
    r = make_run(tmp / "bad-episode")
    with open(r / "trajectories.jsonl", "a") as fh:
        fh.write('{"task_id": "valid_unseen/x", "goal": 5}\n')
    for cmd in (["proactive-sft", str(r), "--out", str(tmp / "sft")],
                ["merge-runs", str(r), "--tasks", "0:2", "--out", str(tmp / "m2")]):
        expect_cli(g, f"{cmd[0]} over a bad episode line", cmd, "trajectories.jsonl: line 3: field 'goal'")
    r = make_run(tmp / "no-steps")
    ep = Trajectory(task_id="valid_unseen/t9", goal="g", meta={"steps": [{"proactive": {"trigger": "start"}}]})
    with open(r / "trajectories.jsonl", "a") as fh:
        fh.write(ep.model_dump_json() + "\n")
    expect_cli(g, "proactive-sft over an episode without steps", ["proactive-sft", str(r), "--out",
                                                                   str(tmp / "sft2")], "line 3")
    r = make_run(tmp / "dir")
    (r / "trajectories.jsonl").unlink()
    (r / "trajectories.jsonl").mkdir()
    for cmd in (["proactive-sft", str(r), "--out", str(tmp / "sft3")],
                ["merge-runs", str(r), "--tasks", "0:2", "--out", str(tmp / "m3")]):
        expect_cli(g, f"{cmd[0]}: a directory where trajectories.jsonl belongs", cmd, "is a directory")


def concurrent_case(tmp: Path) -> None:
    """Two `workbench run --resume` on one folder: the second refuses, naming the first's PID."""
    out = tmp / "concurrent"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "workbench.cli", "run", "--memory", "none", "--tasks", "0:2", "--max-steps", "5",
            "--no-teacher-forcing", "--resume", "--no-progress", "--out", str(out)]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300
        while not (out / ".workbench.lock.json").exists():
            if first.poll() is not None or time.time() > deadline:
                record("locks", "two concurrent run --resume", "setup", first.stderr.read()[-300:], False)
                return
            time.sleep(0.2)
        second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        msg = second.stderr.strip().splitlines()[-1] if second.stderr.strip() else ""
        record("locks", "two concurrent `workbench run --resume` on one folder: the second", second.returncode, msg,
               second.returncode == 2 and f"in use by PID {first.pid}" in msg)
    finally:
        first.kill()
        first.wait()


# -- heads, grids, ETO ---------------------------------------------------------------------------------------

def heads_cases(tmp: Path) -> None:
    from workbench.attention.heads import read_retrieval_heads

    g = "heads"
    good = {"model": "m", "source": "s", "heads": [[1, 2]]}
    for case, obj in [("a list at the top", [[1, 2]]), ("no heads key", {"model": "m", "source": "s"}),
                      ("a null head", {**good, "heads": [None]}), ("an infinite value", None),
                      ("heads: []", {**good, "heads": []}), ("[[-1,-5]]", {**good, "heads": [[-1, -5]]}),
                      ("[[1e9,1e9]]", {**good, "heads": [[1e9, 1e9]]}), ("[[20.7,3.2]]", {**good, "heads": [[20.7, 3.2]]}),
                      ("strings", {**good, "heads": [["1", "2"]]}), ("booleans", {**good, "heads": [[True, False]]}),
                      ("duplicates", {**good, "heads": [[1, 2], [1, 2]]})]:
        f = tmp / f"m-{len(ROWS)}" / "m.json"
        f.parent.mkdir()
        f.write_text(json.dumps(obj) if obj is not None else '{"model": "m", "source": "s", "heads": [[1, Infinity]]}')
        expect_error(g, f"retrieval-heads file: {case}", lambda f=f: read_retrieval_heads(f, "m"), str(f))
    scores = tmp / "scores.json"
    scores.write_text("[1, 2]")
    expect_cli(g, "--scores file that is a list", ["refine", "--scores", str(scores), "--base-out",
                                                   str(tmp / "never")], "scores.json")
    for h in ("-1.-1", "99999.99999", "\u0661.\u0662", "1_0.3"):
        expect_cli(g, f"--heads={h}", ["refine", f"--heads={h}", "--base-out", str(tmp / "never")], "--heads")
    expect_cli(g, "--heads 1.2 1.2", ["refine", "--heads", "1.2", "1.2", "--base-out", str(tmp / "never")], "--heads")
    record(g, "no folder left behind by the refused refines", "-", "", not (tmp / "never").exists())


def grid_cases(tmp: Path) -> None:
    g = "grids"
    base = ("out: {out}\ndefaults: {{memory: none, split: valid_unseen, max_steps: 5}}\nconfigurations:\n"
            "  - {{name: a, tasks: {tasks}}}\n")
    f = tmp / "deep.yaml"
    f.write_text("[" * 5000 + "]" * 5000)
    expect_cli(g, "5,000 nested brackets", ["sweep", str(f), "--dry-run"], "deep.yaml")
    d = tmp / "dir.yaml"
    d.mkdir()
    expect_cli(g, "a directory as the grid", ["sweep", str(d), "--dry-run"], "dir.yaml")
    loop = tmp / "loop.yaml"
    loop.symlink_to(loop)
    expect_cli(g, "a symlink loop as the grid", ["sweep", str(loop), "--dry-run"], "loop.yaml")
    f = tmp / "latin.yaml"
    f.write_bytes(base.format(out=tmp / "o", tasks='"0:2"').encode() + b"# caf\xe9\n")
    expect_cli(g, "non-UTF-8", ["sweep", str(f), "--dry-run"], "latin.yaml")
    for case, tasks in [("tasks: ''", "''"), ("tasks: '::'", "'::'"), ("tasks: '-1:'", "'-1:'"),
                        ("tasks: '0:99999'", "'0:99999'"), ("tasks: 5", "5")]:
        f = tmp / f"g{len(ROWS)}.yaml"
        f.write_text(base.format(out=tmp / "o", tasks=tasks))
        expect_cli(g, f"--dry-run with {case}", ["sweep", str(f), "--dry-run"], f.name)
    for case, extra in [("max_steps: 1e30", "max_steps: 1e30"), ('task_types: "pick"', "task_types: pick"),
                        ("a duplicate key", "memory: traj")]:
        f = tmp / f"g{len(ROWS)}.yaml"
        f.write_text(base.format(out=tmp / "o", tasks='"0:2"').replace("  - {name: a,", f"  - {{{extra}, name: a,")
                     if extra != "memory: traj" else base.format(out=tmp / "o", tasks='"0:2"') + "out: elsewhere\n")
        expect_cli(g, f"--dry-run with {case}", ["sweep", str(f), "--dry-run"], f.name)


def eto_cases(tmp: Path) -> None:
    from workbench.memory.eto import import_eto

    g = "ETO import"
    rec = {"id": "x", "conversations": [{"from": "human", "value": "task"}, {"from": "gpt", "value": "ok"},
                                        {"from": "human", "value": "Your task is to: put a mug in the sink."},
                                        {"from": "gpt", "value": "Thought: go.\nAction: go to sink 1"}]}
    for case, data in [("id: null", [{**rec, "id": None}]), ("id: [1]", [{**rec, "id": [1]}]),
                       ("duplicate ids", [rec, rec]), ("an empty list", []), ("a single object", rec)]:
        f = tmp / f"eto{len(ROWS)}.json"
        f.write_text(json.dumps(data))
        expect_error(g, case, lambda f=f: import_eto(f), str(f))


def main_(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the table (markdown) here")
    ap.add_argument("--no-model", action="store_true", help="skip the two cases that start `workbench run`")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        memory_cases(tmp)
        heads_cases(tmp)
        grid_cases(tmp)
        eto_cases(tmp)
        if not a.no_model:
            run_cases(tmp)
            concurrent_case(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = sum(r[4] for r in ROWS)
    lines = [f"# Issue 43's findings, reproduced ({ok} of {len(ROWS)} as expected)", "",
             "`OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/hostile_inputs.py`", "",
             "| | what | case | exit | first line of the message |", "|---|---|---|---|---|"]
    lines += [f"| {'ok' if r[4] else '**FAIL**'} | {r[0]} | {r[1]} | {r[2]} | {r[3][:200].replace('|', '/')} |"
              for r in ROWS]
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(f"\n{ok} of {len(ROWS)} cases as expected")
    return 0 if ok == len(ROWS) else 1


if __name__ == "__main__":
    sys.exit(main_())
