"""Does the arbitration steer the choice? Switch one item's band at a recorded state and re-score (beyond the
paper: its limitation 3 asks for exactly this controlled intervention).

For a trajectory (any run's, or an expert's), the MemArbiter policy is replayed step by step as teacher forcing
replays it — the same items, bands and prompts as when it was played (:func:`~workbench.agents.rescore.states_at`).
At each chosen step, for each item in the source band of a transition, one edit set moves only that item
(``SetBand``: ``F->A``: shown ambient; ``A->H``: left out; ``H->F``: brought back focal) and the policy
re-assembles the block under the same budget; the state is scored as played and under each edit set
(:func:`~workbench.agents.rescore.rescore_many`, through the agent's cached prefix as the tables were made):

    delta_p  = p_cf(chosen) - p(chosen)        chosen = the factual arg-max
    flipped  = arg-max of the counterfactual scores != chosen

A transition whose re-assembled prompt is the factual one (the budget would not fit the change) is recorded as
``noop`` and not scored. Averages by bank and transition: :func:`summarize_band_switches`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.edits import SetBand
from workbench.agents.loop import Agent
from workbench.agents.rescore import State, rescore_many, states_at
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.task_cache import TaskCache, analysis_key
from workbench.memory.trajectory import Trajectory
from workbench.methods.arbiter.policy import ArbiterPolicy
from workbench.training.layouts import task_of

__all__ = ["TRANSITIONS", "band_switch_edits", "band_switch_effects", "summarize_band_switches", "band_switches"]


TRANSITIONS = {"F->A": ("F", "A"), "A->H": ("A", "H"), "H->F": ("H", "F")}


def _item_rows(state: State) -> dict[str, list]:
    """id -> the policy's record row of each item at ``state``: ``[id, bank, gate band, shown band, eta,
    transition]``."""
    return {r[0]: r for r in state.block.record["arbiter"]["items"]}


def band_switch_edits(state: State, per_transition: int) -> dict[tuple[str, str], list[SetBand]]:
    """``(transition, item) -> [SetBand(item, target band)]`` at ``state``: for each transition, the active items in
    its source band, at most ``per_transition`` of them, highest eta first."""
    live = state.policy.step_item_ids
    rows = _item_rows(state)
    bands = {i: r[3] for i, r in rows.items() if i in live}
    etas = {i: r[4] for i, r in rows.items()}
    return {(name, item): [SetBand(item, dst)] for name, (src, dst) in TRANSITIONS.items()
            for item in sorted((i for i, b in bands.items() if b == src), key=lambda i: -etas[i])[:per_transition]}


def band_switch_effects(agent, policy: ArbiterPolicy, traj: Trajectory, admissible: Sequence[Sequence[str]],
                        steps: Sequence[int] | None = None, per_transition: int = 4) -> list[dict]:
    """One row per (step, item, transition) of the module docstring.

    Args:
        agent (Agent): the white-box :class:`~workbench.agents.loop.Agent` that scores.
        policy: a MemArbiter policy (any variant), replayed from the start of ``traj``.
        admissible: the commands admissible before each step (an expert's ``meta["admissible"]``, or a rollout's
            records); a step with none is skipped.
        steps: which steps to intervene at (default: all).
        per_transition: at most this many items per transition and step (highest eta first).
    """
    rows: list[dict] = []
    agent.scorer.reset()  # one cached prefix per episode, carried from state to state (reuse_prefix)
    wanted = [k for k in (range(traj.n_steps) if steps is None else steps) if admissible[k]]
    for state in states_at(policy, task_of(traj), traj, wanted, admissible):
        items = _item_rows(state)
        edits = band_switch_edits(state, per_transition)
        scored = rescore_many(agent, state, {f"{t} {i}": e for (t, i), e in edits.items()}, reuse_prefix=True)
        for (name, item_id), r in zip(edits, scored.values()):
            row = {"task_id": traj.task_id, "step": state.step, "item": item_id, "bank": items[item_id][1],
                   "transition": name, "eta": items[item_id][4], "chosen": r.choice}
            if r.noop:
                rows.append(row | {"noop": True})
                continue
            rows.append(row | {"noop": False, "p": round(r.p_chosen, 6), "p_cf": round(r.p_chosen_edited, 6),
                               "delta_p": round(r.delta_p, 6), "flipped": r.flipped})
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
    """Beyond the paper (b): the band-switch re-scores (:func:`band_switch_effects`)
    along the expert trajectories of ``tasks``, at ``steps_per_task`` evenly spread steps of each (each task's rows
    kept in ``cache_dir`` as it finishes; None keeps nothing)."""
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
