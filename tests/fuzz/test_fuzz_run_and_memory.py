"""Fuzz the run-folder and memory-base readers: every damaged file ends in a typed error naming the file, or in a
correct read (the values in range, nothing dropped but a torn last line). Never a traceback of another type, never
a silent acceptance of an out-of-range value. Seeded (derandomized); `WORKBENCH_FUZZ_EXAMPLES=N` for more."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import pytest
from fuzz_tally import TALLY, classify, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from mutations import damaged_file, place

from workbench.eval.config import DTYPES, MAX_STEPS, RunConfig
from workbench.eval.run_folder import (
    batch_metrics,
    episode_lines,
    read_config,
    read_metrics,
    write_run_config,
)
from workbench.eval.teacher_forced import combine_teacher_forced, read_teacher_forced
from workbench.files import FormatError
from workbench.memory.base import MemoryBase, MemoryBaseIntegrityError, read_store
from workbench.memory.trajectory import (
    MAX_VERSION,
    MemoryEntry,
    Segment,
    Step,
    Trajectory,
)

SETTINGS = fuzz_settings(130)


def _episodes() -> list[Trajectory]:
    return [Trajectory(task_id=f"valid_unseen/task-{i}", task_type="pick", goal="put a mug in the sink — l’étagère",
                       success=bool(i % 2), source="agent:x",
                       steps=tuple(Step(observation=f"obs {k}", action="look", reward=float(k == 2), done=k == 2)
                                   for k in range(3)),
                       meta={"steps": [{"p": 0.5}] * 3}) for i in range(3)]


def _seed_files() -> dict[str, str]:
    d = Path(tempfile.mkdtemp())
    try:
        write_run_config(RunConfig(out=str(d / "run"), memory="none", tasks="0:3", teacher_forcing=False))
        eps = _episodes()
        parts = [{"task_id": e.task_id, "n_correct": 1, "n_steps": 2, "p_sum": 0.7, "per_task": [1, 2],
                  "per_step": [{"task_id": e.task_id, "step": k, "expert": "look", "chosen": "look" if k else "go",
                                "p_expert": 0.35, "memory_entry": None} for k in range(2)]} for e in eps]
        tf = combine_teacher_forced({"model": "m", "dtype": "float32", "memory": "none", "split": "valid_unseen",
                                     "tasks": "0:3"}, parts)
        mb = MemoryBase(d / "base")
        mb.add_many([MemoryEntry(entry_id=f"e{i}", task_id=f"t{i}", goal=f"goal {i}",
                                 segments=(Segment(action="look"), Segment(observation="o", action="go"))) for i in range(3)])
        mb.commit(mb.get("e1").model_copy(update={"goal": "edited"}), "edit", provenance={"task": "t9"})
        return {"config": (d / "run" / "config.json").read_text(),
                "episodes": "".join(e.model_dump_json() + "\n" for e in eps),
                "metrics": json.dumps(batch_metrics(eps), indent=1),
                "teacher_forced": json.dumps(tf, indent=1),
                "entries": (d / "base" / "entries.jsonl").read_text(),
                "history": (d / "base" / "history.jsonl").read_text()}
    finally:
        shutil.rmtree(d)


SEED = _seed_files()


def _finite(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return True


def _whole_lines(data: bytes) -> tuple[int, bool]:
    """(non-blank lines, whether the last one is unterminated)."""
    text = data.decode("utf-8", errors="replace")
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return len(lines), bool(text) and not text.endswith("\n") and bool(text.split("\n")[-1].strip())


@SETTINGS
@given(case=damaged_file(SEED["config"], jsonl=False))
def test_fuzz_run_config(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        place(path, case)

        def check(cfg):
            r = cfg.run
            assert isinstance(r.max_steps, int) and not isinstance(r.max_steps, bool) and 1 <= r.max_steps <= MAX_STEPS
            assert isinstance(r.seed, int) and r.seed >= 0 and r.dtype in DTYPES
            assert all(isinstance(v, str) and v for v in (r.split, r.tasks, r.memory, r.model))
            assert all(isinstance(x, str) for x in (*r.task_types, *r.backend_args, *r.triggers))
            assert isinstance(r.teacher_forcing, bool) and isinstance(r.record_admissible, bool)
            assert r.budget is None or (isinstance(r.budget, int) and r.budget >= 1)
            assert all(isinstance(v, str | None) for v in cfg.versions.values())

        classify("run config.json", path, lambda: read_config(d), check)


@SETTINGS
@given(case=damaged_file(SEED["episodes"], jsonl=True))
def test_fuzz_trajectories(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trajectories.jsonl"
        place(path, case)

        def check(rows):
            ids = [tid for _, tid, _ in rows]
            assert len(ids) == len(set(ids)) and all(ids)
            n, unterminated = _whole_lines(case[1])
            assert len(rows) == n or (len(rows) == n - 1 and unterminated), "a line was dropped"
            for _, _, line in rows:
                t = Trajectory.model_validate_json(line, strict=True)
                assert all(math.isfinite(s.reward) for s in t.steps) and isinstance(t.success, bool)

        classify("run trajectories.jsonl", path, lambda: episode_lines(path), check)


@SETTINGS
@given(case=damaged_file(SEED["metrics"], jsonl=False))
def test_fuzz_metrics(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "metrics.json"
        place(path, case)

        def check(m):
            assert isinstance(m, dict) and _finite(m)
            n = m.get("n_episodes", 0)
            assert isinstance(n, int) and not isinstance(n, bool) and n >= 0

        classify("run metrics.json", path, lambda: read_metrics(d), check)


@SETTINGS
@given(case=damaged_file(SEED["teacher_forced"], jsonl=False))
def test_fuzz_teacher_forced(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "teacher_forced.json"
        place(path, case)

        def check(tf):
            r = tf["result"]
            assert 0 <= r["accuracy"] <= 1 and 0 <= r["mean_p_expert"] <= 1
            assert r["n_steps"] == sum(c[1] for c in tf["per_task"].values()) and r["n_tasks"] == len(tf["per_task"])
            assert all(0 <= s["p_expert"] <= 1 and s["step"] >= 0 for s in tf["per_step"])

        classify("run teacher_forced.json", path, lambda: read_teacher_forced(path), check)


@SETTINGS
@given(which=st.sampled_from(["entries", "history"]), data=st.data())
def test_fuzz_memory_base(which, data):
    case = data.draw(damaged_file(SEED[which], jsonl=True))
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "base"
        root.mkdir()
        for name in ("entries", "history"):
            (root / f"{name}.jsonl").write_text(SEED[name])
        place(root / f"{which}.jsonl", case)
        before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file() and not p.is_symlink()}

        def check(mb: MemoryBase):
            st_ = read_store(root)
            assert not st_.problems
            ids = [e.entry_id for e in mb]
            assert len(ids) == len(set(ids)) and all(ids)
            for e in mb:
                versions = [r.version for r in mb.history(e.entry_id)]
                assert versions == sorted(set(versions)) and versions and versions[-1] == e.version
                assert mb.history(e.entry_id)[-1].entry == e and 0 <= e.version <= MAX_VERSION
            assert all(r.entry_id in mb for r in mb._history)
            if which == "history" and case[0] == "bytes":  # nothing dropped but a torn tail or an unfinished write
                n, unterminated = _whole_lines(case[1])
                kept = len(st_.history) + len(st_.pending)
                assert kept == n or (kept == n - 1 and unterminated), "a history record was dropped"

        classify(f"memory base {which}.jsonl", root, lambda: MemoryBase(root), check)
        after = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file() and not p.is_symlink()}
        assert after == before, "reading a store changed it"


@pytest.mark.parametrize("reader", ["config", "episodes"])
def test_the_seed_files_themselves_read(reader, tmp_path):
    (tmp_path / "config.json").write_text(SEED["config"])
    (tmp_path / "trajectories.jsonl").write_text(SEED["episodes"])
    assert read_config(tmp_path).run.memory == "none" and len(episode_lines(tmp_path / "trajectories.jsonl")) == 3
    assert isinstance(MemoryBaseIntegrityError(tmp_path, []), FormatError)


def test_zz_every_reader_saw_both_outcomes_and_the_suite_ran_a_thousand_cases(request):
    """Runs last (file and name order): over what this session ran, each reader both refused damaged files and
    read intact ones (a reader refusing everything would pass the oracle vacuously), and a whole fuzz run is at
    least 1,000 cases (`make test`: 130 per run-folder / memory-base reader, 90 per other, 60 for --heads)."""
    fuzz = [it for it in request.session.items if "/fuzz/" in str(it.fspath) and hasattr(it, "obj")
            and hasattr(it.obj, "hypothesis")]
    if len(fuzz) < 11 or not TALLY:
        pytest.skip("not the whole fuzz suite in this session")
    for reader, outcomes in TALLY.items():
        assert outcomes["named error"] > 0 and outcomes["correct read"] > 0, (reader, dict(outcomes))
    assert sum(sum(c.values()) for c in TALLY.values()) >= 1000
