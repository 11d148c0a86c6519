"""AGMR's offline stages on ScienceWorld (``offline-scienceworld``): the plan-tracking reflector over the gold path,
the redundancy rule, the refiner with ScienceWorld's action kinds, and the backend that answers only them."""

from __future__ import annotations

import pytest

from workbench.eval.config import RunConfig
from workbench.llm import LLMConfigError, get_backend, run_stage
from workbench.memory.trajectory import MemoryEntry, Segment, Step, Trajectory
from workbench.methods.agmr.offline import scienceworld as sw
from workbench.methods.agmr.refine_config import RefineConfig
from workbench.methods.agmr.stage_types import FailureRefinerInput, ReflectorInput

GOAL = "Your task is to boil water. First, focus on the substance. Then, take actions that will cause it to boil."
GOLD = ("open door to kitchen", "go to kitchen", "look around", "pick up metal pot", "move metal pot to sink", "activate sink",
        "deactivate sink", "focus on substance in metal pot", "move metal pot to stove", "activate stove", "wait")


def memory() -> MemoryEntry:
    acts = ("open door to kitchen", "go to kitchen", "look around", "pick up pot", "move pot to sink",
            "activate sink", "deactivate sink", "focus on water in pot", "move pot to stove", "activate stove",
            "wait")
    obs = ("", "The door is now open.", "You move to the kitchen.", "This room is called the kitchen.",
           "You move the pot to the inventory.", "You move the pot to the sink.", "The sink is now activated.",
           "The sink is now deactivated.", "You focus on the water.", "You move the pot to the stove.",
           "The stove is now activated.")
    return MemoryEntry(entry_id="train/boil/0", task_id="train/boil/0", task_type="boil", goal=GOAL,
                       initial_observation="This room is called the hallway.",
                       segments=tuple(Segment(observation=o, action=a) for o, a in zip(obs, acts)))


def run(actions) -> Trajectory:
    return Trajectory(task_id="dev/boil/14", task_type="boil", goal=GOAL, split="dev", success=False,
                      initial_observation="This room is called the hallway.",
                      steps=tuple(Step(observation=f"obs {k}", action=a) for k, a in enumerate(actions)))


@pytest.mark.parametrize("action, kind", [("focus on substance in metal pot", "focus on"), ("look around", "look around"),
                                          ("look at stove", "look at"), ("go to kitchen", "go to"), ("0", "option"),
                                          ("wait1", "wait1"), ("  Move  pot to stove", "move")])
def test_an_actions_kind_is_its_verb(action, kind):
    assert sw.action_kind(action) == kind


def test_the_critical_error_is_the_first_action_after_the_last_advance_on_the_gold_path():
    actions = ("open door to kitchen", "go to kitchen", "pick up metal pot", "look around", "go to hallway",
               "look around")
    r = sw.reflect_failure(ReflectorInput(memory=memory(), trajectory=run(actions), expert_plan=GOLD))
    assert (r.critical_step, r.wrong_action, r.correct_action) == (3, "look around", "move metal pot to sink")
    assert memory().segments[r.supporting_segment].action == "move pot to sink"  # same kind, shared words
    assert "pick up metal pot" in r.reason


def test_without_a_plan_the_memorys_actions_are_the_plan():
    r = sw.reflect_failure(ReflectorInput(memory=memory(), trajectory=run(("look around", "go to hallway"))))
    assert (r.critical_step, r.correct_action, r.supporting_segment) == (0, "open door to kitchen", 0)
    assert "memory's own actions" in r.reason


def test_a_refused_or_repeated_memory_step_is_a_redundancy_candidate():
    m = memory()
    segs = list(m.segments)
    segs[3] = Segment(observation=segs[3].observation, action="pick up pot")
    segs.insert(4, Segment(observation="You move the pot to the inventory.", action="pick up pot"))
    segs.insert(2, Segment(observation="You move to the kitchen.", action="eat kitchen"))
    segs[3] = Segment(observation="No known action matches that input.", action=segs[3].action)
    out = sw.reflect_success(ReflectorInput(memory=m.model_copy(update={"segments": tuple(segs)}),
                                            trajectory=run(GOLD)))
    assert {c.index for c in out.redundant_segments} == {2, 5}


def test_the_backend_answers_the_refinements_stages_with_scienceworlds_kinds_and_refuses_others():
    backend = get_backend("offline-scienceworld")
    refl = run_stage(backend, "reflector_failure", ReflectorInput(
        memory=memory(), trajectory=run(("open door to kitchen", "go to kitchen", "look around")),
        expert_plan=GOLD)).value
    assert refl.correct_action == "pick up metal pot"
    n = len(memory().segments)
    col = tuple(1.0 if k == refl.supporting_segment else 0.05 for k in range(n))  # attended, yet wrong
    out = run_stage(backend, "refiner_failure", FailureRefinerInput(memory=memory(), reflection=refl,
                                                                    utilization=col)).value
    assert out.pattern == "attended_but_wrong" and "'pick up' action" in out.edits[0].text
    with pytest.raises(LLMConfigError, match="offline-scienceworld has no algorithm for stage .arbiter_writer. .its stages: .*reflector_failure"):
        run_stage(backend, "arbiter_writer", {"goal": GOAL, "step": 0, "observation": "x"})


def test_the_backends_are_each_refused_on_the_other_benchmark_and_in_runs():
    assert RefineConfig(env="scienceworld", backend="offline-scienceworld").backend == "offline-scienceworld"
    with pytest.raises(ValueError, match="not alfworld's"):
        RefineConfig(backend="offline-scienceworld")
    with pytest.raises(ValueError, match="refinement stages on ScienceWorld"):
        RunConfig(out="x", env="scienceworld", memory="arbiter", backend="offline-scienceworld")


def test_a_refinement_on_scienceworlds_rules_commits_an_edit_on_a_score_gain_alone(tmp_path):
    from tests.methods.agmr.agmr_builders import TASK, WRONG, make_base
    from tests.methods.agmr.test_agmr_graded import GradedRefiner
    from workbench.llm.offline import OfflineScienceWorldBackend

    r = GradedRefiner(make_base(tmp_path), [(False, WRONG, None, 10), (False, WRONG, None, 45)],
                      backend=OfflineScienceWorldBackend())
    rec = r.refine_task(TASK, "put a apple in fridge.")
    assert (rec.branch, rec.outcome) == ("failure", "committed")
    assert not rec.attempts[-1].success and rec.attempts[-1].reward_gain >= 0.3
    assert "gold path" in rec.attempts[0].reflection["reason"]  # ScienceWorld's reflector wrote it


def test_an_edit_of_a_segment_over_the_reply_limit_keeps_the_head_of_its_observation():
    from workbench.methods.agmr.stage_types import MAX_SEGMENT_CHARS

    m = memory()
    look = "This room is called the kitchen. In it, you see: " + ", ".join(f"a thing {k}" for k in range(200))
    segs = list(m.segments)
    segs[4] = Segment(observation=look, action="move pot to sink")
    m = m.model_copy(update={"segments": tuple(segs)})
    refl = sw.reflect_failure(ReflectorInput(memory=m, trajectory=run(GOLD[:4] + ("look around",)), expert_plan=GOLD))
    assert refl.supporting_segment == 4
    col = tuple(1.0 if k == 4 else 0.05 for k in range(len(segs)))
    first = sw.refine_failure_sw(FailureRefinerInput(memory=m, reflection=refl, utilization=col))
    text = first.edits[0].text
    assert len(text) <= MAX_SEGMENT_CHARS and text.startswith("Observation: This room is called the kitchen.")
    assert " …\nThought: " in text and text.endswith("Action: move pot to sink")
