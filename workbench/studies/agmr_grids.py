"""AGMR's evaluation grid (notebook 04): the run configurations of the refined bases and the baselines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from workbench.eval.config import RunConfig

__all__ = ["agmr_configs"]


def agmr_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path, bases: dict[str, str],
                 conditions: Sequence[str] = ("none", "icl", "awm", "dc-rs", "traj"), dtype: str = "float32",
                 teacher_forcing: bool = False) -> list:
    """The run configurations of Table 1 / Table 2: ``conditions`` plus a ``traj`` run over each refined base.

    Args:
        bases: condition name -> refined base folder (``{"agmr": ..., "agmr-no-agr": ...}``).
    """
    out = Path(root) / model
    common = dict(split=split, tasks=tasks, model=model, max_steps=max_steps, dtype=dtype,
                  teacher_forcing=teacher_forcing)
    cfgs = [RunConfig(out=str(out / c), memory=c, **common) for c in conditions]
    cfgs += [RunConfig(out=str(out / name), memory="traj", memory_base=str(folder), **common)
             for name, folder in bases.items()]
    return cfgs
