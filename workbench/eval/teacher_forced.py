"""Teacher-forced accuracy of a run's tasks: per-task parts (a driver job each), their sum, and the cached ``teacher_forced.json``."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.agents.teacher_forcing import teacher_forced_accuracy
from workbench.envs.base import Task
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, select_tasks
from workbench.files import (
    FormatError,
    iter_jsonl,
    present,
    read_json,
    read_json_model,
    read_jsonl_models,
)
from workbench.memory.keyed import canonical, read_keyed_json
from workbench.memory.trajectory import (
    Trajectory,
    atomic_write_text,
)

__all__ = ["expert_for", "teacher_forced_part", "combine_teacher_forced", "teacher_forced_key", "teacher_forced_for",
           "TeacherForcedFile", "read_teacher_forced", "read_teacher_forced_parts", "TF_FILE"]

TF_FILE = "teacher_forced.json"


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


Prob = Field(ge=0.0, le=1.0)


class TFStep(_Rec):
    """One teacher-forced step."""

    task_id: str = Field(min_length=1)
    step: int = Field(ge=0)
    expert: str
    chosen: str
    p_expert: float = Prob
    memory_entry: str | None = None


class TFResult(_Rec):
    accuracy: float = Prob
    n_steps: int = Field(ge=0)
    n_tasks: int = Field(ge=0)
    mean_p_expert: float = Prob


class TeacherForcedFile(_Rec):
    """A ``teacher_forced.json``, read strictly."""

    key: dict[str, str]
    result: TFResult
    per_task: dict[str, tuple[int, int]]  # task id -> (correct, steps)
    per_step: list[TFStep]
    merged_from: list[str] = []


class TFPart(_Rec):
    """One task's teacher forcing (a line of ``teacher_forced.parts.jsonl``)."""

    task_id: str = Field(min_length=1)
    n_correct: int = Field(ge=0)
    n_steps: int = Field(ge=0)
    p_sum: float = Field(ge=0.0)
    per_task: tuple[int, int]
    per_step: list[TFStep]


class TFPartLine(_Rec):
    key: dict[str, str]
    part: TFPart


def read_teacher_forced(path: str | Path) -> dict:
    """A ``teacher_forced.json`` (strictly: see :class:`TeacherForcedFile`), as the dict it holds."""
    rec = read_json_model(path, TeacherForcedFile, "teacher forcing record",
                          fix="delete it: `workbench run --resume` scores the tasks again")
    raw = read_json(path)  # what the file holds, as written (the model checked it)
    n = sum(c[1] for c in rec.per_task.values())
    if n != rec.result.n_steps or len(rec.per_task) != rec.result.n_tasks:
        raise FormatError(path, f"field 'result': {rec.result.n_steps} steps of {rec.result.n_tasks} tasks, but "
                          f"per_task holds {n} of {len(rec.per_task)}", fix="delete it: `workbench run --resume` "
                          "scores the tasks again")
    return raw


def read_teacher_forced_parts(path: str | Path, key: dict) -> dict[str, dict]:
    """Task id -> part of the append-only ``teacher_forced.parts.jsonl`` scored under ``key`` (a torn last line
    skipped; any other malformed line an error)."""
    path = Path(path)
    if not present(path):
        return {}
    want = canonical(key)
    read_jsonl_models(path, TFPartLine, torn_ok=True, what="teacher forcing parts")  # every line checked
    return {obj["part"]["task_id"]: obj["part"] for _, obj in iter_jsonl(path, torn_ok=True) if obj["key"] == want}


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
