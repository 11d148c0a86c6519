"""AWM, offline version (a baseline of AGMR's Table 1): one reusable workflow per task type, induced from the
memory base's successful trajectories by the ``awm_induce`` stage (a model backend, or ``offline-alfworld``'s
documented algorithm: the most frequent role-abstracted skeleton, :mod:`workbench.methods.agmr.offline.awm`).

At each task the workflow of its type is shown as the memory block, in the place and layout of a retrieved
trajectory: the task's goal, then one segment per workflow step, ``{obj}`` and ``{target}`` filled from the goal,
``{place}`` written as ``a place``. The same workflow serves every task of a type, so the memory never carries
another game's instance numbers or rooms.
"""

from __future__ import annotations

from typing import Any

from workbench.agents.policy import _StaticEntry
from workbench.envs.alfworld_text import parse_goal
from workbench.envs.base import Task
from workbench.llm import run_stage
from workbench.memory.trajectory import MemoryEntry, Segment
from workbench.methods.agmr.stage_types import WorkflowInput

__all__ = ["WorkflowMemory", "instantiate", "MAX_EXAMPLES"]

MAX_EXAMPLES = 12  # trajectories per type sent to the induction stage (the first by entry id)


def instantiate(steps: tuple[str, ...], goal: str) -> tuple[str, ...]:
    """The workflow's steps with ``{obj}`` / ``{target}`` from ``goal`` and ``{place}`` as ``a place``."""
    spec = parse_goal(goal)
    fill = {"{obj}": spec.obj if spec else "the object", "{target}": (spec.recep or spec.tool or "the target")
            if spec else "the target", "{place}": "a place"}
    out = []
    for s in steps:
        for k, v in fill.items():
            s = s.replace(k, v)
        out.append(s)
    return tuple(out)


class WorkflowMemory(_StaticEntry):
    """The AWM memory policy.

    Args:
        base: the memory base whose successful entries the workflows are induced from.
        backend: the ``awm_induce`` stage's backend.
        max_examples: trajectories per type given to the stage.
    """

    name = "awm"

    def __init__(self, base: Any, backend: Any, max_examples: int = MAX_EXAMPLES) -> None:
        super().__init__()
        by_type: dict[str, list[MemoryEntry]] = {}
        for e in sorted(base.entries(), key=lambda e: e.entry_id):
            if e.success and e.segments:
                by_type.setdefault(e.task_type, []).append(e)
        self.workflows = {t: run_stage(backend, "awm_induce",
                                       WorkflowInput(task_type=t, examples=tuple(es[:max_examples]))).value
                          for t, es in sorted(by_type.items())}
        self.backend_name = getattr(backend, "name", str(backend))

    def _choose(self, task: Task, goal: str) -> tuple[MemoryEntry | None, dict]:
        wf = self.workflows.get(task.task_type)
        if wf is None:
            return None, {"memory_entry": None}
        steps = instantiate(wf.steps, goal)
        entry = MemoryEntry(entry_id=f"awm/{task.task_type}", task_id=f"awm/{task.task_type}", task_type=task.task_type,
                            goal=goal, segments=tuple(Segment(action=s) for s in steps), source=f"awm:{self.backend_name}")
        return entry, {"memory_entry": entry.entry_id, "workflow": list(wf.steps)}
