"""AGMR's loop (Algorithm 1) on scripted executions: each branch, retries from the candidate, the audit trail,
typed errors that leave the base untouched, and resume after a kill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agmr_builders import PLAN, RIGHT, TASK, WRONG, ScriptedRefiner, entry, make_base

from workbench.llm import ScriptedBackend
from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import append_jsonl
from workbench.methods.agmr.refine_config import RefineConfig
from workbench.methods.agmr.refine_folder import (
    REFINE_DIR,
    load_log,
    prepare,
    refine_paths,
)


def _rows(n_seg, n_steps, strong=(1,), weak=(), value=1.0):
    return [[value if k in strong else (0.001 if k in weak else 0.1)] * n_steps for k in range(n_seg)]


def test_a_failure_whose_edit_is_verified_is_committed_as_a_new_version_with_its_provenance(tmp_path):
    base = make_base(tmp_path)
    r = ScriptedRefiner(base, [(False, WRONG, None), (True, RIGHT, None)])
    rec = r.refine_task(TASK, "put a apple in fridge.")
    assert (rec.branch, rec.outcome, rec.committed_version) == ("failure", "committed", 1)
    assert rec.first_pattern == rec.first_rule_pattern == rec.committed_pattern == "attended_but_wrong"
    stored = base.get("valid_train/tomato/t1")
    assert stored.version == 1 and "Do exactly 'take tomato 1 from diningtable 1'" in stored.segments[1].thought
    assert stored.segments[0] == entry().segments[0]  # only the supporting segment changed
    prov = base.history(stored.entry_id)[-1].provenance
    assert prov["refinement_task"] == TASK.task_id and prov["branch"] == "failure"
    assert prov["pattern"] == prov["rule_pattern"] == "attended_but_wrong"
    assert prov["critical_step"] == 1 and prov["target_segment"] == 1
    assert prov["column"]["column"][1] == 1.0 and prov["column"]["rank"] == 1
    assert prov["verification"] == [f"{TASK.task_id}#1"] and "+thought: Do exactly" in prov["diff"]
    # The candidate was what the verification run saw; the executions are all on record.
    assert r.shown[1].segments == stored.segments and [e.candidate for e in r.executions] == [False, True]


def test_a_failed_verification_retries_from_the_candidate_its_trajectory_and_its_C_then_discards(tmp_path):
    base = make_base(tmp_path)
    closer = ["go to countertop 1", "take apple 1 from countertop 1", "go to countertop 1"]  # now fails at step 2
    on_3 = _rows(6, 3, strong=(3,))  # the candidate's run reads segment 3 (the new target) most
    r = ScriptedRefiner(base, [(False, WRONG, None), (False, closer, on_3), (False, closer, on_3),
                               (False, closer, on_3)])
    rec = r.refine_task(TASK, "put a apple in fridge.")
    assert (rec.outcome, len(rec.attempts)) == ("discarded", 3)
    a1, a2, a3 = rec.attempts
    assert a1.reflection["critical_step"] == 1 and a1.reflection["supporting_segment"] == 1
    # Attempt 2 reflected on the first candidate's run: a new critical step, a new target, an edit on top of edit 1.
    assert a2.reflection["critical_step"] == 2 and a2.reflection["correct_action"] == "go to fridge 1"
    assert r.shown[2].segments[1] == r.shown[1].segments[1] and r.shown[2].segments[3] != r.shown[1].segments[3]
    # Attempt 3: the same reflection again; the deterministic refiner escalates (cue + correction, rivals scoped).
    assert a3.execution == f"{TASK.task_id}#3" and "escalated" in a3.refinement["rationale"]
    seg3 = r.shown[3].segments[3].thought
    assert seg3.startswith("KEY STEP") and "Do exactly 'go to fridge 1'" in seg3
    assert base.get("valid_train/tomato/t1") == entry() and len(base.history("valid_train/tomato/t1")) == 1
    # A fourth proposal on the escalated memory would change nothing: a typed error, counted, nothing played.
    r4 = ScriptedRefiner(base, [(False, closer, on_3)], max_attempts=1)
    r4.script = []
    from workbench.methods.agmr.refine import _Run

    with pytest.raises(Exception, match="unchanged"):
        r4._failure_edit(r.shown[3], _Run(r.executions[-1]), TASK.task_id)


@pytest.mark.parametrize("rows, pattern, distractor_edit", [
    (_rows(6, 3, strong=(1, 4)), "distracted_by_irrelevant", True),
    (_rows(6, 3, strong=(), weak=(1,)), "missed_relevant", False),
])
def test_each_pattern_gets_its_edit(tmp_path, rows, pattern, distractor_edit):
    base = make_base(tmp_path)
    rec = ScriptedRefiner(base, [(False, WRONG, rows), (True, RIGHT, None)]).refine_task(TASK, "put a apple in fridge.")
    assert rec.committed_pattern == rec.first_rule_pattern == pattern
    segs = base.get("valid_train/tomato/t1").segments
    assert segs[1].thought.startswith("KEY STEP")  # salience of the target
    assert ("Scope:" in (segs[4].thought or "")) is distractor_edit


def test_figure_9_counts_the_final_iterations_diagnosis(tmp_path):
    base = make_base(tmp_path)
    rec = ScriptedRefiner(base, [(False, WRONG, _rows(6, 3, strong=(1, 4))), (False, WRONG, _rows(6, 3, strong=(), weak=(1,))),
                                 (True, RIGHT, None)]).refine_task(TASK, "put a apple in fridge.")
    assert rec.outcome == "committed" and len(rec.attempts) == 2
    assert rec.first_rule_pattern == "distracted_by_irrelevant" and rec.final_rule_pattern == "missed_relevant"
    assert rec.final_pattern == rec.committed_pattern == rec.attempts[-1].pattern
    history = base.history("valid_train/tomato/t1")
    assert history[-1].provenance["final_rule_pattern"] == "missed_relevant"  # a resume rebuilds it


def test_a_success_simplification_is_committed_when_success_holds_and_rolled_back_at_once_when_not(tmp_path):
    base = make_base(tmp_path)
    rec = ScriptedRefiner(base, [(True, RIGHT, None), (False, WRONG, None)]).refine_task(TASK, "put a apple in fridge.")
    assert (rec.branch, rec.outcome, len(rec.attempts)) == ("success", "rolled_back", 1)
    assert base.get("valid_train/tomato/t1") == entry()
    rec = ScriptedRefiner(base, [(True, RIGHT, None), (True, RIGHT, None)]).refine_task(TASK, "put a apple in fridge.")
    assert rec.outcome == "committed" and rec.committed_pattern == "low_utilization_redundancy"
    segs = base.get("valid_train/tomato/t1").segments
    assert [s.action for s in segs] == [s.action for k, s in enumerate(entry().segments) if k != 2]  # the 'look'
    # the neighbour no longer reports the deleted move: it shows what the deleted segment showed (smoothing)
    assert segs[2].observation == entry().segments[2].observation
    assert (rec.segments_before, rec.segments_after) == (6, 5) and rec.tokens_after < rec.tokens_before
    # the audit trail holds what the weak rule read: per-segment c^max / c-bar, the weak, redundant and deletable sets
    u = base.history("valid_train/tomato/t1")[-1].provenance["utilization"]
    assert u == rec.attempts[0].utilization and u["weak_rule"] == "relative" and len(u["c_max"]) == 6
    assert 2 in u["deletable"] and set(u["deletable"]) == set(u["weak"]) & set(u["redundant"])
    assert u["c_max"][1] > u["c_max"][2]  # the supporting segment is read, the deleted 'look' is not
    from workbench.viz.agmr import _html_attempt

    html = _html_attempt(rec, rec.attempts[0])  # the explorer shows what the rule read
    assert "low_utilization_redundancy" in html and f"deletable {u['deletable']}" in html


def test_a_strongly_used_redundant_segment_is_kept_by_agmr_and_deleted_without_the_refiner(tmp_path):
    rows = [[0.1, 0.1, 0.1] for _ in range(6)]
    rows[2] = [0.1, 2.0, 0.1]  # the 'look' is read sharply at one step
    base = make_base(tmp_path)
    rec = ScriptedRefiner(base, [(True, RIGHT, rows)]).refine_task(TASK, "put a apple in fridge.")
    assert rec.outcome == "no_edit"  # redundant but utilized: nothing to verify
    rec = ScriptedRefiner(base, [(True, RIGHT, rows), (True, RIGHT, None)], variant="no-agr").refine_task(
        TASK, "put a apple in fridge.")
    assert rec.outcome == "committed" and len(base.get("valid_train/tomato/t1").segments) == 5


def test_a_refiner_that_deletes_a_used_segment_is_refused_whatever_the_backend(tmp_path, monkeypatch):
    from workbench.llm.offline.backend import OFFLINE_ALGORITHMS
    from workbench.methods.agmr.stage_types import (
        Refinement,
        SegmentEdit,
        SuccessRefinerInput,
    )

    rows = [[0.1, 0.1, 0.1] for _ in range(6)]
    rows[2] = [0.1, 2.0, 0.1]  # the 'look' is redundant but read sharply: an LLM refiner deletes it anyway
    greedy = Refinement(pattern="low_utilization_redundancy", edits=(SegmentEdit(index=2, op="delete"),), rationale="r")
    monkeypatch.setitem(OFFLINE_ALGORITHMS, "refiner_success", (SuccessRefinerInput, lambda inp: greedy))
    base = make_base(tmp_path)
    rec = ScriptedRefiner(base, [(True, RIGHT, rows), (True, RIGHT, None)]).refine_task(TASK, "put a apple in fridge.")
    assert rec.outcome == "error" and "not both redundant" in rec.attempts[0].error
    assert base.get("valid_train/tomato/t1") == entry()  # nothing was played or committed


def test_a_failure_edit_may_touch_only_the_supporting_segment_and_supported_distractors(tmp_path, monkeypatch):
    from workbench.llm.offline.backend import OFFLINE_ALGORITHMS
    from workbench.methods.agmr.stage_types import (
        FailureRefinerInput,
        Refinement,
        SegmentEdit,
    )

    def stray(inp):  # an LLM refiner that also rewrites a segment nobody attended to
        i = inp.reflection.supporting_segment
        return Refinement(pattern="missed_relevant", target_segment=i, edits=(
            SegmentEdit(index=i, op="replace", text="Thought: KEY STEP\nAction: " + inp.memory.segments[i].action),
            SegmentEdit(index=5, op="replace", text="Thought: unrelated\nAction: " + inp.memory.segments[5].action)),
            rationale="r")

    monkeypatch.setitem(OFFLINE_ALGORITHMS, "refiner_failure", (FailureRefinerInput, stray))
    base = make_base(tmp_path)
    rec = ScriptedRefiner(base, [(False, WRONG, _rows(6, 3, strong=(1,)))], max_attempts=1).refine_task(
        TASK, "put a apple in fridge.")
    assert rec.outcome == "error" and "edits segments [5]" in rec.attempts[0].error
    assert base.get("valid_train/tomato/t1") == entry()


def test_without_the_refiner_a_failure_always_gets_the_in_place_correction(tmp_path):
    base = make_base(tmp_path)
    rec = ScriptedRefiner(base, [(False, WRONG, _rows(6, 3, strong=(1, 4))), (True, RIGHT, None)],
                          variant="no-agr").refine_task(TASK, "put a apple in fridge.")
    assert rec.outcome == "committed" and rec.committed_pattern is None
    assert rec.first_rule_pattern == "distracted_by_irrelevant"  # the rule still reads C, for the record
    segs = base.get("valid_train/tomato/t1").segments
    assert segs[1].thought.startswith("Do exactly") and segs[4] == entry().segments[4]


_REFLECTION = json.dumps({"critical_step": 1, "wrong_action": "go to fridge 1",
                          "correct_action": "take apple 1 from countertop 1", "supporting_segment": 1})


@pytest.mark.parametrize("replies, error", [
    ([_REFLECTION, "the memory looks fine to me", "still no JSON"], "LLMOutputError"),
    ([_REFLECTION, json.dumps({"pattern": "missed_relevant", "edits": [{"index": 99, "op": "replace",
                                                                         "text": "Thought: x"}]})],
     "RefinementError: the edit cannot be applied"),
    ([_REFLECTION.replace('"supporting_segment": 1', '"supporting_segment": 42')], "supporting_segment 42 does not exist"),
    ([_REFLECTION.replace('"critical_step": 1', '"critical_step": 9')], "critical_step 9 is not a step"),
])
def test_a_reply_that_cannot_be_applied_is_a_typed_error_counted_as_an_attempt_and_nothing_changes(
        tmp_path, replies, error):
    base = make_base(tmp_path)
    before = (tmp_path / "source" / "entries.jsonl").read_bytes()
    r = ScriptedRefiner(base, [(False, WRONG, None)], backend=ScriptedBackend(replies), max_attempts=1)
    rec = r.refine_task(TASK, "put a apple in fridge.")
    assert rec.outcome == "error" and len(rec.attempts) == 1 and error in rec.attempts[0].error
    assert len(r.executions) == 1  # no verification ran
    assert (tmp_path / "source" / "entries.jsonl").read_bytes() == before


def test_resume_after_a_kill_recovers_a_landed_commit_and_replays_an_unfinished_task(tmp_path):
    make_base(tmp_path)
    cfg = RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source"))
    root = tmp_path / "refined"
    base, done = prepare(root, cfg)
    assert done == set() and len(base) == 2 and (root / REFINE_DIR / "config.json").exists()
    _, log_path, exec_path = refine_paths(root)
    r = ScriptedRefiner(base, [(False, WRONG, None), (True, RIGHT, None)],
                        source=str(tmp_path / "source"))
    r.on_execution = lambda e: (r.executions.append(e), append_jsonl(exec_path, e))
    r.refine_task(TASK, "put a apple in fridge.")  # killed right after the commit: no log line
    other = r.executions[0].model_copy(update={"task_id": "valid_seen/other/t9", "id": "valid_seen/other/t9#0"})
    with exec_path.open("a") as fh:  # an unfinished task's execution, then a torn line
        fh.write(other.model_dump_json() + "\n" + '{"id": "torn')
    base, done = prepare(root, cfg)
    assert done == {TASK.task_id}
    (rec,) = load_log(root)
    assert rec.recovered and rec.outcome == "committed" and rec.committed_version == 1
    ids = [json.loads(line)["id"] for line in exec_path.read_text().splitlines()]
    assert ids == [f"{TASK.task_id}#0", f"{TASK.task_id}#1"]
    assert base.get("valid_train/tomato/t1").version == 1
    with pytest.raises(ValueError, match="other parameters"):
        prepare(root, RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source"),
                                   max_attempts=2))


def test_the_source_base_is_never_written(tmp_path):
    make_base(tmp_path)
    src = tmp_path / "source"
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    base, _ = prepare(tmp_path / "out", RefineConfig(heads=((0, 0),), retriever="bm25", source=str(src)))
    ScriptedRefiner(base, [(False, WRONG, None), (True, RIGHT, None)]).refine_task(TASK, "put a apple in fridge.")
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before
    assert MemoryBase(src).get("valid_train/tomato/t1").version == 0
    assert MemoryBase(tmp_path / "out").get("valid_train/tomato/t1").version == 1
    assert PLAN  # the scripted task's plan is what the offline reflector read


def test_a_kill_while_the_source_is_copied_leaves_a_folder_the_next_call_copies_again(tmp_path, monkeypatch):
    from workbench.memory.base import MemoryBase

    make_base(tmp_path)
    root = tmp_path / "refined"
    cfg = RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source"))
    real = MemoryBase.clone

    def killed(self, dest):
        (Path(dest) / "history.jsonl").write_text("")  # half a copy, then the kill
        raise KeyboardInterrupt

    monkeypatch.setattr(MemoryBase, "clone", killed)
    with pytest.raises(KeyboardInterrupt):
        prepare(root, cfg)
    monkeypatch.setattr(MemoryBase, "clone", real)
    base, done = prepare(root, cfg)
    assert len(base) == len(MemoryBase(tmp_path / "source")) and done == set()
    assert "cloning" not in json.loads(refine_paths(root)[0].read_text())
