"""Does the arbitration steer the choice? Switch one item's band at a recorded state and re-score (beyond the
paper: its limitation 3 asks for exactly this controlled intervention).

For a trajectory (any run's, or an expert's), the MemArbiter policy is replayed step by step as teacher forcing
replays it — the same items, bands and prompts as when it was played. At each chosen step the factual prompt is
scored over the step's admissible commands; then, for each item in the source band of a transition, the block is
reassembled with only that item moved (``F->A``: shown ambient; ``A->H``: left out; ``H->F``: brought back
focal), under the same budget, and the same state is scored again:

    delta_p  = p_cf(chosen) - p(chosen)        chosen = the factual arg-max
    flipped  = arg-max of the counterfactual scores != chosen

A transition whose reassembled block is identical to the factual one (the budget would not fit the change) is
recorded as ``noop`` and not scored. Averages by bank and transition: :func:`summarize_band_switches`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.counterfactual import argmax
from workbench.agents.loop import Agent
from workbench.agents.policy import replay_at
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.task_cache import TaskCache, analysis_key
from workbench.memory.trajectory import Trajectory
from workbench.methods.arbiter.policy import ArbiterPolicy
from workbench.models.scoring import ActionScorer
from workbench.training.layouts import task_of

__all__ = ["TRANSITIONS", "band_switch_effects", "summarize_band_switches", "band_switches"]


TRANSITIONS = {"F->A": ("F", "A"), "A->H": ("A", "H"), "H->F": ("H", "F")}


def _state_scorer(agent, traj: Trajectory, history, observation: str, cands: list[str]):
    """``score(block)``: the normalised probabilities over ``cands`` of the state after ``history``, with ``block``
    as its memory (the one prompt of every re-scored state here: only the block differs between factual and
    counterfactual)."""
    def score(block) -> list[float]:
        prompt = agent.build_prompt(block, traj.initial_observation, traj.goal, history, observation)
        return ActionScorer.normalise(agent.decide(prompt, cands).scores)
    return score


def band_switch_effects(agent, policy: ArbiterPolicy, traj: Trajectory, admissible: Sequence[Sequence[str]],
                        steps: Sequence[int] | None = None, per_transition: int = 4) -> list[dict]:
    """One row per (step, item, transition) of the module docstring.

    Args:
        agent: the white-box :class:`~workbench.agents.loop.Agent` that scores.
        policy: a MemArbiter policy (any variant), replayed from the start of ``traj``.
        admissible: the commands admissible before each step (an expert's ``meta["admissible"]``, or a rollout's
            records).
        steps: which steps to intervene at (default: all).
        per_transition: at most this many items per transition and step (highest eta first).
    """
    rows: list[dict] = []
    agent.scorer.reset()
    for k, step, hist, block in replay_at(policy, task_of(traj), traj, range(traj.n_steps) if steps is None else steps):
        if admissible[k]:
            cands = list(admissible[k])
            score = _state_scorer(agent, traj, hist, step.observation, cands)
            probs = score(block)
            best = argmax(probs)
            live = policy.step_item_ids
            bands = {r[0]: (r[1], r[3]) for r in block.record["arbiter"]["items"] if r[0] in live}  # id -> (bank, shown)
            etas = {r[0]: r[4] for r in block.record["arbiter"]["items"]}
            for name, (src, dst) in TRANSITIONS.items():
                ids = sorted((i for i, (_, b) in bands.items() if b == src), key=lambda i: -etas[i])[:per_transition]
                for item_id in ids:
                    cf_block = policy.counterfactual({item_id: dst})
                    row = {"task_id": traj.task_id, "step": k, "item": item_id, "bank": bands[item_id][0],
                           "transition": name, "eta": etas[item_id], "chosen": cands[best]}
                    if cf_block.working_memory == block.working_memory:
                        rows.append(row | {"noop": True})
                        continue
                    cf = score(cf_block)
                    rows.append(row | {"noop": False, "p": round(probs[best], 6), "p_cf": round(cf[best], 6),
                                       "delta_p": round(cf[best] - probs[best], 6), "flipped": argmax(cf) != best})
    return rows


def summarize_band_switches(rows: Sequence[dict]) -> dict:
    """Mean delta_p, share flipped and count, by (bank, transition) and by transition."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if not r.get("noop"):
            groups[(r["bank"], r["transition"])].append(r)
            groups[("all", r["transition"])].append(r)
    return {f"{b}|{t}": {"n": len(rs), "mean_delta_p": mean(r["delta_p"] for r in rs),
                         "flipped": mean(r["flipped"] for r in rs)} for (b, t), rs in sorted(groups.items())}


def band_switches(lm, split: str, tasks: str, budget: int = 500, per_transition: int = 2,
                  steps_per_task: int = 6, cache_dir: str | Path | None = None) -> list[dict]:
    """Beyond the paper (b): the band-switch re-scores (:func:`~workbench.methods.arbiter.causal.band_switch_effects`)
    along the expert trajectories of ``tasks``, at ``steps_per_task`` evenly spread steps of each (each task's rows
    kept in ``cache_dir`` as it finishes; None keeps nothing)."""
    pass
    cache = TaskCache(cache_dir, "band_switches", analysis_key(lm, split=split, budget=budget,
                                                                per_transition=per_transition,
                                                                steps_per_task=steps_per_task))
    wanted = {t.task_id for t in select_tasks(RunConfig(out="-", split=split, tasks=tasks, memory="none"))}
    agent = None
    rows: list[dict] = []
    for expert in expert_trajectories_for(split):
        if expert.task_id not in wanted:
            continue
        if (done := cache.get(expert.task_id)) is None:
            agent = agent or Agent.from_model(lm)
            n = expert.n_steps
            at = sorted({round(i * (n - 1) / max(steps_per_task - 1, 1)) for i in range(min(steps_per_task, n))})
            done = band_switch_effects(agent, ArbiterPolicy(budget=budget), expert, expert.meta["admissible"],
                                       steps=at, per_transition=per_transition)
            cache.put(expert.task_id, done)
        rows += done
    return rows
