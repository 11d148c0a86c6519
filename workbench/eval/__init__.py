"""Metrics over trajectories and the resumable batch runner."""

from workbench.eval.baselines import run_conditions
from workbench.eval.compare import condition_table, mcnemar_exact, paired_outcomes
from workbench.eval.metrics import SR_KS, by_task_type, episode_metrics, success_rate_at
from workbench.eval.runner import RunConfig, load_run, parse_task_slice, run, select_tasks, teacher_forced_for
from workbench.eval.teacher_forcing import TeacherForcedResult, teacher_forced_accuracy

__all__ = [
    "RunConfig", "SR_KS", "TeacherForcedResult", "by_task_type", "condition_table", "episode_metrics", "load_run",
    "mcnemar_exact", "paired_outcomes",
    "parse_task_slice", "run", "run_conditions", "select_tasks", "success_rate_at", "teacher_forced_accuracy",
    "teacher_forced_for",
]
