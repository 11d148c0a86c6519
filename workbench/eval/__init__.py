"""Metrics over trajectories, the resumable runner, the driver over its executors, and experiment grids."""

from workbench.agents.teacher_forcing import (
    TeacherForcedResult,
    teacher_forced_accuracy,
)
from workbench.envs.selection import parse_task_slice
from workbench.eval.baselines import run_conditions
from workbench.eval.compare import condition_table, mcnemar_exact, paired_outcomes
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.driver import BatchReport, drive
from workbench.eval.executor import (
    InProcessExecutor,
    JobError,
    RayExecutor,
    make_executor,
)
from workbench.eval.jobs import Job, Worker
from workbench.eval.metrics import SR_KS, by_task_type, episode_metrics, success_rate_at
from workbench.eval.run import run
from workbench.eval.run_folder import load_run
from workbench.eval.sweep import Grid, GridError, load_grid, run_sweep
from workbench.eval.teacher_forced import teacher_forced_for

__all__ = ["BatchReport", "Grid", "GridError", "InProcessExecutor", "Job", "JobError", "RayExecutor", "RunConfig", "SR_KS", "TeacherForcedResult", "Worker", "by_task_type", "condition_table", "drive", "episode_metrics", "load_grid", "load_run", "make_executor", "mcnemar_exact", "paired_outcomes", "parse_task_slice", "run", "run_conditions", "run_sweep", "select_tasks", "success_rate_at", "teacher_forced_accuracy", "teacher_forced_for"]
