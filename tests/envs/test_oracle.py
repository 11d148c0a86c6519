"""The expert for any state: agreement with the planner on its own states, constructed off-plan states, and
rollouts on real games from states the planner never visited."""

from __future__ import annotations

import pytest

from workbench.envs.oracle import (
    Label,
    label_state,
    milestones,
    oracle_agreement,
    oracle_rollout,
    replay_state,
)

PLAN = ["go to countertop 1", "take apple 1 from countertop 1", "go to sinkbasin 1", "clean apple 1 with sinkbasin 1",
        "go to fridge 1", "open fridge 1", "put apple 1 in/on fridge 1"]
ROOM = "You are in the middle of a room. Looking quickly around you, you see a countertop 1, a fridge 1, a microwave 1."
GO = [f"go to {x}" for x in ("countertop 1", "countertop 2", "sinkbasin 1", "fridge 1", "microwave 1", "drawer 1")]


def state(steps: list[tuple[str, str]], current: str):
    """steps: (action, observation it produced)."""
    acts = [a for a, _ in steps]
    before = [ROOM] + [o for _, o in steps[:-1]]
    return replay_state(acts, before, current, ROOM) if steps else replay_state([], [], "", ROOM)


def lab(steps, admissible, plan=PLAN) -> Label:
    current = steps[-1][1] if steps else ROOM
    return label_state(plan, state(steps, current), GO + admissible)


def test_milestones_carry_the_plan_location():
    ms = milestones(PLAN)
    assert [(m.template, m.location) for m in ms] == [
        ("take X from Y", "countertop 1"), ("clean X with Y", "sinkbasin 1"), ("open X", "fridge 1"),
        ("put X in/on Y", "fridge 1")]


def test_start_and_plan_states():
    assert lab([], []).action == "go to countertop 1"
    here = [("go to countertop 1", "On the countertop 1, you see a apple 1.")]
    assert lab(here, ["take apple 1 from countertop 1"]).action == "take apple 1 from countertop 1"


def test_a_heated_object_is_not_a_cleaned_one():
    steps = [("go to countertop 1", "On the countertop 1, you see a apple 1."),
             ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
             ("go to microwave 1", "The microwave 1 is closed."),
             ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1.")]
    assert lab(steps, []).action == "go to sinkbasin 1"


def test_stray_object_is_put_down_and_other_instance_continues_the_plan():
    stray = [("go to countertop 2", "On the countertop 2, you see a mug 1."),
             ("take mug 1 from countertop 2", "You pick up the mug 1 from the countertop 2.")]
    assert lab(stray, ["put mug 1 in/on countertop 2"]).action == "put mug 1 in/on countertop 2"
    other = [("go to countertop 2", "On the countertop 2, you see a apple 3."),
             ("take apple 3 from countertop 2", "You pick up the apple 3 from the countertop 2.")]
    assert lab(other, []).action == "go to sinkbasin 1"
    at_sink = other + [("go to sinkbasin 1", "On the sinkbasin 1, you see nothing.")]
    assert lab(at_sink, ["clean apple 3 with sinkbasin 1"]).action == "clean apple 3 with sinkbasin 1"


def test_a_dirty_object_put_on_the_goal_type_is_fetched_again():
    steps = [("go to countertop 1", "On the countertop 1, you see a apple 1."),
             ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
             ("go to fridge 1", "The fridge 1 is closed."), ("open fridge 1", "You open the fridge 1."),
             ("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1.")]
    assert lab(steps, ["take apple 1 from fridge 1"]).action == "take apple 1 from fridge 1"


def test_open_first_and_no_answer_rather_than_a_guess():
    closed = [("go to countertop 1", "On the countertop 1, you see a apple 1."),
              ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
              ("go to sinkbasin 1", "On the sinkbasin 1, you see nothing."),
              ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
              ("go to fridge 1", "The fridge 1 is closed.")]
    assert lab(closed, ["open fridge 1"]).action == "open fridge 1"
    nothing = label_state(PLAN, state(closed, "The fridge 1 is closed."), ["look"])
    assert nothing.action is None and "not admissible" in nothing.reason


def test_pick_two_holding_the_second_finishes_it_first():
    plan = ["go to desk 1", "take pen 1 from desk 1", "go to shelf 1", "put pen 1 in/on shelf 1", "go to bed 1",
            "take pen 2 from bed 1", "go to shelf 1", "put pen 2 in/on shelf 1"]
    steps = [("go to bed 1", "On the bed 1, you see a pen 2."),
             ("take pen 2 from bed 1", "You pick up the pen 2 from the bed 1.")]
    assert label_state(plan, state(steps, steps[-1][1]), ["go to shelf 1", "go to desk 1"]).action == "go to shelf 1"


@pytest.mark.parametrize("split", ["valid_train", "valid_seen", "valid_unseen"])
def test_the_oracle_is_the_planner_on_the_planners_own_states(split):
    from workbench.envs.memory_base import expert_trajectories_for

    report = oracle_agreement(expert_trajectories_for(split))
    assert report["states"] > 700 and report["agreement"] == 1.0 and report["no_answer"] == 0.0


@pytest.mark.game
def test_rollouts_from_off_plan_states_win_real_games():
    """Detours, a stray pick-up and a wrong transformation, then the oracle takes over on real ALFWorld games."""
    from workbench.envs.alfworld import ALFWorldEnv
    from workbench.envs.memory_base import expert_trajectories_for
    from workbench.eval.config import RunConfig, select_tasks

    tasks = {t.task_id: t for t in select_tasks(RunConfig(out="x", split="valid_unseen", tasks="all"))}
    experts = [e for e in expert_trajectories_for("valid_unseen") if e.source == "planner"]
    picked = {}
    for e in experts:
        picked.setdefault(e.task_type, e)
    env = ALFWorldEnv()
    try:
        for e in list(picked.values())[:3]:
            plan = e.actions()
            detour = [a for a in e.meta["admissible"][0] if a.startswith("go to ")][-2:]
            prefix = detour + plan[:2] + detour[:1]  # wander, get the object, wander off with it
            r = oracle_rollout(env, tasks[e.task_id], plan, prefix)
            assert r["won"] and r["oracle_steps"] > 0, (e.task_id, r)
    finally:
        env.close()


def test_an_action_doable_where_the_agent_stands_needs_no_walk():
    """Receptacles can share a spot: at the toilet paper hanger, the plan's 'go to garbagecan 1' is not admissible,
    but its take is."""
    plan = ["go to garbagecan 1", "take toiletpaper 3 from toiletpaperhanger 1", "go to toilet 1",
            "put toiletpaper 3 in/on toilet 1"]
    steps = [("go to toiletpaperhanger 1", "On the toiletpaperhanger 1, you see a toiletpaper 3.")]
    got = label_state(plan, state(steps, steps[-1][1]), ["take toiletpaper 3 from toiletpaperhanger 1", "go to toilet 1"])
    assert got.action == "take toiletpaper 3 from toiletpaperhanger 1"


def test_look_at_is_a_state_lamp_on_object_in_hand_at_the_lamp():
    plan = ["go to desk 1", "use desklamp 1", "take pen 1 from desk 1"]  # the planner may light the lamp first
    lit = [("go to desk 1", "On the desk 1, you see a desklamp 1, and a pen 1."), ("use desklamp 1", "You turn on the desklamp 1.")]
    assert label_state(plan, state(lit, lit[-1][1]), ["take pen 1 from desk 1", "use desklamp 1"]).action == \
        "take pen 1 from desk 1"
    away = lit + [("take pen 1 from desk 1", "You pick up the pen 1 from the desk 1."),
                  ("go to drawer 1", "The drawer 1 is closed.")]
    assert label_state(plan, state(away, away[-1][1]), ["go to desk 1", "go to drawer 1"]).action == "go to desk 1"
