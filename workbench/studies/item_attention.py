"""Item attention while MemArbiter plays (beyond the paper): the retrieval heads' mass on each focal and ambient item."""

from __future__ import annotations

from pathlib import Path

from workbench.agents.loop import Agent
from workbench.attention.items import episode_item_utilization
from workbench.envs.alfworld import ALFWorldEnv
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.task_cache import TaskCache, analysis_key
from workbench.memory.trajectory import Trajectory
from workbench.methods.arbiter.policy import ArbiterPolicy

__all__ = ["item_attention"]


def item_attention(lm, heads, split: str, tasks: str, budget: int = 500, max_steps: int = 50,
                   cache_dir: str | Path | None = None) -> tuple[list, list]:
    """Beyond the paper (a): item-level utilization by the retrieval heads while MemArbiter plays ``tasks``
    (each task's rows and episode kept in ``cache_dir`` as it finishes: a render resumes; None keeps nothing).

    Returns:
        ``(rows, trajectories)``: rows of :func:`workbench.attention.items.item_utilization` with their task id
        (:func:`~workbench.attention.items.focal_vs_ambient` compares the bands within steps), and the episodes
        (the run's own, played again with the heads captured: scoring is deterministic and capture only reads;
        always in ``score`` mode, since utilization is read at the scoring forward).
    """
    cache = TaskCache(cache_dir, "item_attention", analysis_key(lm, heads=[list(h) for h in heads], split=split,
                                                                  budget=budget, max_steps=max_steps))
    rows: list[dict] = []
    trajs = []
    agent, env = None, None
    try:
        for task in select_tasks(RunConfig(out="-", split=split, tasks=tasks, memory="none")):
            if (done := cache.get(task.task_id)) is None:
                if env is None:
                    agent, env = Agent.from_model(lm, keep_prompts=True), ALFWorldEnv(max_steps=max_steps)
                r, traj = episode_item_utilization(agent, env, task, ArbiterPolicy(budget=budget), heads, max_steps)
                done = {"rows": r, "trajectory": traj.model_dump(mode="json")}
                cache.put(task.task_id, done)
            rows += done["rows"]
            trajs.append(Trajectory.model_validate(done["trajectory"]))
    finally:
        if env is not None:
            env.close()
    return rows, trajs
