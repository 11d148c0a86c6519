"""Bank update rules, validity checks and the one-pool ablation."""

from __future__ import annotations

import pytest
from arbiter_builders import cand, state

from workbench.methods.arbiter.banks import (
    MAX_FOCAL_TOKENS,
    TASK_DONE,
    FunctionalBanks,
    InvalidWriteError,
    SinglePool,
    check_write,
    situation,
)


def _by_id(store):
    return {i.id: i for i in store.items()}


def test_task_state_keeps_one_live_snapshot():
    b = FunctionalBanks()
    b.update([cand("task_state", "At start, holding nothing.", "@start", (), op="revise")], 0, state())
    b.update([cand("task_state", "At start, holding nothing.", "@start", (), op="revise")], 1, state())
    assert [i.id for i in b.active("task_state")] == ["T1"]  # identical: refreshed, not duplicated
    assert b.active("task_state")[0].last_seen == 1
    b.update([cand("task_state", "At desk 1, holding nothing.", "@desk 1", ("desk 1",), op="revise")], 2, state())
    items = _by_id(b)
    assert items["T1"].status == "superseded" and items["T2"].active
    assert [i.id for i in b.active("task_state")] == ["T2"]


def test_constraint_merges_duplicates_and_learnt_constraint_is_invalidated_when_the_action_works():
    b = FunctionalBanks()
    avoid = cand("constraint", "'open drawer 1' does nothing here.", "avoid: open drawer 1", ("drawer 1",), source="action")
    st = state(location="drawer 1")
    b.update([avoid], 4, st, outcome=("open drawer 1", True))
    b.update([avoid], 5, st, outcome=("open drawer 1", True))
    (c,) = b.active("constraint")
    assert c.scope == situation(st) == "at=drawer 1|holding=nothing" and c.about == "open drawer 1"
    assert c.last_seen == 5  # merged, refreshed
    log = b.update([], 6, st, outcome=("open drawer 1", False))  # now it worked
    assert log.invalidated == [c.id] and not b.active("constraint")


def test_constraint_revise_supersedes_constraints_about_the_same_entities():
    b = FunctionalBanks()
    b.update([cand("constraint", "The apple must be cleaned.", "apple clean", ("apple", "sinkbasin"))], 0, state())
    b.update([cand("constraint", "The apple must be cleaned with sinkbasin 1.", "apple @ sinkbasin 1",
                   ("apple", "sinkbasin"), op="revise")], 3, state())
    assert [i.focal for i in b.active("constraint")] == ["The apple must be cleaned with sinkbasin 1."]


def test_episodic_appends_in_step_order_and_merges_a_repeated_event():
    b = FunctionalBanks()
    obs = {1: "On the desk 1, you see a pen 1.", 2: "Nothing happens.", 3: "On the desk 1, you see a pen 1.",
           4: "On the shelf 1, you see nothing."}
    act = {1: "go to desk 1", 2: "open desk 1", 3: "go to desk 1", 4: "go to shelf 1"}
    logs = [b.update([cand("episodic", f"Step {t - 1}: '{act[t]}' -> {obs[t]}", "x", (act[t][-6:],))], t, state(),
                     outcome=(act[t], obs[t] == "Nothing happens.")) for t in range(1, 5)]
    events = b.active("episodic")
    assert [i.source_step for i in events] == [1, 2, 4]  # in step order; the loop back to desk 1 is no new event
    first = events[0]
    assert first.focal == "Steps 0, 2: 'go to desk 1' -> On the desk 1, you see a pen 1."
    assert first.repeats == 2 and first.last_seen == 3 and first.ambient == "go to desk 1: saw pen 1 (x2)"
    assert logs[2].merged == logs[2].revised == [first.id] and not logs[2].added
    assert first.describe()["repeats"] == 2
    # the same action with another outcome is another event
    b.update([cand("episodic", "Step 4: 'go to desk 1' -> On the desk 1, you see nothing.", "x", ("desk 1",))], 5,
             state(), outcome=("go to desk 1", False))
    assert len(b.active("episodic")) == 4


def test_reference_newer_evidence_wins_and_held_object_is_not_anywhere():
    b = FunctionalBanks()
    b.update([cand(), cand("reference", "fridge 1 is closed.", "fridge 1: closed", ("fridge 1",))], 1, state())
    b.update([cand(focal="apple 1 is in/on fridge 1.", ambient="apple 1 @ fridge 1", entities=("apple 1", "fridge 1")),
              cand("reference", "fridge 1 is open.", "fridge 1: open", ("fridge 1",))], 2, state())
    assert sorted(i.focal for i in b.active("reference")) == ["apple 1 is in/on fridge 1.", "fridge 1 is open."]
    b.update([], 3, state(holding="apple 1"))
    assert [i.focal for i in b.active("reference")] == ["fridge 1 is open."]


def test_goal_and_task_constraints_are_protected_until_the_task_is_complete():
    b = FunctionalBanks()
    b.update([cand("goal", "Task goal: put a clean apple in fridge.", "goal: clean apple -> fridge", ()),
              cand("constraint", "The apple must be cleaned first.", "apple must be cleaned", ("apple",))], 0, state())
    for t in range(1, 30):
        b.update([], t, state())
    assert {i.bank for i in b.active()} == {"goal", "constraint"}
    assert b.role(b.active("goal")[0]) == "protected"
    b.update([], 30, state(subgoal=TASK_DONE))
    assert not b.active() and {i.status for i in b.items()} == {"completed"}


@pytest.mark.parametrize("field,value", [("focal", "word " * (MAX_FOCAL_TOKENS + 5)), ("focal", "   "),
                                         ("entities", tuple(f"cup {i}" for i in range(80)))])
def test_invalid_write_is_rejected_whole_and_leaves_the_banks_untouched(field, value):
    b = FunctionalBanks()
    b.update([cand()], 0, state())
    before = b.items()
    good = cand("reference", "mug 1 is in/on desk 1.", "mug 1 @ desk 1", ("mug 1", "desk 1"))
    bad = cand(**{field: value}) if field != "entities" else cand(entities=value)
    with pytest.raises(InvalidWriteError) as e:
        b.update([good, bad], 1, state())
    assert e.value.problems[0][:2] == (1, field)
    assert b.items() == before  # the good item of the same write was not applied either


def test_check_write_accepts_the_offline_writers_largest_room():
    room = ", ".join(f"cabinet {i}" for i in range(1, 41))
    check_write([cand("reference", f"The room has: {room}.", "room: cabinet x40",
                      tuple(f"cabinet {i}" for i in range(1, 41)))])


def test_single_pool_appends_without_rules():
    p = SinglePool()
    p.update([cand("task_state", "At start.", "@start", (), op="revise")], 0, state())
    p.update([cand("task_state", "At desk 1.", "@desk 1", (), op="revise"), cand()], 1, state(holding="apple 1"))
    p.update([cand()], 2, state())
    assert len(p.active()) == 3  # both snapshots stay, the held apple's location stays, the duplicate merged
    assert {p.group(i) for i in p.items()} == {"pool"} and {p.role(i) for i in p.items()} == {"dynamic"}
    assert p.items()[0].bank == "task_state"  # the writer's label is kept for measurement
