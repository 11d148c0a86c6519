"""Figure 3 on a split: the segment-masking test and C of every task (notebook 03)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.attention.head_set import Head, HeadSet
from workbench.envs.alfworld import ALFWorldEnv
from workbench.memory.keyed import KeyedResult
from workbench.methods.agmr.recording import (
    UtilizationEpisode,
    load_utilization,
    save_utilization,
)
from workbench.studies.retrieval_heads import split_experts
from workbench.studies.segment_masking import SegmentMaskingResult, run_segment_masking

__all__ = ["segment_masking"]


def segment_masking(
    lm: Any,
    heads: HeadSet | Sequence[Head],
    split: str,
    tf_tasks: str,
    runs_dir: str | Path,
    episode_tasks: str = "",
    max_steps: int = 50,
    fraction: float = 0.2,
    carrier_heads: HeadSet | Sequence[Head] | str | None = None,
    progress: bool = True,
) -> tuple[SegmentMaskingResult, list[UtilizationEpisode]]:
    """Figure 3's test on ``split``; C of every task is kept in ``runs_dir/utilization.jsonl``."""
    runs_dir = Path(runs_dir)
    path, util = runs_dir / "segment_masking.json", runs_dir / "utilization.jsonl"
    heads = HeadSet.of(heads)
    key = {"model": lm.name, "dtype": lm.dtype, "heads": [list(h) for h in heads], "split": split, "tf_tasks": tf_tasks,
           "episode_tasks": episode_tasks, "max_steps": max_steps, "fraction": fraction,
           "carrier_heads": carrier_heads if isinstance(carrier_heads, (str, type(None)))
           else [list(h) for h in HeadSet.of(carrier_heads)]}
    if KeyedResult(path, key).fresh() and util.exists():
        return SegmentMaskingResult.load(path), load_utilization(util)
    _, by_id, experts = split_experts(split, tf_tasks)
    ep_tasks, _, ep_experts = split_experts(split, episode_tasks)
    env = ALFWorldEnv(max_steps=max_steps) if ep_tasks else None
    try:
        result, records = run_segment_masking(
            Agent.from_model(lm, keep_prompts=True), build_policy("traj"), heads, experts=experts, tasks=by_id,
            fraction=fraction, env=env, episode_tasks=ep_tasks, max_steps=max_steps, carrier_heads=carrier_heads,
            expert_plans={e.task_id: e.actions() for e in ep_experts}, progress=progress,
        )
    finally:
        if env is not None:
            env.close()
    result.save(path)
    save_utilization(util, records)
    KeyedResult(path, key).mark()
    return result, records
