"""At loop states of a MemArbiter run, re-score without the episodic item that shows the loop."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.edits import SetBand
from workbench.agents.loop import Agent
from workbench.agents.rescore import rescore, states_at
from workbench.envs.alfworld_text import normalize
from workbench.eval.config import policy_for, select_tasks
from workbench.eval.task_cache import (
    TaskCache,
    admissible_along,
    analysis_key,
    replay_game,
    require_score,
    rows_per_episode,
)
from workbench.memory.trajectory import Trajectory

__all__ = ["loop_steps", "loop_episodic_switch", "summarize_loop_switch"]


def loop_steps(traj: Trajectory) -> list[int]:
    """Steps k that complete an alternation A, B, A, B of two different actions (k-3 .. k): the agent is in a loop
    between two commands, not merely going back once."""
    acts = [normalize(a) for a in traj.actions()]
    return [k for k in range(3, len(acts)) if acts[k] == acts[k - 2] != acts[k - 1] == acts[k - 3]]


def loop_episodic_switch(lm, cfg, trajs: Sequence[Trajectory], per_episode: int = 1,
                         cache_dir: str | Path | None = None) -> list[dict]:
    """Where MemArbiter loops: would showing what its Episodic bank records about the loop break it?

    A scoring agent never fails a command, so its failed episodes end in loops between two commands, and the
    Episodic bank records them (one event per command, merged over its repeats: "Steps 1, 3, 5: 'go to desk 2'
    -> ..."). Its demand reads failed commands and the events' relevance to the subgoal, so the gate may hide
    them. For each failed episode of run ``cfg`` (``decode="score"``), at its first ``per_episode``
    :func:`loop_steps`, the game is replayed along the episode to the step for its admissible commands, the
    policy is replayed to the same state, and the state is scored with P_t as shown and again with every hidden
    Episodic item brought back focal (one edit set of ``SetBand(item, "F")``: one block, under the same budget;
    :func:`~workbench.agents.rescore.rescore`, through the agent's cached prefix as the tables were made).

    Returns:
        One row per state: ``task_id``, ``step``, ``recorded`` (the run's action), ``chosen`` (the factual arg-max
        of the replay; ``replayed_same``: it is the recorded one), ``loop`` (the two commands), ``switched`` (the
        Episodic items moved H -> F; empty: nothing hidden, ``noop``), and unless ``noop``: ``p`` / ``p_cf``
        (p(chosen) before / after), ``cf_choice``, ``flipped`` and ``leaves_loop`` (the counterfactual choice is
        neither command of the loop).

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`; None keeps
    nothing), with the episode's actions: an episode played again differently is analysed again.
    """
    require_score(cfg, "loop_episodic_switch")
    tasks = {t.task_id: t for t in select_tasks(cfg)}
    cache = TaskCache(cache_dir, "loop_switch", analysis_key(
        lm, memory=cfg.memory, budget=cfg.budget, ablation=cfg.ablation, decode=cfg.decode, split=cfg.split,
        per_episode=per_episode))
    agent = Agent.from_model(lm)

    def analyse(traj: Trajectory, steps: list[int]) -> list[dict]:
        actions = traj.actions()
        admissible = admissible_along(game(), tasks[traj.task_id], actions[:max(steps)])
        mine: list[dict] = []
        for state in states_at(policy_for(cfg), tasks[traj.task_id], traj, steps, admissible):
            k = state.step
            live = state.policy.step_item_ids
            hidden = sorted(r[0] for r in state.block.record["arbiter"]["items"]
                            if r[0] in live and r[1] == "episodic" and r[3] == "H")
            r = rescore(agent, state, [SetBand(i, "F") for i in hidden], reuse_prefix=True)  # none hidden: a noop
            loop = [actions[k - 1], actions[k]]
            row = {"task_id": traj.task_id, "step": k, "recorded": state.action, "chosen": r.choice,
                   "replayed_same": normalize(r.choice) == normalize(state.action), "loop": loop,
                   "switched": hidden, "noop": r.noop}
            if not r.noop:
                row.update(p=round(r.p_chosen, 6), p_cf=round(r.p_chosen_edited, 6), cf_choice=r.edited_command,
                           flipped=r.flipped,
                           leaves_loop=normalize(r.edited_command) not in {normalize(a) for a in loop})
            mine.append(row)
        return mine

    def pick(traj: Trajectory) -> list[int]:
        return [] if traj.success or traj.task_id not in tasks else loop_steps(traj)[:per_episode]

    with replay_game(cfg) as game:
        return rows_per_episode(cache, trajs, pick, analyse)


def summarize_loop_switch(rows: Sequence[dict]) -> dict:
    """The loop states, how many the replay reproduced, how many had hidden Episodic items to show, and over
    those: mean p(chosen) before and after, the share whose choice flipped and the share that left the loop."""
    scored = [r for r in rows if not r["noop"]]
    return {"states": len(rows), "replayed_same": sum(r["replayed_same"] for r in rows),
            "with_hidden_episodic": len(scored),
            "p_chosen": mean(r["p"] for r in scored) if scored else None,
            "p_chosen_shown": mean(r["p_cf"] for r in scored) if scored else None,
            "flipped": mean(r["flipped"] for r in scored) if scored else None,
            "leaves_loop": mean(r["leaves_loop"] for r in scored) if scored else None}
