"""DC-RS (Dynamic Cheatsheet, retrieval and synthesis): the offline curator's merge, order and cut; the stream
over a split (a task's cheatsheet does not depend on the slice a run plays); the policy's block and records."""

from __future__ import annotations

import json

import pytest
from agmr_builders import entry

from workbench.envs.base import Task
from workbench.llm import ScriptedBackend, render_stage, run_stage
from workbench.llm.errors import LLMError
from workbench.llm.offline import OfflineALFWorldBackend
from workbench.memory.base import MemoryBase
from workbench.memory.render import render_memory
from workbench.methods.agmr import DynamicCheatsheet
from workbench.methods.agmr.stage_types import (
    MAX_CHEATSHEET,
    Cheatsheet,
    CheatsheetEntry,
    CurateInput,
)

OFFLINE = OfflineALFWorldBackend()


def curate(goal, task_type, examples, previous=Cheatsheet()):
    return run_stage(OFFLINE, "dc_curate", CurateInput(goal=goal, task_type=task_type, previous=previous,
                                                       examples=tuple(examples))).value


def test_the_curator_synthesises_procedure_and_where_insights_and_merges_their_support():
    sheet = curate("put a tomato in cabinet.", "pick", [entry(), entry("valid_train/tomato/t2")])
    by = {e.topic: e for e in sheet.entries}
    # entry() has a 'look' between take and go: redundant, not part of the procedure
    assert by["procedure: pick"].insight == ("To solve a 'pick' task: go to a place -> take the object from a place "
                                             "-> go to the target -> open the target -> put the object in/on the "
                                             "target.")
    assert by["procedure: pick"].uses == 2
    assert by["where: tomato in diningtable"].uses == 2
    assert sheet.entries[0].topic == "procedure: pick"  # the task's own type first
    again = curate("put a tomato in cabinet.", "pick", [entry()], previous=sheet)
    assert {e.topic: e.uses for e in again.entries} == {"procedure: pick": 3, "where: tomato in diningtable": 3}


def test_a_task_sees_its_own_type_and_object_first_and_the_cheatsheet_is_bounded():
    many = Cheatsheet(entries=tuple(CheatsheetEntry(topic=f"where: thing{k} in box", insight=f"A thing{k} is in a box.",
                                                    uses=100 + k) for k in range(MAX_CHEATSHEET)))
    sheet = curate("put a tomato in cabinet.", "pick", [entry()], previous=many)
    assert len(sheet.entries) == MAX_CHEATSHEET  # the two new insights came in, the two least used went out
    assert [e.topic for e in sheet.entries[:2]] == ["procedure: pick", "where: tomato in diningtable"]
    assert {"where: thing0 in box", "where: thing1 in box"}.isdisjoint(e.topic for e in sheet.entries)
    with pytest.raises(ValueError, match="topics must be unique"):
        Cheatsheet(entries=(CheatsheetEntry(topic="t", insight="a"), CheatsheetEntry(topic="t", insight="b")))


def test_a_model_curator_gets_the_previous_cheatsheet_and_the_runs_and_a_bad_reply_is_a_typed_error():
    previous = Cheatsheet(entries=(CheatsheetEntry(topic="where: mug in desk", insight="Mugs are on desks.", uses=2),))
    payload = CurateInput(goal="put a tomato in cabinet.", task_type="pick", previous=previous, examples=(entry(),))
    messages, _ = render_stage("dc_curate", payload)
    text = messages[-1].content
    assert "[where: mug in desk] Mugs are on desks. (uses: 2)" in text and "take tomato 1 from diningtable 1" in text
    good = json.dumps({"entries": [{"topic": "procedure: pick", "insight": "Find it, take it, put it.", "uses": 1}]})
    assert run_stage(ScriptedBackend([good]), "dc_curate", payload).value.entries[0].insight.startswith("Find it")
    dup = json.dumps({"entries": [{"topic": "a", "insight": "x"}, {"topic": "a", "insight": "y"}]})
    with pytest.raises(LLMError):
        run_stage(ScriptedBackend([dup, dup, dup]), "dc_curate", payload)


def _policy(tmp_path):
    base = MemoryBase(tmp_path / "b")
    base.add_many([entry(), entry("valid_train/tomato/t2"), entry("valid_train/mug/t3", "put a mug in desk.")])
    return DynamicCheatsheet(base, OFFLINE)


def test_the_cheatsheet_of_a_task_is_the_streams_whatever_the_run_plays(tmp_path):
    """valid_unseen in its fixed order: task 5's cheatsheet is the same curated directly as after tasks 0-4 were
    played, and the block shows its insights as ReAct thoughts under the task's goal."""
    from workbench.envs.memory_base import expert_trajectories_for
    from workbench.eval.config import RunConfig, select_tasks

    tasks = select_tasks(RunConfig(out="-", split="valid_unseen", tasks="0:6", memory="none"))
    goals = {e.task_id: e.goal for e in expert_trajectories_for("valid_unseen")}
    from workbench.envs.memory_base import default_memory_base

    direct = DynamicCheatsheet(default_memory_base(), OFFLINE)  # the valid_train expert trajectories
    direct.begin(tasks[5], goals[tasks[5].task_id], "room")
    block = direct.memory(0, [])
    stepwise = DynamicCheatsheet(default_memory_base(), OFFLINE)
    for t in tasks:
        stepwise.begin(t, goals[t.task_id], "room")
    assert stepwise.memory(0, []).entry == block.entry and block.entry is not None
    rec = block.record["dc_rs"]
    assert rec["stream_position"] == 5 and rec["cheatsheet_shown"] == [e.topic for e in
                                                                      direct.cheatsheet(tasks[5], "")[0].entries[:10]]
    assert direct.memory(1, []).record == {}  # the provenance is recorded once, at step 0
    text = render_memory(block.entry)
    assert text.startswith(f"Your task is to: {goals[tasks[5].task_id]}\n> think: ")
    assert all(s.thought and not s.action for s in block.entry.segments)


def test_a_task_outside_any_expert_stream_is_curated_alone(tmp_path):
    policy = _policy(tmp_path)
    policy.begin(Task("mine/x/t", "mine", "pick", "/none"), "put a tomato in cabinet.", "room")
    block = policy.memory(0, [])
    assert block.record["dc_rs"]["stream_position"] is None and block.entry.segments


@pytest.mark.game
def test_cli_run_records_the_cheatsheet(tiny_model_dir, tmp_path):
    """`workbench run --memory dc-rs` end to end on real games with a tiny model loaded by path."""
    from workbench.cli import main
    from workbench.memory.trajectory import iter_jsonl_dicts

    out = tmp_path / "dc"
    assert main(["run", "--model", str(tiny_model_dir), "--split", "valid_unseen", "--tasks", "0:134:67",
                 "--max-steps", "2", "--no-teacher-forcing", "--memory", "dc-rs", "--out", str(out)]) == 0
    eps = list(iter_jsonl_dicts(out / "trajectories.jsonl"))
    assert [e["meta"]["steps"][0]["dc_rs"]["stream_position"] for e in eps] == [0, 67]
    assert all(e["meta"]["memory_entry"] == f"dc-rs/{e['task_id']}" for e in eps)
    assert json.loads((out / "metrics.json").read_text())["memory_tokens"] > 0
    with pytest.raises(ValueError, match="at least 1"):
        DynamicCheatsheet(MemoryBase(tmp_path / "b"), OFFLINE, k=0)


def test_an_unusable_curator_reply_keeps_the_previous_cheatsheet_and_is_recorded(tmp_path):
    """A model curator whose reply never validates (here: two insights on one topic, again after the repair
    retry) leaves cheatsheet i-1 in place for task i; the error is in step 0's record, the episode goes on."""
    good = json.dumps({"entries": [{"topic": "procedure: pick", "insight": "Find it, take it, put it.", "uses": 1}]})
    dup = json.dumps({"entries": [{"topic": "a", "insight": "x"}, {"topic": "a", "insight": "y"}]})
    base = MemoryBase(tmp_path / "b")
    base.add_many([entry(), entry("valid_train/tomato/t2")])
    policy = DynamicCheatsheet(base, ScriptedBackend([good, dup, dup, dup]))
    first, second = (Task(f"mine/{n}/t", "mine", "pick", "/none") for n in ("x", "y"))
    policy.begin(first, "put a tomato in cabinet.", "room")
    kept = policy.memory(0, []).entry
    sheet, origin = policy._curate(second.task_id, "pick", "put a tomato in desk.", policy.cheatsheet(first, "")[0])
    assert sheet.entries[0].insight == "Find it, take it, put it."
    assert "topics must be unique" in origin["curator_error"]
    assert kept.segments[0].thought == "Find it, take it, put it."
