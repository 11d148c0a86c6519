"""Where a memory method parts from ReAct, and the re-score file that keeps each parting state's edited scores: the
partings read from the committed ScienceWorld runs, a resumed study that scores nothing again, and the errors that
protect a kept file. The re-score itself (a live replay with the model and the LLM stages) is what the committed
files under runs/scienceworld/partings hold; Session's ScienceWorld tests cover its parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.agents.edits import ClearMemory, RemoveReminder
from workbench.cli import main
from workbench.eval.run_folder import read_config
from workbench.studies.parting_rescore import _keep, parting_rescore_table, parting_rescores, partings

ROOT = Path(__file__).resolve().parents[2]
SLICE = ROOT / "runs/scienceworld/methods-slice-fixed-worlds"
ARBITER, REACT, PROACTIVE = (str(SLICE / c) for c in ("arbiter", "none", "proactive"))


def test_the_partings_of_the_committed_slice_start_alike_and_name_both_actions():
    found = {p["task"]: p for p in partings(ARBITER, REACT)}
    # the finding of notebook 08: MemArbiter parts from ReAct at the second step of find-animal's test task
    assert found["test/find-animal/225"] == {"task": "test/find-animal/225", "step": 1, "action": "go to kitchen",
                                             "reference action": "go to door to living room"}
    assert all(p["action"] != p["reference action"] for p in found.values())
    assert partings(REACT, REACT) == []  # a run never parts from itself


def test_a_resumed_study_returns_the_kept_rows_and_scores_nothing_again(tmp_path):
    wanted = partings(ARBITER, REACT)
    kept = [{"task": p["task"], "step": p["step"] + 1, "tv": 0.5} for p in wanted]
    out = tmp_path / "kept.json"
    _keep(out, ARBITER, REACT, read_config(ARBITER).run, [ClearMemory()], kept)
    # every parting is in the file: no model is loaded (model=None would load one), the rows come back as kept
    assert parting_rescores(ARBITER, REACT, out=out) == kept
    assert list(parting_rescore_table(out)["task"]) == [p["task"] for p in wanted]
    assert json.loads(out.read_text())["edits"] == ["ClearMemory()"]


def test_a_kept_file_of_other_runs_or_edits_is_refused_and_left_as_it_was(tmp_path):
    out = tmp_path / "kept.json"
    _keep(out, ARBITER, REACT, read_config(ARBITER).run, [ClearMemory()], [])
    before = out.read_bytes()
    with pytest.raises(ValueError, match="name another file"):
        parting_rescores(ARBITER, REACT, edits=[RemoveReminder()], out=out)
    with pytest.raises(ValueError, match="name another file"):
        parting_rescores(PROACTIVE, REACT, out=out)
    assert out.read_bytes() == before
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": 3}\n')
    with pytest.raises(ValueError, match="not a parting re-score file"):
        parting_rescores(ARBITER, REACT, out=bad)
    with pytest.raises(ValueError, match="not a parting re-score file"):
        parting_rescore_table(bad)


def test_the_reference_must_be_react_on_the_same_agent():
    with pytest.raises(ValueError, match="the reference is ReAct"):
        parting_rescores(ARBITER, PROACTIVE)
    alfworld = ROOT / "runs/full-bfloat16/01_baselines/smollm2-135m-alfworld-v2/none"  # ReAct, the same agent, ALFWorld
    with pytest.raises(ValueError, match="not the same agent on the same benchmark"):
        parting_rescores(ARBITER, str(alfworld))


def test_the_command_lists_the_partings_as_json_lines(capsys):
    assert main(["partings", ARBITER, REACT]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == partings(ARBITER, REACT)
    assert main(["partings", ARBITER, PROACTIVE, "--out", "/nonexistent/x.json"]) == 2  # a user error, one line
    assert "the reference is ReAct" in capsys.readouterr().err
