"""Merge run folders that played disjoint task slices of one configuration into the run of their union.

Episodes are independent and deterministic given (task, model, memory, max_steps, seed), so a long batch can be
split over processes or sessions (``--tasks 0:134:2`` and ``--tasks 1:134:2``, a spread over every task type
each) and merged into exactly the folder ``workbench run --tasks all`` would have written: same ``config.json``
identity, episodes in task order, metrics recomputed. The merged folder can then be resumed like any other.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.eval.metrics import by_task_type, episode_metrics
from workbench.eval.runner import RunConfig, select_tasks, versions
from workbench.memory.trajectory import Trajectory, iter_jsonl_dicts
from workbench.memory.trajectory import atomic_write_text

__all__ = ["merge_runs"]


def _read_part(folder: Path) -> tuple[dict, list[dict]]:
    cfg_path = folder / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{cfg_path}: not a run folder (no config.json)")
    run = json.loads(cfg_path.read_text()).get("run")
    if not isinstance(run, dict) or "tasks" not in run:
        raise ValueError(f"{cfg_path}: field 'run' missing or without 'tasks'")
    return run, list(iter_jsonl_dicts(folder / "trajectories.jsonl"))


def merge_runs(parts: list[str | Path], out: str | Path, tasks: str = "all", allow_partial: bool = False) -> dict:
    """Merge ``parts`` into ``out`` as the run of ``tasks``; returns the merged metrics.

    Every part must share the configuration apart from ``tasks`` and hold only episodes of ``tasks``; an
    episode present in two parts must be identical. Unless ``allow_partial``, every task of ``tasks`` must be
    present. ``out`` must not hold a run of another configuration; nothing is written when a check fails.
    """
    if not parts:
        raise ValueError("merge_runs: no run folders given")
    identity: dict | None = None
    first: Path | None = None
    episodes: dict[str, dict] = {}
    for folder in map(Path, parts):
        run, rows = _read_part(folder)
        ident = {k: v for k, v in run.items() if k != "tasks"}
        if identity is None:
            identity, first = ident, folder
        elif ident != identity:
            diff = sorted(k for k in set(ident) | set(identity) if ident.get(k) != identity.get(k))
            raise ValueError(f"{folder}/config.json: differs from {first}/config.json in {diff}")
        for row in rows:
            tid = row["task_id"]
            if tid in episodes and episodes[tid] != row:
                raise ValueError(f"{folder}/trajectories.jsonl: episode {tid} differs from the one in another part")
            episodes[tid] = row
    assert identity is not None
    cfg = RunConfig(out=str(out), **{**identity, "tasks": tasks, "task_types": tuple(identity.get("task_types", ()))})
    order = [t.task_id for t in select_tasks(cfg)]
    extra = sorted(set(episodes) - set(order))
    if extra:
        raise ValueError(f"episodes outside --tasks {tasks!r}: {extra[:3]}{' ...' if len(extra) > 3 else ''}")
    missing = [t for t in order if t not in episodes]
    if missing and not allow_partial:
        raise ValueError(f"{len(missing)} of {len(order)} tasks of {tasks!r} have no episode in the parts "
                         f"(first: {missing[0]}); run them, or pass allow_partial")
    out = Path(out)
    cfg_path = out / "config.json"
    if cfg_path.exists() and json.loads(cfg_path.read_text()).get("run") != cfg.identity():
        raise ValueError(f"{cfg_path}: holds a run of another configuration; merge into a new folder")
    trajs = [Trajectory.model_validate(episodes[t]) for t in order if t in episodes]
    metrics = episode_metrics(trajs) | {"by_task_type": by_task_type(trajs),
                                        "merged_from": [str(p) for p in parts]}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "trajectories.jsonl", "".join(json.dumps(episodes[t]) + "\n" for t in order if t in episodes))
    atomic_write_text(cfg_path, json.dumps({"run": cfg.identity(), "versions": versions()}, indent=1))
    atomic_write_text(out / "metrics.json", json.dumps(metrics, indent=1))
    return metrics
