"""Offline AGMR stages: reflector (both branches), retrieval analyzer, refiner rule, and applying its edits."""

from __future__ import annotations

import pytest
from llm_cases import (
    EXPERT_PLAN,
    failed_run,
    memory_clean_tomato,
    memory_with_detours,
    successful_run,
)

from workbench.llm import get_backend, run_stage
from workbench.memory.segment_text import parse_segment_text, segment_text
from workbench.memory.trajectory import Segment
from workbench.methods.agmr.offline.refiner import diagnose, weakly_utilized
from workbench.methods.agmr.offline.reflector import reflect_failure
from workbench.methods.agmr.segment_edits import SegmentEditError, apply_segment_edits
from workbench.methods.agmr.stage_types import (
    FailureRefinerInput,
    FailureReflection,
    RedundantSegment,
    ReflectorInput,
    RetrievalAnalyzerInput,
    SegmentEdit,
    SuccessRefinerInput,
    SuccessReflection,
)

OFFLINE = get_backend("offline-alfworld")


def test_failure_reflector_finds_where_the_run_left_the_expert_plan() -> None:
    r = run_stage(OFFLINE, "reflector_failure",
                  ReflectorInput(memory=memory_clean_tomato(), trajectory=failed_run(), expert_plan=EXPERT_PLAN)).value
    # Steps 0-2 find and take the apple (a detour to countertop 1 is tolerated); step 3 skips the sink.
    assert (r.critical_step, r.wrong_action, r.correct_action) == (3, "go to fridge 1", "go to sinkbasin 1")
    assert r.supporting_segment == 2  # the memory's "go to sinkbasin 1", same template and receptacle type


def test_failure_reflector_without_plan_maps_the_sibling_memory_onto_this_task() -> None:
    r = run_stage(OFFLINE, "reflector_failure",
                  ReflectorInput(memory=memory_clean_tomato(), trajectory=failed_run())).value
    assert (r.critical_step, r.correct_action, r.supporting_segment) == (3, "go to sinkbasin 1", 2)


def test_failure_reflector_points_at_a_missing_transformation() -> None:
    fail = failed_run()
    plan = ("go to countertop 2", "take apple 1 from countertop 2", "go to sinkbasin 1",
            "clean apple 1 with sinkbasin 1", "go to fridge 1", "open fridge 1", "put apple 1 in/on fridge 1")
    steps = (*fail.steps[:3], fail.steps[3].model_copy(update={"action": "go to sinkbasin 1"}),
             fail.steps[4].model_copy(update={"observation": "On the sinkbasin 1, you see nothing.",
                                              "action": "go to fridge 1"}))
    r = run_stage(OFFLINE, "reflector_failure", ReflectorInput(memory=memory_clean_tomato(),
                                                                trajectory=fail.model_copy(update={"steps": steps}),
                                                                expert_plan=plan)).value
    assert (r.critical_step, r.correct_action, r.supporting_segment) == (4, "clean apple 1 with sinkbasin 1", 3)


def test_success_reflector_flags_detours_and_keeps_the_useful_path() -> None:
    r = run_stage(OFFLINE, "reflector_success",
                  ReflectorInput(memory=memory_with_detours(), trajectory=successful_run())).value
    assert [x.index for x in r.redundant_segments] == [0, 1, 2, 3, 5]
    assert "Nothing happens" in r.redundant_segments[-1].reason
    clean = run_stage(OFFLINE, "reflector_success",
                      ReflectorInput(memory=memory_clean_tomato(), trajectory=successful_run())).value
    assert clean.redundant_segments == ()


def test_returning_for_a_second_object_is_not_a_repeat() -> None:
    segs = (Segment(action="go to countertop 1"), Segment(action="take pillow 1 from countertop 1"),
            Segment(action="go to sofa 1"), Segment(action="put pillow 1 in/on sofa 1"),
            Segment(action="go to countertop 1"), Segment(action="take pillow 2 from countertop 1"),
            Segment(action="go to sofa 1"), Segment(action="put pillow 2 in/on sofa 1"),
            Segment(action="go to sofa 1"))
    mem = memory_clean_tomato().model_copy(update={"segments": segs, "goal": "put two pillow in sofa."})
    r = run_stage(OFFLINE, "reflector_success", ReflectorInput(memory=mem, trajectory=successful_run())).value
    assert [x.index for x in r.redundant_segments] == [8]


def test_retrieval_analyzer_finds_the_step_memory_made_possible() -> None:
    a = run_stage(OFFLINE, "retrieval_analyzer", RetrievalAnalyzerInput(
        memory=memory_clean_tomato(), failed=failed_run(), succeeded=successful_run())).value
    assert a.key_step == 3 and a.key_action == "clean apple 1 with sinkbasin 1"
    assert a.key_segment == 3 and a.key_context == "Action: clean tomato 1 with sinkbasin 1"


@pytest.mark.parametrize("column,pattern,distractors", [
    ((0.9, 0.8, 0.1, 0.3, 0.2, 0.1, 0.1), "missed_relevant", ()),
    ((0.2, 0.1, 0.8, 0.1, 1.0, 0.1, 0.1), "distracted_by_irrelevant", (4,)),
    ((0.7, 0.1, 0.8, 0.1, 0.75, 0.1, 0.1), "distracted_by_irrelevant", (4, 0)),
    ((0.1, 0.1, 1.0, 0.2, 0.3, 0.1, 0.1), "attended_but_wrong", ()),
    ((0.0,) * 7, "missed_relevant", ()),
])
def test_refiner_rule_maps_utilization_to_pattern(column, pattern, distractors) -> None:
    assert diagnose(column, 2) == (pattern, distractors)


def _refine(column):
    refl = FailureReflection(critical_step=3, wrong_action="go to fridge 1", correct_action="go to sinkbasin 1",
                             supporting_segment=2)
    mem = memory_clean_tomato()
    out = run_stage(OFFLINE, "refiner_failure", FailureRefinerInput(memory=mem, reflection=refl,
                                                                     utilization=column)).value
    return mem, out, apply_segment_edits(mem.segments, out.edits)


def test_missed_relevant_strengthens_the_target_with_a_task_cue() -> None:
    mem, out, new = _refine((0.9, 0.8, 0.1, 0.3, 0.2, 0.1, 0.1))
    assert out.pattern == "missed_relevant" and out.target_segment == 2 and [e.index for e in out.edits] == [2]
    assert len(new) == len(mem.segments) and new[2].action == "go to sinkbasin 1"
    assert new[2].thought.startswith("KEY STEP for 'put a clean tomato in fridge.'")
    assert "Now clean it." in new[2].thought  # the original thought is kept after the cue
    assert new[2].observation == mem.segments[2].observation and new[:2] == mem.segments[:2]


def test_distracted_rewrites_target_and_guards_the_distractor() -> None:
    mem, out, new = _refine((0.2, 0.1, 0.8, 0.1, 1.0, 0.1, 0.1))
    assert out.pattern == "distracted_by_irrelevant" and out.distractor_segments == (4,)
    assert "KEY STEP" in new[2].thought
    assert new[4].action == "go to fridge 1" and "not the 'go to X' step" in new[4].thought


def test_attended_but_wrong_corrects_the_target_in_place() -> None:
    _, out, new = _refine((0.1, 0.1, 1.0, 0.2, 0.3, 0.1, 0.1))
    assert out.pattern == "attended_but_wrong"
    assert "Do not 'go to fridge 1'" in new[2].thought and new[2].action == "go to sinkbasin 1"


def test_without_the_refiner_a_retry_of_the_same_correction_is_escalated_not_wasted() -> None:
    from workbench.methods.agmr.stage_types import DirectFailureEditInput

    refl = FailureReflection(critical_step=3, wrong_action="go to fridge 1", correct_action="go to sinkbasin 1",
                             supporting_segment=2)
    mem = memory_clean_tomato()
    first = run_stage(OFFLINE, "reflector_edit_failure", DirectFailureEditInput(memory=mem, reflection=refl)).value
    once = mem.model_copy(update={"segments": apply_segment_edits(mem.segments, first.edits)})
    again = run_stage(OFFLINE, "reflector_edit_failure", DirectFailureEditInput(memory=once, reflection=refl)).value
    twice = apply_segment_edits(once.segments, again.edits)
    assert twice != once.segments and [e.index for e in again.edits] == [2]  # a real second edit, same segment
    assert twice[2].thought.startswith("KEY STEP") and "Do exactly 'go to sinkbasin 1'" in twice[2].thought


def test_a_correction_names_the_needed_action_when_the_segment_is_of_another_kind() -> None:
    from workbench.methods.agmr.offline.refiner import correction_edit

    mem = memory_clean_tomato()
    k = next(n for n, seg in enumerate(mem.segments) if seg.action.startswith("go to"))
    refl = FailureReflection(critical_step=3, wrong_action="go to fridge 1", correct_action="open fridge 1",
                             supporting_segment=k)
    new = parse_segment_text(correction_edit(mem.segments, refl).text)
    assert new.action == mem.segments[k].action  # the step itself is unchanged
    assert "needs 'open fridge 1' (a 'open X' action)" in new.thought and "Do exactly" not in new.thought


def test_weak_utilization_follows_appendix_e2() -> None:
    c = [
        [0.1, 0.1, 0.1, 0.1],  # 0: flat and low -> weak
        [0.0, 0.0, 0.9, 0.0],  # 1: one sharp peak -> kept (concentrated)
        [0.5, 0.5, 0.5, 0.5],  # 2: high everywhere -> kept (peak above 1.2 x median)
        [0.2, 0.3, 0.2, 0.3],  # 3: median-level, flat -> weak
        [0.0, 0.0, 0.0, 0.0],  # 4: never read -> weak
    ]
    assert weakly_utilized(c) == {0, 3, 4}


def test_success_refiner_deletes_only_redundant_and_weak_segments() -> None:
    mem = memory_with_detours()
    n = len(mem.segments)
    c = [[0.3, 0.3, 0.3] for _ in range(n)]
    c[1] = [0.0, 2.0, 0.0]  # candidate 1 was sharply used at one step: must survive
    refl = SuccessReflection(redundant_segments=tuple(RedundantSegment(index=k) for k in (0, 1, 3, 5)))
    out = run_stage(OFFLINE, "refiner_success", SuccessRefinerInput(memory=mem, reflection=refl,
                                                                     utilization=tuple(map(tuple, c)))).value
    assert out.pattern == "low_utilization_redundancy"
    assert sorted(e.index for e in out.edits if e.op == "delete") == [0, 3, 5]
    new = apply_segment_edits(mem.segments, out.edits)
    assert len(new) == n - 3 and new[0].action == "open cabinet 1"
    # segment 1's observation reported the deleted move 0: it now shows what segment 0 showed (the initial view)
    assert new[0].observation == mem.segments[0].observation
    # every kept action keeps an outcome: after a deleted run k..m, segment m+1 shows segment k's observation
    kept = [k for k in range(n) if k not in (0, 3, 5)]
    for pos, k in enumerate(kept):
        first = k
        while first - 1 in (0, 3, 5):
            first -= 1
        assert new[pos].observation == mem.segments[first].observation, k
    assert [s.action for s in new].count("take apple 1 from countertop 2") == 1


def test_segment_text_round_trip_and_edit_conflicts() -> None:
    seg = Segment(observation="The fridge 1 is closed.", thought="open it", action="open fridge 1")
    assert parse_segment_text(segment_text(seg)) == seg
    assert parse_segment_text("just a note") == Segment(thought="just a note")
    segs = (seg, seg)
    assert apply_segment_edits(segs, [SegmentEdit(index=2, op="insert", text="Action: look")])[-1].action == "look"
    with pytest.raises(SegmentEditError, match="edited twice"):
        apply_segment_edits(segs, [SegmentEdit(index=0, op="delete"), SegmentEdit(index=0, op="replace", text="x")])
    with pytest.raises(SegmentEditError, match="index 5"):
        apply_segment_edits(segs, [SegmentEdit(index=5, op="delete")])
    with pytest.raises(ValueError, match="needs non-empty text"):
        SegmentEdit(index=0, op="replace", text=" ")


def test_with_admissible_commands_the_critical_error_is_read_off_milestones_not_exact_plan_steps():
    """A run that takes another instance of the object by another route made progress; its error is where it left
    every way to the goal (skipping the clean), not its first step (where the exact plan pointer stops)."""
    from workbench.memory.trajectory import MemoryEntry, Segment, Step, Trajectory

    plan = ("go to countertop 1", "take apple 1 from countertop 1", "go to sinkbasin 1", "clean apple 1 with sinkbasin 1",
            "go to fridge 1", "open fridge 1", "put apple 1 in/on fridge 1")
    room = "You are in the middle of a room. Looking quickly around you, you see a countertop 1, a countertop 2."
    go = [f"go to {x}" for x in ("countertop 1", "countertop 2", "sinkbasin 1", "fridge 1", "microwave 1", "drawer 1")]
    run = [("go to countertop 2", "On the countertop 2, you see a apple 2."),
           ("take apple 2 from countertop 2", "You pick up the apple 2 from the countertop 2."),
           ("go to microwave 1", "The microwave 1 is closed."), ("go to drawer 1", "The drawer 1 is closed."),
           ("go to microwave 1", "The microwave 1 is closed.")]
    obs = [room] + [o for _, o in run[:-1]]
    adm = [go, go + ["take apple 2 from countertop 2"], go, go, go]
    traj = Trajectory(task_id="valid_seen/x/t", goal="put a clean apple in fridge.", initial_observation=room,
                      steps=tuple(Step(observation=o, action=a) for o, (a, _) in zip(obs, run)),
                      meta={"steps": [{"admissible": a} for a in adm], "final_observation": run[-1][1]})
    memory = MemoryEntry(entry_id="m", task_id="m", goal="put a clean tomato in fridge.", segments=(
        Segment(action="go to diningtable 1"), Segment(action="take tomato 1 from diningtable 1"),
        Segment(action="go to sinkbasin 1"), Segment(action="clean tomato 1 with sinkbasin 1"),
        Segment(action="go to fridge 1")))
    r = reflect_failure(ReflectorInput(memory=memory, trajectory=traj, expert_plan=plan))
    assert (r.critical_step, r.wrong_action, r.correct_action) == (2, "go to microwave 1", "go to sinkbasin 1")
    assert r.supporting_segment == 2 and "1 of 4 milestones" in r.reason
    # Without the admissible commands, the exact plan pointer never advanced: step 0.
    bare = traj.model_copy(update={"meta": {}})
    assert reflect_failure(ReflectorInput(memory=memory, trajectory=bare, expert_plan=plan)).critical_step == 0


def test_a_run_that_puts_the_object_down_and_takes_it_again_erred_after_its_first_take():
    from workbench.memory.trajectory import MemoryEntry, Segment, Step, Trajectory

    plan = ("go to desk 1", "take alarmclock 1 from desk 1", "use desklamp 1")
    room = "You are in the middle of a room. Looking quickly around you, you see a desk 1, a sidetable 1, a sidetable 2."
    go = [f"go to {x}" for x in ("desk 1", "sidetable 1", "sidetable 2")]
    run = [("go to sidetable 1", "On the sidetable 1, you see a alarmclock 3."),
           ("take alarmclock 3 from sidetable 1", "You pick up the alarmclock 3 from the sidetable 1."),
           ("go to sidetable 2", "On the sidetable 2, you see nothing."),
           ("put alarmclock 3 in/on sidetable 2", "You put the alarmclock 3 in/on the sidetable 2."),
           ("take alarmclock 3 from sidetable 2", "You pick up the alarmclock 3 from the sidetable 2."),
           ("go to sidetable 1", "On the sidetable 1, you see nothing.")]
    obs = [room] + [o for _, o in run[:-1]]
    adm = [go, go + ["take alarmclock 3 from sidetable 1"], go, go + ["put alarmclock 3 in/on sidetable 2"],
           go + ["take alarmclock 3 from sidetable 2"], go]
    traj = Trajectory(task_id="valid_seen/y/t", goal="look at alarmclock under the desklamp.", initial_observation=room,
                      steps=tuple(Step(observation=o, action=a) for o, (a, _) in zip(obs, run)),
                      meta={"steps": [{"admissible": a} for a in adm], "final_observation": run[-1][1]})
    memory = MemoryEntry(entry_id="m", task_id="m", goal="look at book under the desklamp.", segments=(
        Segment(action="go to bed 1"), Segment(action="take book 1 from bed 1"), Segment(action="go to desk 1"),
        Segment(action="use desklamp 1")))
    r = reflect_failure(ReflectorInput(memory=memory, trajectory=traj, expert_plan=plan))
    assert (r.critical_step, r.wrong_action, r.correct_action) == (2, "go to sidetable 2", "go to desk 1")
    assert r.supporting_segment == 2 and "first reached at step 2" in r.reason
