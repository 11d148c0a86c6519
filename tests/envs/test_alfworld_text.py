"""The deterministic ALFWorld readers behind the offline backends."""

from __future__ import annotations

import pytest

from workbench.envs.alfworld_text import (
    GoalSpec,
    is_failure,
    parse_action,
    parse_goal,
    sightings,
    track,
)


@pytest.mark.parametrize("action,template,x,y", [
    ("go to countertop 1", "go to X", "countertop 1", None),
    ("take apple 1 from countertop 2", "take X from Y", "apple 1", "countertop 2"),
    ("put apple 1 in/on fridge 1", "put X in/on Y", "apple 1", "fridge 1"),
    ("put mug 2 in coffeemachine 1", "put X in/on Y", "mug 2", "coffeemachine 1"),
    ("open fridge 1", "open X", "fridge 1", None),
    ("close drawer 3", "close X", "drawer 3", None),
    ("clean apple 1 with sinkbasin 1", "clean X with Y", "apple 1", "sinkbasin 1"),
    ("heat mug 2 with microwave 1", "heat X with Y", "mug 2", "microwave 1"),
    ("cool pan 1 with fridge 1", "cool X with Y", "pan 1", "fridge 1"),
    ("use desklamp 1", "use X", "desklamp 1", None),
    ("examine alarmclock 1", "examine X", "alarmclock 1", None),
    ("Look.", "look", None, None),
    ("inventory", "inventory", None, None),
    ("dance wildly", "other", None, None),
])
def test_action_templates(action: str, template: str, x: str | None, y: str | None) -> None:
    a = parse_action(action)
    assert (a.template, a.x, a.y) == (template, x, y)


@pytest.mark.parametrize("goal,spec", [
    ("Your task is to: put some spraybottle on toilet.", GoalSpec("pick_and_place", "spraybottle", "toilet")),
    ("put a clean apple in fridge.", GoalSpec("clean", "apple", "fridge", "clean")),
    ("heat some egg and put it in diningtable.", GoalSpec("heat", "egg", "diningtable", "heat")),
    ("put a cool tomato in microwave.", GoalSpec("cool", "tomato", "microwave", "cool")),
    ("look at bowl under the desklamp.", GoalSpec("look_at", "bowl", None)),
    ("find two pillow and put them in sofa.", GoalSpec("pick_two", "pillow", "sofa", count=2)),
    ("put two cellphone in bed.", GoalSpec("pick_two", "cellphone", "bed", count=2)),
])
def test_goal_types(goal: str, spec: GoalSpec) -> None:
    assert parse_goal(goal) == spec


def test_goal_tools() -> None:
    assert parse_goal("put a hot mug in cabinet.").tool == "microwave"
    assert parse_goal("look at bowl under the desklamp.").tool == "desklamp"
    assert parse_goal("solve world hunger") is None


def test_sightings_cover_arrival_open_and_already_open_containers() -> None:
    assert sightings("You arrive at loc 5. On the countertop 1, you see a apple 1, a bread 1, and a knife 2.") == [
        ("apple 1", "countertop 1"), ("bread 1", "countertop 1"), ("knife 2", "countertop 1")]
    assert sightings("You open the fridge 1. The fridge 1 is open. In it, you see a egg 1, and a lettuce 1.") == [
        ("egg 1", "fridge 1"), ("lettuce 1", "fridge 1")]
    assert sightings("You arrive at fridge 1. The fridge 1 is open. In it, you see a egg 1.") == [("egg 1", "fridge 1")]
    assert sightings("On the sinkbasin 1, you see nothing.") == []
    assert sightings("Nothing happens.") == [] and is_failure("Nothing happens.")


def test_track_follows_location_holding_and_transformations() -> None:
    st = track([
        ("go to countertop 2", "On the countertop 2, you see a apple 1."),
        ("take apple 1 from countertop 2", "You pick up the apple 1 from the countertop 2."),
        ("heat apple 1 with fridge 1", "Nothing happens."),
        ("go to sinkbasin 1", "On the sinkbasin 1, you see nothing."),
        ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
        ("go to fridge 1", "The fridge 1 is closed."),
        ("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1."),
    ])
    assert st.location == "fridge 1" and st.holding is None
    assert st.transformed == {"apple 1"} and st.placed == [("apple 1", "fridge 1")]
    assert st.failed == ["heat apple 1 with fridge 1"] and st.seen["apple 1"] == "fridge 1"
    # taken back out of the fridge, the apple is no longer placed (a goal check must not count it)
    again = track([("take apple 1 from fridge 1", "You pick up the apple 1 from the fridge 1.")], state=st)
    assert again.placed == [] and again.holding == "apple 1"
