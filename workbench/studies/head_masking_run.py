"""Figure 2 on a split: the head-masking arms run over the expert plans (notebook 02)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.attention.head_set import Head, HeadSet
from workbench.envs.alfworld import ALFWorldEnv
from workbench.studies.head_masking import HeadAblationResult, run_head_ablation
from workbench.studies.retrieval_heads import split_experts

__all__ = ["head_ablation"]


def head_ablation(
    lm: Any,
    top_heads: HeadSet | Sequence[Head],
    split: str,
    tf_tasks: str,
    runs_dir: str | Path,
    episode_tasks: str = "",
    max_steps: int = 50,
    n_random: int = 3,
    seed: int = 0,
    baselines: Sequence[str] = ("none", "icl"),
    progress: bool = True,
) -> HeadAblationResult:
    """Figure 2's arms on ``split`` (teacher forcing on ``tf_tasks``, episodes on ``episode_tasks``).

    ``baselines``: the unmasked reference arms (ICL, the paper's; no memory, what the supervision set contrasts).
    """
    _, by_id, experts = split_experts(split, tf_tasks)
    ep_tasks, ep_by_id, _ = split_experts(split, episode_tasks)
    env = ALFWorldEnv(max_steps=max_steps) if ep_tasks else None
    try:
        result = run_head_ablation(
            Agent.from_model(lm), {name: build_policy(name) for name in (*baselines, "traj")}, top_heads,
            experts=experts, tasks={**by_id, **ep_by_id}, n_random=n_random, seed=seed, env=env,
            episode_tasks=ep_tasks, max_steps=max_steps, cache_dir=Path(runs_dir) / "ablation",
            baselines=baselines, progress=progress,
        )
    finally:
        if env is not None:
            env.close()
    result.save(Path(runs_dir) / "ablation.json")
    return result
