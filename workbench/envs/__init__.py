"""Text benchmarks behind one Protocol (ALFWorld; ScienceWorld to come), expert plans, normalisation."""

from workbench.envs.alfworld import (
    DATA_ENV_VAR,
    MAX_STEPS,
    ALFWorldEnv,
    alfworld_data_root,
    load_alfworld_tasks,
)
from workbench.envs.base import DataRootError, Environment, StepResult, Task
from workbench.envs.experts import (
    expert_trajectories,
    handcoded_trajectory,
    planner_trajectory,
    replay,
)
from workbench.envs.normalize import (
    normalize_observation,
    split_initial_observation,
    to_admissible,
)

__all__ = [
    "ALFWorldEnv", "DATA_ENV_VAR", "DataRootError", "Environment", "MAX_STEPS", "StepResult", "Task",
    "alfworld_data_root", "expert_trajectories", "handcoded_trajectory", "load_alfworld_tasks",
    "normalize_observation", "planner_trajectory", "replay", "split_initial_observation", "to_admissible",
]
