"""Offline MemArbiter (state parser, candidate writer) and proactive memory agent (both phases)."""

from __future__ import annotations

from llm_cases import GOAL, ROOM, failed_run

from workbench.llm import ToolCall, get_backend, run_stage
from workbench.memory.trajectory import Step
from workbench.methods.arbiter.stage_types import StateParserInput, WriterInput
from workbench.methods.proactive.stage_types import BankEntry, BankView, ProactiveInput

OFFLINE = get_backend("offline-alfworld")


def state_after(n: int):
    fail = failed_run()
    return run_stage(OFFLINE, "arbiter_state_parser", StateParserInput(
        goal=GOAL, observation=fail.steps[n].observation, history=fail.steps[:n])).value


def test_state_parser_tracks_subgoals_along_the_run() -> None:
    s0 = state_after(0)
    assert s0.subgoal == "find a apple" and s0.information_needs == ("where is a apple?",) and s0.location is None
    s3 = state_after(3)  # picked the apple up at countertop 2
    assert s3.completed == ("find a apple", "take the apple") and s3.subgoal == "clean the apple with the sinkbasin"
    assert (s3.location, s3.holding) == ("countertop 2", "apple 1") and s3.information_needs == ()
    s6 = state_after(6)  # put the dirty apple in the fridge: that put does not count for a clean task
    assert s6.holding is None and s6.subgoal == "take the apple" and s6.completed == ("find a apple",)
    assert s6.entities == ("apple 1", "fridge 1")


def test_state_parser_reports_a_failed_last_action() -> None:
    hist = (Step(observation=ROOM, action="open countertop 1"),)
    s = run_stage(OFFLINE, "arbiter_state_parser",
                  StateParserInput(goal=GOAL, observation="Nothing happens.", history=hist)).value
    assert s.last_action_failed


def test_writer_splits_the_first_observation_into_goal_constraint_and_room() -> None:
    items = run_stage(OFFLINE, "arbiter_writer", WriterInput(goal=GOAL, step=0, observation=ROOM)).value.items
    assert [i.bank for i in items] == ["goal", "constraint", "reference"]
    assert items[1].focal == "The apple must be cleaned with the sinkbasin before it goes in/on the fridge."
    assert items[2].focal.startswith("The room has: cabinet 1, countertop 1, countertop 2")
    assert items[2].entities[:3] == ("cabinet 1", "countertop 1", "countertop 2")


def test_writer_makes_one_atomic_item_per_fact() -> None:
    out = run_stage(OFFLINE, "arbiter_writer", WriterInput(
        goal=GOAL, step=2, previous_action="go to countertop 2",
        observation="On the countertop 2, you see a apple 1, and a mug 1.", state=state_after(2))).value
    by_bank = {}
    for it in out.items:
        by_bank.setdefault(it.bank, []).append(it)
    assert [i.focal for i in by_bank["reference"]] == ["apple 1 is in/on countertop 2.", "mug 1 is in/on countertop 2."]
    assert by_bank["episodic"][0].focal == "Step 1: 'go to countertop 2' -> On the countertop 2, you see a apple 1, and a mug 1."
    (snap,) = by_bank["task_state"]
    assert snap.op == "revise" and snap.focal == "At countertop 2, holding nothing; next: take the apple."
    assert all(i.focal and not i.ambient for i in out.items)  # the ambient band is the arbiter's template


def test_writer_turns_a_failure_into_episodic_and_constraint_items() -> None:
    out = run_stage(OFFLINE, "arbiter_writer", WriterInput(goal=GOAL, step=4, previous_action="open countertop 1",
                                                            observation="Nothing happens.")).value
    assert [i.bank for i in out.items] == ["episodic", "constraint"]
    assert out.items[0].focal == "Step 3: 'open countertop 1' -> Nothing happens."
    assert out.items[1].focal == "'open countertop 1' does nothing in this situation; do not repeat it unchanged."


def test_phase1_records_locations_failures_and_status_via_tools() -> None:
    fail = failed_run()
    inp = ProactiveInput(goal=GOAL, step=2, window=fail.steps[:3], current_observation=fail.steps[3].observation)
    calls = run_stage(OFFLINE, "proactive_update", inp).value
    saved = {c.arguments["id"]: c.arguments["content"] for c in calls if c.name == "memory_save_knowledge"}
    # The apple was seen and then picked up inside the window: no save-then-delete churn for it.
    assert saved == {"task:transform": "task: the apple must be cleaned with the sinkbasin before it goes in/on the "
                                       "fridge",  # the task description's key constraint, saved once
                     "loc:bread_1": "bread 1 is in/on countertop 1", "loc:mug_1": "mug 1 is in/on countertop 2"}
    assert calls[-1] == ToolCall(name="memory_update_status", arguments={
        "status": "step 2: at countertop 2; holding apple 1; next: clean the apple with the sinkbasin"})


def test_phase1_deletes_stale_knowledge_and_saves_failures() -> None:
    bank = BankView(status="old", knowledge=(BankEntry(id="loc:apple_1", content="apple 1 is in/on countertop 2"),))
    window = (Step(observation="On the countertop 2, you see a apple 1.", action="take apple 1 from countertop 2"),
              Step(observation="You pick up the apple 1 from the countertop 2.",
                   action="heat apple 1 with sinkbasin 1"))
    calls = run_stage(OFFLINE, "proactive_update", ProactiveInput(
        goal=GOAL, step=5, window=window, current_observation="Nothing happens.", bank=bank)).value
    assert calls[0] == ToolCall(name="memory_delete", arguments={"id": "loc:apple_1"})
    assert ToolCall(name="memory_save_procedural", arguments={
        "id": "fail:heat_apple_1_with_sinkbasin_1",
        "content": "'heat apple 1 with sinkbasin 1' did nothing (Nothing happens.)"}) in calls


def test_phase1_is_silent_when_the_bank_is_current() -> None:
    inp = ProactiveInput(goal=GOAL, step=0, window=(Step(observation=ROOM, action="look"),), current_observation=ROOM)
    calls = run_stage(OFFLINE, "proactive_update", inp).value
    saved = tuple(BankEntry(id=c.arguments["id"], content=c.arguments["content"]) for c in calls
                  if c.name == "memory_save_knowledge")
    assert [e.id for e in saved] == ["task:transform"]  # the room shows no object yet: only the requirement
    bank = BankView(status=calls[-1].arguments["status"], knowledge=saved)
    assert run_stage(OFFLINE, "proactive_update", inp.model_copy(update={"bank": bank})).value == []


def test_phase2_stays_silent_while_the_agent_makes_progress() -> None:
    fail = failed_run()
    for n in range(1, 3):
        inp = ProactiveInput(goal=GOAL, step=n, window=fail.steps[:n], current_observation=fail.steps[n].observation)
        assert run_stage(OFFLINE, "proactive_intervene", inp).value.reminder is None


def test_phase2_reminds_on_a_loop_with_what_memory_knows() -> None:
    a, b = "On the countertop 1, you see a bread 1.", "The cabinet 1 is closed."
    window = (Step(observation=ROOM, action="go to countertop 1"), Step(observation=a, action="go to cabinet 1"),
              Step(observation=b, action="go to countertop 1"), Step(observation=a, action="go to cabinet 1"))
    bank = BankView(knowledge=(BankEntry(id="loc:apple_1", content="apple 1 is in/on countertop 2"),
                               BankEntry(id="loc:bread_1", content="bread 1 is in/on countertop 1")))
    r = run_stage(OFFLINE, "proactive_intervene", ProactiveInput(goal=GOAL, step=3, window=window,
                                                                  current_observation=b, bank=bank)).value.reminder
    assert "cycling" in r and "Memory: apple 1 is in/on countertop 2." in r and "bread" not in r


def test_phase2_reminds_of_a_known_dead_end_and_a_forgotten_requirement() -> None:
    window = (Step(observation="On the countertop 1, you see a bread 1.", action="open countertop 1"),)
    for created, known in ((2, True), (None, True), (4, False)):  # saved at an earlier step / unknown / just now
        bank = BankView(procedural=(BankEntry(id="fail:open_countertop_1", content="did nothing", created=created),))
        r = run_stage(OFFLINE, "proactive_intervene", ProactiveInput(goal=GOAL, step=4, window=window, bank=bank,
                                                                      current_observation="Nothing happens.")).value
        assert (r.reminder or "").startswith("'open countertop 1' has failed before") == known, created
    fail = failed_run()  # holding the uncleaned apple, standing at the fridge
    inp = ProactiveInput(goal=GOAL, step=3, window=fail.steps[:4], current_observation=fail.steps[4].observation)
    r = run_stage(OFFLINE, "proactive_intervene", inp).value
    assert r.reminder == "The apple must be cleaned with the sinkbasin before it goes in/on the fridge."


def test_the_parser_forgets_a_put_taken_back_and_finds_a_floorlamp() -> None:
    from workbench.methods.arbiter.offline import parse_state
    from workbench.methods.arbiter.stage_types import StateParserInput

    goal = "Your task is to: put a apple in fridge."
    hist = (Step(observation="You are in the middle of a room.", action="go to countertop 1"),
            Step(observation="On the countertop 1, you see a apple 1.", action="take apple 1 from countertop 1"),
            Step(observation="You pick up the apple 1 from the countertop 1.", action="go to fridge 1"),
            Step(observation="The fridge 1 is open.", action="put apple 1 in/on fridge 1"))
    done = parse_state(StateParserInput(goal=goal, observation="You put the apple 1 in/on the fridge 1.", history=hist))
    assert done.subgoal == "the task is complete"
    back = hist + (Step(observation="You put the apple 1 in/on the fridge 1.", action="take apple 1 from fridge 1"),)
    undone = parse_state(StateParserInput(goal=goal, observation="You pick up the apple 1 from the fridge 1.",
                                          history=back))
    assert undone.subgoal != "the task is complete" and undone.holding == "apple 1"
    look = "Your task is to: look at book under the desklamp."
    lamp = parse_state(StateParserInput(goal=look, observation="On the sidetable 1, you see a floorlamp 1.",
                                        history=(Step(observation="room", action="go to sidetable 1"),)))
    assert "where is the desklamp?" not in lamp.information_needs
