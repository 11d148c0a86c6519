"""The default memory base (valid_train expert trajectories) and expert trajectories per split.

The planner's plans for the shipped game files are committed under ``workbench/assets/alfworld/`` (planning
all 474 games takes ~20 min on 2 cores). For another data root (``$WORKBENCH_ALFWORLD_DATA``) they are
generated on first use and cached under ``cache_root()/experts/<root hash>/``.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from workbench.envs.alfworld import (
    _REPO_DEFAULT,
    alfworld_data_root,
    load_alfworld_tasks,
)
from workbench.envs.experts import expert_trajectories
from workbench.locks import folder_lock
from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import Trajectory, read_jsonl, write_jsonl
from workbench.paths import cache_root

__all__ = ["expert_trajectories_for", "default_memory_base", "ASSETS"]

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "alfworld"


def _expert_file(split: str) -> Path:
    root = alfworld_data_root().resolve()
    if root == _REPO_DEFAULT.resolve():
        return ASSETS / f"planner_{split}.jsonl"
    digest = hashlib.sha1(str(root).encode()).hexdigest()[:10]
    return cache_root() / "experts" / digest / f"planner_{split}.jsonl"


@lru_cache(maxsize=8)
def _cached_experts(path: str, split: str) -> tuple[Trajectory, ...]:
    p = Path(path)
    if not p.exists():
        trajs, _ = expert_trajectories(load_alfworld_tasks(split), kind="planner")
        write_jsonl(p, trajs)
    return tuple(read_jsonl(p, Trajectory))


def expert_trajectories_for(split: str) -> list[Trajectory]:
    """The planner's (successful, replayed) trajectories of every task of ``split``."""
    return list(_cached_experts(str(_expert_file(split)), split))


@lru_cache(maxsize=2)
def default_memory_base(split: str = "valid_train"):
    """A MemoryBase of the successful expert trajectories of ``split`` (built once, then read from disk)."""
    folder = cache_root() / "memory" / f"alfworld-{split}-planner-{_expert_file(split).stem}-{_digest(split)}"
    if (folder / "entries.jsonl").exists():
        return MemoryBase(folder)
    # built once: two processes starting on a fresh cache take turns (the second finds it built)
    with folder_lock(folder, f"building the default memory base of {split}", wait=600):
        base = MemoryBase(folder)
        if not base.entries():
            base.build_from_trajectories([t for t in expert_trajectories_for(split) if t.success])
    return base


def _digest(split: str) -> str:
    """Content hash of the expert file, so an updated file gets a fresh memory base."""
    return hashlib.sha1(_expert_file(split).read_bytes()).hexdigest()[:10] if _expert_file(split).exists() else "new"


def expert_success_table():
    """Success of the committed expert trajectories per split and expert (planner, handcoded) as a DataFrame."""
    import pandas as pd

    rows = {}
    for path in sorted(ASSETS.glob("*_valid_*.jsonl")):
        kind, split = path.stem.split("_", 1)
        trajs = read_jsonl(path, Trajectory)
        won = sum(t.success for t in trajs)
        steps = [t.n_steps for t in trajs if t.success]
        rows[(split, kind)] = {"games": len(trajs), "won": won, "success_%": 100 * won / max(1, len(trajs)),
                               "avg_steps_won": sum(steps) / max(1, len(steps))}
    return pd.DataFrame.from_dict(rows, orient="index")
