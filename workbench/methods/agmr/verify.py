"""Verifiers of a refinement candidate (Algorithm 1's re-execution): the recorded one, which answers from a refined
base's execution log without a model, and the model one, which plays the task again with the candidate as memory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.agents.loop import Agent
from workbench.envs.benchmarks import load_tasks, make_env
from workbench.memory.trajectory import MemoryEntry
from workbench.methods.agmr.records import Execution
from workbench.methods.agmr.refine import execute
from workbench.methods.agmr.refine_folder import load_executions

__all__ = ["recorded_verifier", "model_verifier"]


def recorded_verifier(refine_root: str | Path):
    """A verifier that replays what is on record: for a candidate the refinement played, its verification run.

    Returns:
        (Callable[[str, MemoryEntry], Execution]): ``verify(task_id, candidate) -> Execution`` (KeyError when that
            candidate was never played: use :func:`model_verifier` to play it).
    """
    execs = [e for e in load_executions(refine_root) if e.candidate]

    def verify(task_id: str, candidate: MemoryEntry) -> Execution:
        for e in execs:
            if e.task_id == task_id and e.memory.segments == candidate.segments and e.entry_id == candidate.entry_id:
                return e
        raise KeyError(f"{refine_root}: no verification of this candidate of {candidate.entry_id!r} on {task_id!r} "
                       "on record; play it with model_verifier(...)")

    return verify


def model_verifier(lm: Any, heads: Sequence[tuple[int, int]], split: str = "valid_seen", max_steps: int = 50,
                   env: str = "alfworld"):
    """A verifier that plays the task with the candidate (the same execution as the refinement's, heads captured),
    on benchmark ``env``.

    Returns:
        (Callable[[str, MemoryEntry], Execution]): ``verify(task_id, candidate) -> Execution``.
    """
    tasks = {t.task_id: t for t in load_tasks(env, split)}
    state: dict = {}

    def verify(task_id: str, candidate: MemoryEntry) -> Execution:
        if task_id not in tasks:
            raise KeyError(f"task {task_id!r} is not in {split}")
        if "agent" not in state:
            state["agent"] = Agent.for_benchmark(lm, env, record_admissible=env == "alfworld")
            state["env"] = make_env(env, max_steps)
        state["n"] = state.get("n", 0) + 1
        return execute(state["agent"], state["env"], heads, tasks[task_id], candidate, 1000 + state["n"],
                       candidate.version, True, max_steps)

    return verify
