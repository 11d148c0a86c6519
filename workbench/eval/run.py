"""``run``: play one run configuration through the driver (in-process, local workers or a Ray cluster)."""

from __future__ import annotations

from workbench.eval.config import RunConfig
from workbench.eval.driver import drive

__all__ = ["run"]


def run(cfg: RunConfig, resume: bool = False, progress: bool = True, lm=None, workers: int | None = None,
        ray_address: str | None = None) -> dict:
    """Run (or resume) a batch and write config.json, trajectories.jsonl, teacher_forced.json and metrics.json.

    Args:
        cfg: the run.
        resume: continue the run in ``cfg.out`` (its parameters must match).
        lm: a model already loaded in this process (it must be ``cfg.model`` in ``cfg.dtype``); serial only.
        workers: play the episodes in this many worker processes (a local Ray instance, started and stopped
            here, unless ``ray_address`` names a cluster).
        ray_address: an existing Ray cluster to run the workers on.

    Returns:
        The metrics dict written to metrics.json.
    """
    return drive([cfg], resume=resume, progress=progress, lm=lm, workers=workers,
                 ray_address=ray_address).metrics[cfg.out]
