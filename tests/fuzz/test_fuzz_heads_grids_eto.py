"""Fuzz the heads, grid, ETO and sweep-record readers (see test_fuzz_run_and_memory.py for the oracle): a typed
error naming the file, or a read whose values are in range."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import yaml
from fuzz_tally import TALLY, classify, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from mutations import damaged_file, place

from workbench.attention.heads import (
    MAX_INDEX,
    HeadScores,
    HeadScoresRecord,
    read_retrieval_heads,
)
from workbench.eval.config import MAX_STEPS
from workbench.eval.sweep import load_grid
from workbench.eval.sweep_status import read_sweep_record
from workbench.memory.eto import export_eto, import_eto
from workbench.memory.trajectory import Step, Trajectory

SETTINGS = fuzz_settings(90)
ASSETS = Path(__file__).resolve().parents[2] / "workbench" / "assets" / "heads"
REPO = Path(__file__).resolve().parents[2]

GRID = """description: two conditions
out: runs/fuzz
defaults:
  model: smollm2-135m-alfworld-v2
  split: valid_unseen
  tasks: "0:4"
  max_steps: 10
  teacher_forcing: false
configurations:
  - {name: none, memory: none}
  - {name: arbiter-500, memory: arbiter, budget: 500, tasks: "0:134:4"}
"""


def _seeds() -> dict[str, str]:
    d = Path(tempfile.mkdtemp())
    try:
        trajs = [Trajectory(task_id=f"t{i}", goal="put a mug in the sink", success=True,
                            steps=(Step(observation="room", action="go to desk 1", thought="first the desk"),
                                   Step(observation="on the desk", action="take mug 1 from desk 1")))
                 for i in range(2)]
        export_eto(trajs, d / "eto.json")
        rec = HeadScoresRecord(model_name="m", n_layers=2, n_heads=3, n_pairs=5,
                               scores=[[0.1, 0.5, 0.0], [0.9, 0.2, 0.3]], top_heads=[(1, 0), (0, 1)])
        return {"heads": (ASSETS / "smollm2-135m-alfworld-v2.json").read_text(),
                "scores": rec.model_dump_json(indent=1),
                "grid": GRID,
                "eto": (d / "eto.json").read_text(),
                "sweep": (REPO / "runs" / "dagger" / "it0" / "runs" / "sweep.json").read_text()}
    finally:
        shutil.rmtree(d)


SEED = _seeds()


def _head_ok(h) -> bool:
    return (len(h) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < MAX_INDEX for x in h))


@SETTINGS
@given(case=damaged_file(SEED["heads"], jsonl=False))
def test_fuzz_retrieval_heads_file(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "smollm2-135m-alfworld-v2.json"
        place(path, case)

        def check(heads):
            assert heads and all(_head_ok(h) for h in heads) and len(set(map(tuple, heads))) == len(heads)

        classify("heads file", path, lambda: read_retrieval_heads(path, "smollm2-135m-alfworld-v2"), check)


@SETTINGS
@given(case=damaged_file(SEED["scores"], jsonl=False))
def test_fuzz_head_scores_file(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "head_scores.json"
        place(path, case)

        def check(hs: HeadScores):
            rec = hs.to_record()
            assert len(rec.scores) == rec.n_layers and all(len(r) == rec.n_heads for r in rec.scores)
            assert all(math.isfinite(x) for r in rec.scores for x in r)
            assert all(_head_ok(h) and h[0] < rec.n_layers and h[1] < rec.n_heads for h in hs.top_k(3))

        classify("head scores file", path, lambda: HeadScores.load(path), check)


@fuzz_settings(60)
@given(s=st.one_of(st.text(max_size=12), st.sampled_from(["-1.-1", "99999.99999", "\u0661.\u0662", "1_0.3", "3.4",
                                                        " 1.3", "1.3 ", "01.02", "1.", ".1", "1.2.3", "0.0"]),
                   st.tuples(st.integers(-3, 5000), st.integers(-3, 5000)).map(lambda t: f"{t[0]}.{t[1]}")))
def test_fuzz_heads_option(s):
    import argparse

    from workbench.cli._options import parse_heads

    ns = argparse.Namespace(heads=[s, "0.1"], scores=None, k=None)
    try:
        heads = parse_heads(ns)
    except ValueError as e:
        assert "--heads" in str(e)
        TALLY["--heads option"]["named error"] += 1
        return
    assert heads and all(_head_ok(h) for h in heads) and len(set(heads)) == len(heads)
    assert tuple(heads[0]) == tuple(int(x) for x in s.split("."))  # read as written, never rounded or parsed loosely
    TALLY["--heads option"]["correct read"] += 1


def _yaml_dump(obj) -> str:
    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True)


@SETTINGS
@given(case=damaged_file(SEED["grid"], jsonl=False, loads=yaml.safe_load, dumps=_yaml_dump))
def test_fuzz_grid(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "grid.yaml"
        place(path, case)

        def check(grid):
            names = grid.names
            assert names and len(names) == len(set(names))
            for c in grid.configs:
                assert isinstance(c.max_steps, int) and not isinstance(c.max_steps, bool)
                assert 1 <= c.max_steps <= MAX_STEPS and isinstance(c.tasks, str) and c.tasks.strip()
                assert all(isinstance(t, str) for t in c.task_types)
                assert c.budget is None or (isinstance(c.budget, int) and c.budget >= 1)

        classify("grid", path, lambda: load_grid(path, out=str(Path(d) / "out")), check)


@SETTINGS
@given(case=damaged_file(SEED["eto"], jsonl=False))
def test_fuzz_eto_import(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "eto.json"
        place(path, case)

        def check(trajs):
            assert trajs and all(isinstance(t, Trajectory) and t.task_id for t in trajs)
            assert all(isinstance(s.action, str) and s.action for t in trajs for s in t.steps)

        classify("ETO import", path, lambda: import_eto(path), check)


@SETTINGS
@given(case=damaged_file(SEED["sweep"], jsonl=False))
def test_fuzz_sweep_record(case):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "sweep.json"
        place(path, case)

        def check(rec):
            for inv in getattr(rec, "invocations", []) or []:
                assert inv.pid is None or (isinstance(inv.pid, int) and inv.pid >= 0)

        classify("sweep record", path, lambda: read_sweep_record(path), check)
