"""Teacher-forced accuracy of a run's tasks: per-task parts (a driver job each), their sum, and the cached ``teacher_forced.json``."""

from __future__ import annotations

import json
from pathlib import Path

from tqdm.auto import tqdm

from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.agents.teacher_forcing import teacher_forced_accuracy
from workbench.envs.base import Task
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, select_tasks
from workbench.memory.keyed import read_keyed_json
from workbench.memory.trajectory import (
    Trajectory,
    atomic_write_text,
)

__all__ = ["expert_for", "teacher_forced_part", "combine_teacher_forced", "teacher_forced_key", "teacher_forced_for"]


def expert_for(split: str, task_id: str) -> Trajectory:
    """The planner's expert trajectory of ``task_id`` (what teacher forcing replays)."""
    for e in expert_trajectories_for(split):
        if e.task_id == task_id:
            return e
    raise ValueError(f"no expert trajectory for {task_id} in {split}")


def teacher_forced_part(agent, expert: Trajectory, task: Task, policy) -> dict:
    """One task's teacher-forced steps (a job's result; ``combine_teacher_forced`` adds tasks up)."""
    res = teacher_forced_accuracy(agent, [expert], {task.task_id: task}, policy, progress=False)
    return {"task_id": task.task_id, "n_correct": res.n_correct, "n_steps": res.n_steps,
            "p_sum": res.mean_p_expert * res.n_steps, "per_task": res.per_task[task.task_id],
            "per_step": list(res.per_step)}


def combine_teacher_forced(key: dict, parts: list[dict]) -> dict:
    """The ``teacher_forced.json`` record of ``parts`` (one per task, in the split's expert order)."""
    n = sum(p["n_steps"] for p in parts)
    correct = sum(p["n_correct"] for p in parts)
    p_sum = sum(p["p_sum"] for p in parts)
    result = {"accuracy": correct / n if n else 0.0, "n_steps": n, "n_tasks": len(parts),
              "mean_p_expert": p_sum / n if n else 0.0}
    return {"key": key, "result": result, "per_task": {p["task_id"]: list(p["per_task"]) for p in parts},
            "per_step": [s for p in parts for s in p["per_step"]]}


def teacher_forced_key(model: str, dtype: str, memory: str, split: str, tasks: str) -> dict:
    """What a ``teacher_forced.json`` was computed for (recomputed when any of it differs)."""
    return {"model": model, "dtype": dtype, "memory": memory, "split": split, "tasks": tasks}


def teacher_forced_for(lm, memory: str, split: str, tasks: str, out: str | Path, progress: bool = True,
                       policy=None) -> dict:
    """Teacher-forced accuracy of ``lm`` under memory ``memory`` on the expert plans of ``tasks``.

    ``policy``: a memory policy object to use instead of ``build_policy(memory)`` (``memory`` then names it
    in the cache key). Cached in ``out/teacher_forced.json`` (recomputed when the parameters differ). The
    same per-task parts and sums as the driver's teacher-forcing jobs, so both write the same file.
    """
    path = Path(out) / "teacher_forced.json"
    key = teacher_forced_key(lm.name, lm.dtype, memory, split, tasks)
    if (cached := read_keyed_json(path, key)) is not None:
        return cached["result"]
    by_id = {t.task_id: t for t in select_tasks(RunConfig(out=str(out), split=split, tasks=tasks))}
    agent, policy = Agent.from_model(lm), policy or build_policy(memory)
    experts = [e for e in expert_trajectories_for(split) if e.task_id in by_id]
    parts = [teacher_forced_part(agent, e, by_id[e.task_id], policy)
             for e in tqdm(experts, desc=f"teacher forcing [{memory}]", disable=not progress)]
    record = combine_teacher_forced(key, parts)
    atomic_write_text(path, json.dumps(record, indent=1))
    return record["result"]
