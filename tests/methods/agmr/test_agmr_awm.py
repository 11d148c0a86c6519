"""AWM (offline version): one role-abstracted workflow per task type, shown in place of a retrieved trajectory."""

from __future__ import annotations

import json

from agmr_builders import entry

from workbench.envs.base import Task
from workbench.llm import ScriptedBackend, render_stage, run_stage
from workbench.llm.offline import OfflineALFWorldBackend
from workbench.memory.base import MemoryBase
from workbench.methods.agmr import WorkflowMemory
from workbench.methods.agmr.offline.awm import abstract_actions
from workbench.methods.agmr.stage_types import WorkflowInput


def test_actions_are_abstracted_by_role_and_tools_keep_their_type():
    acts = ["go to countertop 1", "take apple 1 from countertop 1", "go to microwave 1", "heat apple 1 with microwave 1",
            "go to fridge 1", "go to fridge 1", "put apple 1 in/on fridge 1"]
    assert abstract_actions("put a hot apple in fridge.", acts) == (
        "go to {place}", "take {obj} from {place}", "go to microwave", "heat {obj} with microwave", "go to {target}",
        "put {obj} in/on {target}")


def test_the_workflow_is_the_most_frequent_skeleton_without_redundant_steps():
    out = run_stage(OfflineALFWorldBackend(), "awm_induce", WorkflowInput(task_type="pick", examples=(
        entry(), entry("valid_train/tomato/t2"))))
    # entry() has a 'look' (information only) between take and go: it is not part of the workflow.
    assert out.value.steps == ("go to {place}", "take {obj} from {place}", "go to {target}", "open {target}",
                               "put {obj} in/on {target}")
    assert out.value.rationale.startswith("2 of 2 pick trajectories")


def test_the_policy_shows_the_workflow_of_the_task_type_with_the_goal_filled_in(tmp_path):
    base = MemoryBase(tmp_path / "b")
    base.add_many([entry(), entry("valid_train/tomato/t2")])
    policy = WorkflowMemory(base, OfflineALFWorldBackend())
    policy.begin(Task("valid_unseen/x/t", "valid_unseen", "pick", "/none"), "put a apple in cabinet.", "room")
    block = policy.memory(0, [])
    assert [s.action for s in block.entry.segments] == ["go to a place", "take apple from a place", "go to cabinet",
                                                        "open cabinet", "put apple in/on cabinet"]
    assert block.meta["memory_entry"] == "awm/pick" and block.pieces
    policy.begin(Task("valid_unseen/y/t", "valid_unseen", "heat", "/none"), "heat some egg and put it in garbagecan.", "r")
    assert policy.memory(0, []).entry is None  # no trajectory of that type to induce from


def test_a_model_backend_gets_the_trajectories_in_the_prompt_and_its_workflow_is_validated():
    payload = WorkflowInput(task_type="pick", examples=(entry(),))
    messages, _ = render_stage("awm_induce", payload)
    assert "take tomato 1 from diningtable 1" in messages[-1].content and "Task type: pick" in messages[-1].content
    reply = json.dumps({"steps": ["go to {place}", "take {obj} from {place}"], "rationale": "r"})
    assert run_stage(ScriptedBackend([reply]), "awm_induce", payload).value.steps[1] == "take {obj} from {place}"
