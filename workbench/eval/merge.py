"""Merge run folders that played disjoint task slices of one configuration into the run of their union.

Episodes are independent and deterministic given (task, model, memory, max_steps, seed), so a long batch can be
split over processes or sessions (``--tasks 0:134:2`` and ``--tasks 1:134:2``, a spread over every task type
each) and merged into exactly the folder ``workbench run --tasks all`` would have written: same ``config.json``
identity, episodes in task order, metrics recomputed. The merged folder can then be resumed like any other.

Teacher-forced accuracy (``teacher_forced.json``, one per memory condition) merges the same way: the parts'
scored steps, in task order, under the cache key of the union, so ``teacher_forced_for(..., tasks)`` finds it.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.run_folder import (
    CONFIG_FILE,
    batch_metrics,
    read_config,
    read_episodes,
    write_run_config,
)
from workbench.eval.teacher_forced import read_teacher_forced
from workbench.files import FormatError
from workbench.locks import folder_lock
from workbench.memory.trajectory import Trajectory, atomic_write_text, write_jsonl

__all__ = ["merge_runs", "merge_teacher_forced"]


def merge_runs(parts: list[str | Path], out: str | Path, tasks: str = "all", allow_partial: bool = False) -> dict:
    """Merge ``parts`` into ``out`` as the run of ``tasks``; returns the merged metrics.

    Every part must share the configuration apart from ``tasks`` and hold only episodes of ``tasks``; an
    episode present in two parts must be identical. Unless ``allow_partial``, every task of ``tasks`` must be
    present. ``out`` must not hold a run of another configuration; nothing is written when a check fails.
    When every part holds a ``teacher_forced.json``, they are merged too (``merge_teacher_forced``); otherwise
    ``out``'s own teacher forcing, if any, is left as it is.
    """
    if not parts:
        raise ValueError("merge_runs: no run folders given")
    for p in parts:
        if not Path(p).is_dir():
            raise (FormatError(p, "is a file, where a run folder belongs") if Path(p).exists()
                   else FileNotFoundError(f"{p}: no such run folder"))
    if Path(out).resolve() in {Path(p).resolve() for p in parts}:
        raise ValueError(f"merge_runs: --out {out} is one of the parts; merge into a new folder")
    with folder_lock(out, f"workbench merge-runs -> {out}"):
        return _merge_runs(parts, out, tasks, allow_partial)


def _merge_runs(parts: list[str | Path], out: str | Path, tasks: str, allow_partial: bool) -> dict:
    if not any((Path(p) / "config.json").exists() for p in parts) and \
            all((Path(p) / "teacher_forced.json").exists() for p in parts):
        return {"teacher_forced": merge_teacher_forced(parts, out, tasks, allow_partial)}
    identity: dict | None = None
    first: Path | None = None
    episodes: dict[str, Trajectory] = {}
    forwards: dict[str, str] = {}  # how each part's episodes were played (models.compiled)
    for folder in map(Path, parts):
        saved = read_config(folder)  # strict: types, ranges, unknown fields
        run = saved.run.model_dump()
        forwards[str(folder)] = saved.versions.get("forward") or "eager"
        trajs = read_episodes(folder)
        ident = _sans_tasks(run)
        if identity is None:
            identity, first = ident, folder
        elif ident != identity:
            diff = sorted(k for k in set(ident) | set(identity) if ident.get(k) != identity.get(k))
            raise ValueError(f"{folder}/config.json: differs from {first}/config.json in {diff}")
        for traj in trajs:
            if traj.task_id in episodes and episodes[traj.task_id] != traj:
                raise ValueError(f"{folder}/trajectories.jsonl: episode {traj.task_id} differs from the one in "
                                 "another part")
            episodes[traj.task_id] = traj
    assert identity is not None
    if len(set(forwards.values())) > 1:
        raise ValueError(f"the parts were played with different forwards ({forwards}): a compiled step's scores are "
                         "not eager's; merge the parts of one forward")
    cfg = RunConfig.from_identity(str(out), identity | {"tasks": tasks})
    order = [t.task_id for t in select_tasks(cfg)]
    _check_coverage(set(episodes), order, tasks, allow_partial, "episodes", "have no episode in the parts")
    out = Path(out)
    cfg_path = out / CONFIG_FILE
    if cfg_path.exists() and read_config(out).run.model_dump() != cfg.identity():
        raise ValueError(f"{cfg_path}: holds a run of another configuration; merge into a new folder")
    merged = [episodes[t] for t in order if t in episodes]
    metrics = batch_metrics(merged) | {"merged_from": [str(p) for p in parts]}
    has_tf = [(Path(p) / "teacher_forced.json").exists() for p in parts]
    tf = _merged_teacher_forced(parts, tasks, allow_partial) if all(has_tf) else None
    write_run_config(cfg, forward=next(iter(forwards.values())))
    if tf is not None:
        atomic_write_text(out / "teacher_forced.json", json.dumps(tf, indent=1))
        metrics["teacher_forced"] = tf["result"]
    write_jsonl(out / "trajectories.jsonl", merged)
    atomic_write_text(out / "metrics.json", json.dumps(metrics, indent=1))
    return metrics


def _sans_tasks(identity: dict) -> dict:
    """A run's or teacher forcing's identity without its task slice: what parts of one merge must share."""
    return {k: v for k, v in identity.items() if k != "tasks"}


def _check_coverage(found: set[str], order: list[str], tasks: str, allow_partial: bool, what: str,
                    missing_says: str) -> None:
    """Refuse items outside the slice ``tasks``, and (unless ``allow_partial``) tasks of it that are missing."""
    extra = sorted(found - set(order))
    if extra:
        raise ValueError(f"{what} outside --tasks {tasks!r}: {extra[:3]}{' ...' if len(extra) > 3 else ''}")
    missing = [t for t in order if t not in found]
    if missing and not allow_partial:
        raise ValueError(f"{len(missing)} of {len(order)} tasks of {tasks!r} {missing_says} (first: {missing[0]}); "
                         "run them, or pass allow_partial")


def merge_teacher_forced(parts: list[str | Path], out: str | Path, tasks: str = "all",
                         allow_partial: bool = False) -> dict:
    """Merge the parts' ``teacher_forced.json`` into ``out/teacher_forced.json`` for ``tasks``; returns its result.

    The parts must share model, memory condition and split, and score disjoint (or identical) tasks of ``tasks``;
    unless ``allow_partial`` every task of ``tasks`` must be scored. Nothing is written when a check fails.
    """
    merged = _merged_teacher_forced(parts, tasks, allow_partial)
    target = Path(out) / "teacher_forced.json"
    if target.exists():
        key = read_teacher_forced(target)["key"]
        if _sans_tasks(key) != _sans_tasks(merged["key"]):
            raise ValueError(f"{target}: holds teacher forcing of another configuration; merge into a new folder")
    Path(out).mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, json.dumps(merged, indent=1))
    return merged["result"]


def _merged_teacher_forced(parts: list[str | Path], tasks: str, allow_partial: bool) -> dict:
    identity: dict | None = None
    per_task: dict[str, list] = {}
    steps: dict[str, list[dict]] = {}
    for folder in map(Path, parts):
        path = folder / "teacher_forced.json"
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing (every part needs its teacher forcing to merge it)")
        data = read_teacher_forced(path)  # strict: every field of its type and range
        ident = _sans_tasks(data["key"])
        if identity is None:
            identity = ident
        elif ident != identity:
            raise ValueError(f"{path}: key {ident} differs from the first part's {identity}")
        part_steps: dict[str, list[dict]] = {}
        for rec in data["per_step"]:
            part_steps.setdefault(rec["task_id"], []).append(rec)
        for task_id, counts in data["per_task"].items():
            if task_id in per_task:
                if per_task[task_id] != list(counts) or steps[task_id] != part_steps.get(task_id, []):
                    raise ValueError(f"{path}: task {task_id} scored differently in another part")
                continue
            per_task[task_id] = list(counts)
            steps[task_id] = part_steps.get(task_id, [])
    assert identity is not None
    order = [t.task_id for t in select_tasks(RunConfig(out="", split=identity.get("split", "valid_unseen"),
                                                       tasks=tasks))]
    _check_coverage(set(per_task), order, tasks, allow_partial, "teacher forcing of tasks",
                    "are not scored by teacher forcing in the parts")
    ids = [t for t in order if t in per_task]
    per_step = [r for t in ids for r in steps[t]]
    n = len(per_step)
    correct = sum(per_task[t][0] for t in ids)
    result = {"accuracy": correct / n if n else 0.0, "n_steps": n, "n_tasks": len(ids),
              "mean_p_expert": sum(r["p_expert"] for r in per_step) / n if n else 0.0}
    return {"key": {**identity, "tasks": tasks}, "result": result, "per_task": {t: per_task[t] for t in ids},
            "per_step": per_step, "merged_from": [str(p) for p in parts]}
