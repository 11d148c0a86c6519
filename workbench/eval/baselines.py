"""Memory conditions (ReAct / ICL / Traj) on the same tasks: episodes + teacher-forced accuracy."""

from __future__ import annotations

from pathlib import Path

from workbench.eval.config import RunConfig
from workbench.eval.driver import drive

__all__ = ["run_conditions"]


def run_conditions(
    lm, conditions: list[str], split: str | None, episode_tasks: str, tf_tasks: str | None, max_steps: int | None,
    runs_dir: str | Path, progress: bool = True, dtype: str | None = None, workers: int | None = None,
    ray_address: str | None = None, **run,
) -> dict[str, dict]:
    """Run every condition on the same tasks (resuming finished episodes); metrics per condition.

    All conditions are one job list (``workbench.eval.driver.drive``): played in this process, or by
    ``workers`` worker processes / a Ray cluster. Episodes run on ``episode_tasks``; teacher-forced accuracy on
    ``tf_tasks`` (cheap, low variance).

    Args:
        lm (LoadedModel | str): a loaded model (played in this process), or a model name (loaded by each worker; in this process
            when ``workers`` and ``ray_address`` are unset).
        dtype: the dtype of the runs (default: ``lm``'s, or float32 for a name).
        split: None takes the benchmark's default (``run["env"]``, ALFWorld when not given).
        max_steps: None takes the benchmark's default, as ``split`` does.
        tf_tasks: None or "" scores teacher forcing on ``episode_tasks`` where the benchmark has it on.
        **run (Any): more :class:`RunConfig` fields shared by every condition: ``env="scienceworld"``, ``task_types``,
            ``decode``, ``teacher_forcing``, ``memory_base`` ...
    """
    loaded = not isinstance(lm, str)
    name = lm.name if loaded else lm
    dtype = dtype or (lm.dtype if loaded else "float32")
    cfgs = [RunConfig(out=str(Path(runs_dir) / cond), split=split, tasks=episode_tasks, memory=cond, model=name,
                      max_steps=max_steps, dtype=dtype, teacher_forcing_tasks=tf_tasks or None, **run)
            for cond in conditions]
    serial_lm = lm if loaded and workers is None and ray_address is None else None
    report = drive(cfgs, resume=True, progress=progress, lm=serial_lm, workers=workers, ray_address=ray_address)
    return {cond: report.metrics[cfg.out] for cond, cfg in zip(conditions, cfgs)}
