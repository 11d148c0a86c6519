"""The attention experiments on an ALFWorld split, cached under a runs folder (what notebooks 02/03 and the CLI call).

* :func:`build_supervision` -> the retrieval supervision set of a split (``supervision.jsonl``);
* :func:`retrieval_heads` -> head scores over it (``head_scores.json``, named by model);
* :func:`head_ablation` -> Figure 2's arms (``ablation/<arm>.json``, ``ablation.json``);
* :func:`segment_masking` -> Figure 3's test and the C of every task (``utilization.jsonl``, ``segment_masking.json``).

Every step writes its result under ``runs_dir`` keyed by its parameters, so re-running a notebook only
computes what changed. Memory is the default memory base (valid_train expert trajectories, see
:func:`workbench.agents.policy.build_policy`); teacher forcing runs on the split's expert plans.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.attention.heads import HeadScores, score_heads
from workbench.attention.supervision import (
    SupervisionRecord,
    load_supervision,
    save_supervision,
    supervision_pairs,
)
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.run import run
from workbench.eval.run_folder import load_run
from workbench.eval.teacher_forced import teacher_forced_for
from workbench.memory.keyed import KeyedResult
from workbench.models import load_model
from workbench.studies.supervision import (
    build_step_level,
    build_task_level,
    step_transitions,
    task_transitions,
)

__all__ = ["try_load_model", "split_experts", "teacher_forced_steps", "build_supervision", "retrieval_heads",
           "committed_heads_note"]


def try_load_model(name: str, dtype: str = "float32") -> Any | None:
    """``load_model(name, dtype=dtype)``, or None with a warning when its weights are not available here."""
    try:
        return load_model(name, dtype=dtype)
    except (FileNotFoundError, OSError, ValueError) as err:
        warnings.warn(f"model '{name}' is skipped: {err}", stacklevel=2)
        return None


def split_experts(split: str, tasks: str) -> tuple[list, dict, list]:
    """``(tasks, task_id -> Task, expert trajectories)`` of a slice (``"0:20"``) of a split's sorted tasks."""
    if not tasks:
        return [], {}, []
    task_list = select_tasks(RunConfig(out="", split=split, tasks=tasks))
    by_id = {t.task_id: t for t in task_list}
    experts = [e for e in expert_trajectories_for(split) if e.task_id in by_id]
    return task_list, by_id, experts


def teacher_forced_steps(lm: Any, memory: str, split: str, tasks: str, folder: str | Path,
                         progress: bool = True) -> list[dict]:
    """Per-step teacher-forced records of ``memory`` (cached in ``folder/teacher_forced.json``)."""
    path = Path(folder) / "teacher_forced.json"
    teacher_forced_for(lm, memory, split, tasks, folder, progress=progress)
    data = json.loads(path.read_text())
    if "per_step" not in data:  # written before per-step records were kept: recompute
        path.unlink()
        teacher_forced_for(lm, memory, split, tasks, folder, progress=progress)
        data = json.loads(path.read_text())
    return data["per_step"]


def _round_robin(records: list[SupervisionRecord]) -> list[SupervisionRecord]:
    """One record per task in turn (first steps first), so a cap on the set keeps it spread over tasks."""
    by_task: dict[str, list[SupervisionRecord]] = {}
    for r in records:
        by_task.setdefault(r.task_id, []).append(r)
    out, depth = [], 0
    while len(out) < len(records):
        out += [rs[depth] for rs in by_task.values() if depth < len(rs)]
        depth += 1
    return out


def build_supervision(
    lm: Any,
    split: str,
    tasks: str,
    runs_dir: str | Path,
    analyzer: Any = "template",
    episode_runs: tuple[str | Path, str | Path] | None = None,
    max_pairs: int | None = None,
    episode_tasks: str = "",
    max_steps: int = 50,
    progress: bool = True,
) -> list[SupervisionRecord]:
    """The retrieval supervision set of ``lm`` on ``tasks`` of ``split`` (``runs_dir/supervision.jsonl``).

    Task-level transitions come from ``episode_runs = (run folder without memory, run folder with traj)``
    (runner outputs on the same tasks) when given, or from episodes played here on ``episode_tasks`` (cached
    in ``runs_dir/ep-none`` and ``runs_dir/ep-traj``, resumable); step-level transitions from teacher forcing
    with memory ``none`` vs ``traj`` (cached in ``runs_dir/tf-none`` and ``runs_dir/tf-traj``). Records of a task-level
    transition replace step-level ones of the same task and step.

    Args:
        analyzer: ``"template"`` or a ``workbench.llm`` Backend (see :mod:`workbench.attention.supervision`).
        max_pairs: keep at most this many records (task-level first, then step-level ones taking one step per
            task in turn).
    """
    runs_dir = Path(runs_dir)
    path = runs_dir / "supervision.jsonl"
    key = {"model": lm.name, "dtype": lm.dtype, "split": split, "tasks": tasks, "max_pairs": max_pairs,
           "analyzer": analyzer if isinstance(analyzer, str) else getattr(analyzer, "name", "backend"),
           "episode_runs": [str(p) for p in episode_runs] if episode_runs else None,
           "episode_tasks": episode_tasks, "max_steps": max_steps if episode_tasks else None}
    if KeyedResult(path, key).fresh():
        return load_supervision(path)
    if episode_tasks and not episode_runs:
        episode_runs = (runs_dir / "ep-none", runs_dir / "ep-traj")
        for memory, folder in zip(("none", "traj"), episode_runs):
            run(RunConfig(out=str(folder), split=split, tasks=episode_tasks, memory=memory, model=lm.name,
                          max_steps=max_steps, teacher_forcing=False, dtype=lm.dtype), resume=True, progress=progress,
                lm=lm)
    _, by_id, experts = split_experts(split, tasks)
    builder = Agent.from_model(lm).builder
    policy = build_policy("traj")
    records: list[SupervisionRecord] = []
    if episode_runs:
        without, _, _ = load_run(episode_runs[0])
        with_mem, _, _ = load_run(episode_runs[1])
        every_task = split_experts(split, "all")[1]  # the runs may cover tasks outside ``tasks``
        records += build_task_level(builder, task_transitions(without, with_mem), every_task, policy,
                                    analyzer=analyzer, model_name=lm.name, split=split)
    none = teacher_forced_steps(lm, "none", split, tasks, runs_dir / "tf-none", progress)
    traj = teacher_forced_steps(lm, "traj", split, tasks, runs_dir / "tf-traj", progress)
    seen = {(r.task_id, r.step) for r in records}
    transitions = [t for t in step_transitions(none, traj) if (t.task_id, t.step) not in seen]
    steps = build_step_level(builder, experts, by_id, policy, transitions, analyzer=analyzer, model_name=lm.name,
                             split=split, progress=progress)
    records += _round_robin(steps)
    records = records[:max_pairs] if max_pairs is not None else records
    save_supervision(path, records)
    KeyedResult(path, key).mark()
    return records


def retrieval_heads(
    lm: Any,
    records: Sequence[SupervisionRecord],
    runs_dir: str | Path,
    progress: bool = True,
) -> HeadScores:
    """Head scores of ``lm`` over ``records`` (``runs_dir/head_scores.json``, cached by model and records)."""
    path = Path(runs_dir) / "head_scores.json"
    key = {"model": lm.name, "dtype": lm.dtype, "records": [[r.task_id, r.step, r.key_spans] for r in records]}
    if KeyedResult(path, key).fresh():
        return HeadScores.load(path, model_name=lm.name)
    if not records:
        raise ValueError("the supervision set is empty: widen the tasks (no step where memory corrected the "
                         "model), or load a supervision file")
    scores = score_heads(lm, supervision_pairs(records, lm), progress=progress)
    scores.save(path)
    KeyedResult(path, key).mark()
    return scores


def committed_heads_note(model_name: str, top: Sequence[tuple[int, int]]) -> str:
    """How heads scored here compare with the model's committed retrieval heads (``assets/heads``), in words:
    the two rankings and their overlap, and where the committed ones came from (their command, dtype and slice
    can differ from this render's, and the ranking below the first few heads moves with them)."""
    from workbench.attention.heads import HEADS_ASSETS, read_retrieval_heads

    path = HEADS_ASSETS / f"{model_name}.json"
    if not path.exists():
        return f"`{model_name}` has no committed retrieval heads."
    committed = read_retrieval_heads(path, model_name)
    name = lambda h: f"L{h[0]}.H{h[1]}"  # noqa: E731
    same = len({tuple(h) for h in top} & {tuple(h) for h in committed[:len(top)]})
    source = json.loads(path.read_text()).get("source", "")
    made = re.match(r"(.*?\(git [0-9a-f]+\))", source)  # "`command` (git abc1234): what it scored"
    return (f"Top {len(top)} here: {', '.join(map(name, top))}. Committed for `{model_name}` "
            f"(`workbench/assets/heads/{path.name}`): {', '.join(map(name, committed))}; {same} of {len(top)} in "
            f"common. The committed ones come from {made.group(1) if made else source or 'an unrecorded command'}: "
            "a different dtype or slice moves the lower ranks.")
