"""Where a memory method parts from ReAct, and the re-score file that keeps each parting state's edited scores: the
partings read from the committed ScienceWorld runs, an interrupted study that keeps what it finished and resumes, and
the errors that protect a kept file. The per-parting re-score (a live replay with the model and the LLM stages,
``_rescore_parting``) is replaced here by a stand-in that records what it was asked, so the study's bookkeeping is
tested in milliseconds; the re-score's parts are Session's tests (tests/live), its numbers the committed files under
runs/scienceworld/partings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.agents.edits import ClearMemory, RemoveReminder
from workbench.cli import main
from workbench.eval.run_folder import read_config
import workbench.studies.parting_rescore as study
from workbench.files import FormatError
from workbench.studies.parting_rescore import _keep, parting_rescore_table, parting_rescores, partings

ROOT = Path(__file__).resolve().parents[2]
SLICE = ROOT / "runs/scienceworld/methods-slice-fixed-worlds"
ARBITER, REACT, PROACTIVE = (str(SLICE / c) for c in ("arbiter", "none", "proactive"))


def test_the_partings_of_the_committed_slice_start_alike_and_name_both_actions():
    found = {p["task"]: p for p in partings(ARBITER, REACT)}
    # the finding of notebook 08: MemArbiter parts from ReAct at the second step of find-animal's test task
    assert found["test/find-animal/225"] == {"task": "test/find-animal/225", "step": 2, "action": "go to kitchen",
                                             "reference action": "go to door to living room"}
    assert all(p["action"] != p["reference action"] for p in found.values())
    assert partings(REACT, REACT) == []  # a run never parts from itself


def test_a_resumed_study_returns_the_kept_rows_and_scores_nothing_again(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "_rescore_parting", _StandIn(crash="*"))
    monkeypatch.setattr(study, "load_model", lambda *a, **k: pytest.fail("a kept study loaded the model"))
    wanted = partings(ARBITER, REACT)
    kept = [{"task": p["task"], "step": p["step"], "tv": 0.5, "reproduced": True} for p in wanted]
    out = tmp_path / "kept.json"
    _keep(out, ARBITER, REACT, read_config(ARBITER).run, [ClearMemory()], kept)
    # every parting is in the file: no model is loaded, nothing scored, the rows come back as kept
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
    with pytest.raises(FormatError, match="not a parting re-score file"):
        parting_rescores(ARBITER, REACT, out=bad)
    with pytest.raises(FormatError, match="not a parting re-score file"):
        parting_rescore_table(bad)
    _keep(bad, ARBITER, REACT, read_config(ARBITER).run, [ClearMemory()], [{"tv": 1.0}])
    with pytest.raises(FormatError, match=r"rows\[0\].*names no task"):
        parting_rescores(ARBITER, REACT, out=bad)
    _keep(bad, ARBITER, REACT, read_config(ARBITER).run, [ClearMemory()], [{"task": "test/find-animal/225"}])
    with pytest.raises(FormatError, match=r"rows\[0\].*older workbench.*re-score"):
        parting_rescores(ARBITER, REACT, out=bad)


class _StandIn:
    """``_rescore_parting`` without a model: a row per parting, a crash on the task named ``crash``."""

    def __init__(self, crash: str | None = None):
        self.asked: list[str] = []
        self.crash = crash

    def __call__(self, method_folder, p, lm, edits, ran, ref):
        self.asked.append(p["task"])
        if p["task"] == self.crash:
            raise RuntimeError("simulated crash")
        return {"task": p["task"], "step": p["step"], "tv": 0.25, "reproduced": True,
                "takes the reference action": True}


LM = type("LM", (), {"name": "smollm2-135m-alfworld-v2", "dtype": "bfloat16"})()  # the runs' model, never called


def test_an_interrupted_study_keeps_what_it_finished_and_resumes_the_rest(tmp_path, monkeypatch):
    wanted = [p["task"] for p in partings(ARBITER, REACT)]
    out = tmp_path / "kept.json"
    crash = _StandIn(crash=wanted[1])
    monkeypatch.setattr(study, "_rescore_parting", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        parting_rescores(ARBITER, REACT, model=LM, out=out)
    assert [r["task"] for r in json.loads(out.read_text())["rows"]] == wanted[:1]  # the finished one, whole
    again = _StandIn()
    monkeypatch.setattr(study, "_rescore_parting", again)
    rows = parting_rescores(ARBITER + "/", REACT, model=LM, out=out)  # the same folder, spelled otherwise
    assert again.asked == wanted[1:] and [r["task"] for r in rows] == wanted
    assert [r["task"] for r in json.loads(out.read_text())["rows"]] == wanted
    # a later study of one task keeps the others' rows in the file and scores nothing again
    assert parting_rescores(ARBITER, REACT, model=LM, tasks=wanted[:1], out=out) == rows[:1]
    assert again.asked == wanted[1:] and len(json.loads(out.read_text())["rows"]) == len(wanted)


def test_tasks_must_be_partings_given_as_a_list_and_non_finite_scores_are_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "_rescore_parting", _StandIn())
    with pytest.raises(ValueError, match="test/find-animl/225: not a parting"):
        parting_rescores(ARBITER, REACT, model=LM, tasks=["test/find-animl/225"], out=tmp_path / "a.json")
    with pytest.raises(ValueError, match="not one string"):
        parting_rescores(ARBITER, REACT, model=LM, tasks="test/find-animal/225", out=tmp_path / "a.json")
    assert not (tmp_path / "a.json").exists()
    monkeypatch.setattr(study, "_rescore_parting", lambda *a: {"task": a[1]["task"], "tv": float("nan")})
    with pytest.raises(ValueError, match="non-finite tv"):
        parting_rescores(ARBITER, REACT, model=LM, out=tmp_path / "b.json")
    assert not (tmp_path / "b.json").exists()


def test_two_studies_do_not_write_into_one_folder_at_once(tmp_path, monkeypatch):
    from workbench.locks import FolderBusyError, folder_lock

    monkeypatch.setattr(study, "_rescore_parting", _StandIn())
    with folder_lock(tmp_path, "another study"):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:  # another process: the lock is per process (a thread re-enters it)
            err = pool.apply(_study_in_a_child, (str(tmp_path / "kept.json"),))
    assert FolderBusyError.__name__ in err and "another study" in err
    assert not (tmp_path / "kept.json").exists()


def _study_in_a_child(out: str) -> str:
    try:
        parting_rescores(ARBITER, REACT, model=LM, out=out)
    except Exception as e:  # noqa: BLE001 - what the child saw, for the parent's assertion
        return f"{type(e).__name__}: {e}"
    return "no error"


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
    assert main(["partings", ARBITER, REACT, "--task", "test/find-animal/225"]) == 0
    assert [json.loads(line)["task"] for line in capsys.readouterr().out.splitlines()] == ["test/find-animal/225"]
    for argv, err in ((["--out", "/nonexistent/x.json"], None), (["--edit", "remove-reminder"], "give --out"),
                      (["--task", "test/find-animl/225"], "not a parting")):
        reference = PROACTIVE if err is None else REACT
        assert main(["partings", ARBITER, reference, *argv]) == 2  # a user error, one line
        assert (err or "the reference is ReAct") in capsys.readouterr().err
