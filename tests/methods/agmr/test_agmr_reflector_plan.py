"""The paper's reflector by default (m* and tau only), the oracle behind --reflector-sees-plan, legacy folders read as
what they were, executions adopted from an identical refinement, and the stage ledger of a model-backed refinement."""

from __future__ import annotations

import json

import pytest
from agmr_builders import PLAN, RIGHT, TASK, WRONG, ScriptedRefiner, make_base

from workbench.llm import ScriptedBackend
from workbench.llm.offline import OfflineALFWorldBackend
from workbench.methods.agmr.refine import adoptable_executions
from workbench.methods.agmr.refine_config import RefineConfig
from workbench.methods.agmr.refine_folder import prepare, refine_paths, refine_stats
from workbench.memory.trajectory import append_jsonl


class Spy(OfflineALFWorldBackend):
    """The offline algorithms, keeping every payload they were sent."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict] = []

    def chat(self, messages, **kw):
        self.seen.append({"context": kw.get("context"), "prompt": "\n".join(m.content for m in messages)})
        return super().chat(messages, **kw)


@pytest.mark.parametrize("sees", [False, True])
def test_the_reflector_reads_the_expert_plan_only_when_asked(tmp_path, sees):
    spy = Spy()
    r = ScriptedRefiner(make_base(tmp_path), [(False, WRONG, None), (True, RIGHT, None)], backend=spy,
                        reflector_sees_plan=sees)
    rec = r.refine_task(TASK, "put a apple in fridge.")
    (reflector,) = [s for s in spy.seen if s["context"]["stage"] == "reflector_failure"]
    assert reflector["context"]["input"]["expert_plan"] == (list(PLAN) if sees else [])
    assert ("Reference plan" in reflector["prompt"]) is sees and (PLAN[1] in reflector["prompt"]) is sees
    assert rec.outcome == "committed"
    prov = r.base.history("valid_train/tomato/t1")[-1].provenance
    assert prov["reflector_sees_plan"] is sees


def test_the_plan_free_reflector_finds_the_error_from_the_memory_alone(tmp_path):
    r = ScriptedRefiner(make_base(tmp_path), [(False, WRONG, None), (True, RIGHT, None)], reflector_sees_plan=False)
    rec = r.refine_task(TASK, "put a apple in fridge.")
    refl = rec.attempts[0].reflection
    # the memory's actions, renamed to this task's object, are the reference: the run's first move (countertop, where
    # the memory went to the diningtable) already leaves it, so the error is step 0 and its segment 0
    assert (refl["critical_step"], refl["supporting_segment"], refl["correct_action"]) == (0, 0, "go to diningtable 1")
    assert "never performed the first plan step" in refl["reason"]


def test_a_folder_saved_before_the_option_reads_as_the_oracle_reflector(tmp_path):
    make_base(tmp_path)
    root = tmp_path / "refined"
    oracle = RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source"), reflector_sees_plan=True)
    prepare(root, oracle)
    cfg_path, _, _ = refine_paths(root)
    saved = json.loads(cfg_path.read_text())
    del saved["config"]["reflector_sees_plan"]  # what every refinement before issue 47 wrote
    cfg_path.write_text(json.dumps(saved))
    prepare(root, oracle)  # resumes: same parameters
    assert refine_stats(root)["config"]["reflector_sees_plan"] is True
    with pytest.raises(ValueError, match="reflector_sees_plan"):
        prepare(root, RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source")))


def test_an_identical_execution_is_adopted_and_a_different_one_played(tmp_path):
    make_base(tmp_path)
    first = tmp_path / "first"
    cfg = RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source"))
    base, _ = prepare(first, cfg)
    _, log, exec_path = refine_paths(first)
    r = ScriptedRefiner(base, [(False, WRONG, None), (True, RIGHT, None)], source=str(tmp_path / "source"),
                        reflector_sees_plan=False)
    r.on_execution = lambda e: (r.executions.append(e), append_jsonl(exec_path, e))
    append_jsonl(log, r.refine_task(TASK, "put a apple in fridge."))

    second, _ = prepare(tmp_path / "second", cfg)
    adopt = adoptable_executions(first, cfg)
    assert len(adopt) == 2
    again = ScriptedRefiner(second, [], source=str(tmp_path / "source"), reflector_sees_plan=False)
    again.adoptable = adopt
    rec = again.refine_task(TASK, "put a apple in fridge.")  # an empty script: every execution must be adopted
    assert rec.outcome == "committed"
    assert [e.adopted_from for e in again.executions] == [f"{first}::{TASK.task_id}#0", f"{first}::{TASK.task_id}#1"]
    assert again.executions[1].trajectory == r.executions[1].trajectory
    other = RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source"), dtype="bfloat16")
    with pytest.raises(ValueError, match="dtype"):
        adoptable_executions(first, other)
    with pytest.raises(ValueError, match="no refinement there"):
        adoptable_executions(tmp_path / "nothing", cfg)


def test_a_model_backed_refinement_records_each_calls_fate_and_a_refused_reply(tmp_path):
    reflection = json.dumps({"critical_step": 99, "wrong_action": "look", "correct_action": "go to fridge 1",
                             "supporting_segment": 0})
    r = ScriptedRefiner(make_base(tmp_path), [(False, WRONG, None)], backend=ScriptedBackend(["nonsense", reflection]),
                        max_attempts=1)
    rec = r.refine_task(TASK, "put a apple in fridge.")
    (call,) = rec.stage_calls
    assert call["stage"] == "reflector_failure" and call["requests"] == 2 and call["backend"] == "scripted"
    assert call["fate"] == "rejected" and "critical_step 99" in call["reason"]  # parsed after repair, then refused


def test_an_offline_refinement_records_no_stage_calls(tmp_path):
    r = ScriptedRefiner(make_base(tmp_path), [(False, WRONG, None), (True, RIGHT, None)])
    assert r.refine_task(TASK, "put a apple in fridge.").stage_calls == ()
