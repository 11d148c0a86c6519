"""Merge run folders that played disjoint task slices of one configuration into the run of their union.

Episodes are independent and deterministic given (task, model, memory, max_steps, seed), so a long batch can be
split over processes or sessions (``--tasks 0:134:2`` and ``--tasks 1:134:2``, a spread over every task type
each) and merged into exactly the folder ``workbench run --tasks all`` would have written: same ``config.json``
identity, episodes in task order, metrics recomputed. The merged folder can then be resumed like any other.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.eval.runner import RunConfig, batch_metrics, load_run, select_tasks, write_run_config
from workbench.memory.trajectory import Trajectory, atomic_write_text, write_jsonl

__all__ = ["merge_runs"]


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
    episodes: dict[str, Trajectory] = {}
    for folder in map(Path, parts):
        if not (folder / "config.json").exists():
            raise FileNotFoundError(f"{folder / 'config.json'}: not a run folder (no config.json)")
        trajs, _, config = load_run(folder)
        run = config.get("run")
        if not isinstance(run, dict) or "tasks" not in run:
            raise ValueError(f"{folder / 'config.json'}: field 'run' missing or without 'tasks'")
        ident = {k: v for k, v in run.items() if k != "tasks"}
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
    merged = [episodes[t] for t in order if t in episodes]
    metrics = batch_metrics(merged) | {"merged_from": [str(p) for p in parts]}
    write_run_config(cfg)
    write_jsonl(out / "trajectories.jsonl", merged)
    atomic_write_text(out / "metrics.json", json.dumps(metrics, indent=1))
    return metrics
