"""MemArbiter's failure memory: at repeated-failure states, write the action again without each failure item."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.loop import Agent
from workbench.agents.policy import replay_at
from workbench.envs.alfworld_text import is_failure, normalize
from workbench.eval.config import policy_for, select_tasks
from workbench.eval.task_cache import TaskCache, analysis_key, rows_per_episode
from workbench.memory.trajectory import Trajectory
from workbench.models.generation import generate_action

__all__ = ["FAILURE_ABLATIONS", "UNQUOTED", "repeated_failures", "failure_memory_ablation", "summarize_failure_ablation"]


# What P_t shows at a repeated failure, and what is left out of it in each variant (banks); ``unquoted`` (None)
# keeps every item but writes the failed command as UNQUOTED wherever P_t quotes it: does the memory make the agent
# repeat the failure by quoting it (a command in the prompt is a command to copy), or by what it says?
FAILURE_ABLATIONS = {"as shown": (), "no constraint": ("constraint",), "no episodic": ("episodic",),
                     "neither": ("constraint", "episodic"), "unquoted": None}


UNQUOTED = "the command that failed"


def repeated_failures(traj: Trajectory) -> list[int]:
    """Steps k whose action repeats step k-1's after the game answered step k-1 "Nothing happens."."""
    return [k for k in range(1, traj.n_steps)
            if is_failure(traj.steps[k].observation)
            and normalize(traj.steps[k].action) == normalize(traj.steps[k - 1].action)]


def failure_memory_ablation(lm, cfg, trajs: Sequence[Trajectory], per_episode: int = 1,
                            cache_dir: str | Path | None = None) -> list[dict]:
    """At repeated failures of written-action MemArbiter episodes: does what P_t says about the failure steer the
    command the agent writes?

    For each episode of run ``cfg`` (``decode="generate-verbatim"``) with a repeated failed command, at its first
    ``per_episode`` such steps, the policy is replayed along the episode's own history (the same items, bands and
    P_t as when it was played) and the agent writes its action again (greedy) from P_t as shown, with the
    Constraint and/or Episodic items left out (:data:`FAILURE_ABLATIONS`): the items that record the failure
    ("'X' does nothing in this situation; do not repeat it unchanged", "X: failed"), and with every item kept but
    the failed command written as :data:`UNQUOTED` wherever P_t quotes it (``unquoted``).

    Returns:
        One row per state: ``task_id``, ``step``, ``recorded`` (the command the run wrote), and per variant
        ``<variant>``: the command written, ``<variant>|repeats``: whether it is the failed one again, and
        ``<variant>|noop``: the variant changed nothing (P_t held none of the items left out, or never quoted the
        failed command): its prompt is the factual one.

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`; None keeps
    nothing), with the episode's actions: an episode played again differently is analysed again.
    """
    from dataclasses import replace

    tasks = {t.task_id: t for t in select_tasks(cfg)}
    cache = TaskCache(cache_dir, "failure_ablation", analysis_key(
        lm, memory=cfg.memory, budget=cfg.budget, ablation=cfg.ablation, decode=cfg.decode, split=cfg.split,
        per_episode=per_episode, variants={k: v if v is None else list(v) for k, v in FAILURE_ABLATIONS.items()},
        unquoted=UNQUOTED))
    agent = Agent.from_model(lm)

    def analyse(traj: Trajectory, steps: list[int]) -> list[dict]:
        mine: list[dict] = []
        for k, step, history, block in replay_at(policy_for(cfg), tasks[traj.task_id], traj, steps):
            failed = traj.steps[k - 1].action
            row = {"task_id": traj.task_id, "step": k, "recorded": step.action, "failed": failed}
            quoted = re.compile(re.escape(failed), re.I)
            for name, banks in FAILURE_ABLATIONS.items():
                if banks is None:
                    wm = tuple(replace(p, text=quoted.sub(UNQUOTED, p.text)) for p in block.working_memory)
                else:
                    wm = tuple(p for p in block.working_memory if p.bank not in banks)
                row[f"{name}|noop"] = name != "as shown" and wm == tuple(block.working_memory)
                prompt = agent.build_prompt(replace(block, working_memory=wm), traj.initial_observation,
                                            traj.goal, history, step.observation)
                action = generate_action(lm, list(prompt.tokens), [failed]).parsed
                row[name] = action
                row[f"{name}|repeats"] = normalize(action) == normalize(failed)
            mine.append(row)
        return mine

    return rows_per_episode(
        cache, trajs, lambda t: repeated_failures(t)[:per_episode] if t.task_id in tasks else [], analyse)


def summarize_failure_ablation(rows: Sequence[dict]) -> dict:
    """Per variant: the states, the share where the agent writes the failed command again, and the share where
    it writes another command than from P_t as shown (states whose P_t held none of the left-out items
    excluded from that variant)."""
    out = {}
    for name in FAILURE_ABLATIONS:
        rs = [r for r in rows if not r.get(f"{name}|noop")]
        out[name] = {"states": len(rs),
                     "repeats_failed": mean(r[f"{name}|repeats"] for r in rs) if rs else None,
                     "changed_vs_shown": mean(r[name] != r["as shown"] for r in rs) if rs else None}
    return out
