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

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.counterfactual import argmax
from workbench.eval.task_cache import admissible_along, replay_game, require_score
from workbench.memory.trajectory import Trajectory

from workbench.methods.arbiter.policy import ArbiterPolicy

__all__ = ["TRANSITIONS", "band_switch_effects", "summarize_band_switches", "FAILURE_ABLATIONS", "repeated_failures",
           "failure_memory_ablation", "summarize_failure_ablation", "UNQUOTED", "loop_steps", "loop_episodic_switch",
           "first_step_ablation", "summarize_first_step_ablation",
           "summarize_loop_switch"]

TRANSITIONS = {"F->A": ("F", "A"), "A->H": ("A", "H"), "H->F": ("H", "F")}


def _state_scorer(agent, traj: Trajectory, history, observation: str, cands: list[str]):
    """``score(block)``: the normalised probabilities over ``cands`` of the state after ``history``, with ``block``
    as its memory (the one prompt of every re-scored state here: only the block differs between factual and
    counterfactual)."""
    from workbench.models.scoring import ActionScorer

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
    from workbench.agents.policy import replay_at
    from workbench.training.layouts import task_of

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


# What P_t shows at a repeated failure, and what is left out of it in each variant (banks); ``unquoted`` (None)
# keeps every item but writes the failed command as UNQUOTED wherever P_t quotes it: does the memory make the agent
# repeat the failure by quoting it (a command in the prompt is a command to copy), or by what it says?
FAILURE_ABLATIONS = {"as shown": (), "no constraint": ("constraint",), "no episodic": ("episodic",),
                     "neither": ("constraint", "episodic"), "unquoted": None}
UNQUOTED = "the command that failed"


def repeated_failures(traj: Trajectory) -> list[int]:
    """Steps k whose action repeats step k-1's after the game answered step k-1 "Nothing happens."."""
    from workbench.envs.alfworld_text import is_failure, normalize

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

    from workbench.agents.loop import Agent
    from workbench.agents.policy import replay_at
    from workbench.envs.alfworld_text import normalize
    from workbench.eval.runner import policy_for, select_tasks
    from workbench.eval.task_cache import TaskCache, analysis_key, rows_per_episode
    from workbench.models.generation import generate_action

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


def loop_steps(traj: Trajectory) -> list[int]:
    """Steps k that complete an alternation A, B, A, B of two different actions (k-3 .. k): the agent is in a loop
    between two commands, not merely going back once."""
    from workbench.envs.alfworld_text import normalize

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
    Episodic item brought back focal (one counterfactual block, under the same budget).

    Returns:
        One row per state: ``task_id``, ``step``, ``recorded`` (the run's action), ``chosen`` (the factual arg-max
        of the replay; ``replayed_same``: it is the recorded one), ``loop`` (the two commands), ``switched`` (the
        Episodic items moved H -> F; empty: nothing hidden, ``noop``), and unless ``noop``: ``p`` / ``p_cf``
        (p(chosen) before / after), ``cf_choice``, ``flipped`` and ``leaves_loop`` (the counterfactual choice is
        neither command of the loop).

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`; None keeps
    nothing), with the episode's actions: an episode played again differently is analysed again.
    """
    from workbench.agents.loop import Agent
    from workbench.agents.policy import replay_at
    from workbench.envs.alfworld_text import normalize
    from workbench.eval.runner import policy_for, select_tasks
    from workbench.eval.task_cache import TaskCache, analysis_key, rows_per_episode

    require_score(cfg, "loop_episodic_switch")
    tasks = {t.task_id: t for t in select_tasks(cfg)}
    cache = TaskCache(cache_dir, "loop_switch", analysis_key(
        lm, memory=cfg.memory, budget=cfg.budget, ablation=cfg.ablation, decode=cfg.decode, split=cfg.split,
        per_episode=per_episode))
    agent = Agent.from_model(lm)

    def analyse(traj: Trajectory, steps: list[int]) -> list[dict]:
        actions = traj.actions()
        admissible = admissible_along(game(), tasks[traj.task_id], actions[:max(steps)])
        policy = policy_for(cfg)
        mine: list[dict] = []
        for k, step, history, block in replay_at(policy, tasks[traj.task_id], traj, steps):
            cands = admissible[k]
            score = _state_scorer(agent, traj, history, step.observation, cands)
            probs = score(block)
            best = argmax(probs)
            live = policy.step_item_ids
            hidden = sorted(r[0] for r in block.record["arbiter"]["items"]
                            if r[0] in live and r[1] == "episodic" and r[3] == "H")
            loop = [actions[k - 1], actions[k]]
            row = {"task_id": traj.task_id, "step": k, "recorded": step.action, "chosen": cands[best],
                   "replayed_same": normalize(cands[best]) == normalize(step.action), "loop": loop,
                   "switched": hidden}
            cf_block = policy.counterfactual({i: "F" for i in hidden}) if hidden else block
            row["noop"] = cf_block.working_memory == block.working_memory
            if not row["noop"]:
                cf = score(cf_block)
                alt = argmax(cf)
                row.update(p=round(probs[best], 6), p_cf=round(cf[best], 6), cf_choice=cands[alt],
                           flipped=alt != best, leaves_loop=normalize(cands[alt]) not in {normalize(a) for a in loop})
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


def _first_step_variants(block) -> dict:
    """The step-0 blocks :func:`first_step_ablation` scores: P_t as shown, without each bank it shows (the
    bank's header and items), with no item (the working-memory layout alone: goal, an empty block, the
    observation) and the ReAct prompt (no working memory, no history: the action agent alone's step 0)."""
    from dataclasses import replace

    from workbench.agents.policy import MemoryBlock

    wm = tuple(block.working_memory)
    banks = list(dict.fromkeys(p.bank for p in wm if p.kind == "wm_item" and p.bank))
    out = {"as shown": block}
    for b in banks:
        out[f"no {b}"] = replace(block, working_memory=tuple(p for p in wm if p.bank != b))
    out["no items"] = replace(block, working_memory=tuple(p for p in wm if p.kind in ("wm_open", "wm_close")))
    out["react"] = MemoryBlock()
    return out


def first_step_ablation(lm, cfg, trajs: Sequence[Trajectory], reference: Sequence[Trajectory],
                        cache_dir: str | Path | None = None) -> list[dict]:
    """Where a working-memory run and the action agent alone part at the very first step, which piece of the
    step-0 prompt makes the difference?

    At step 0 the block holds only what the goal and the first observation give (no history to arbitrate), so
    a first action that differs from the reference run's (``reference``: the action agent alone's episodes of
    the same tasks) comes from the layout or from those first items. For each episode of run ``cfg``
    (``decode="score"``) whose first action differs from the reference's on its task, the policy is replayed to
    step 0 and the state is scored over its admissible commands with each of :func:`_first_step_variants`.

    Returns:
        One row per such episode: ``task_id``, ``task_type``, ``success``, ``recorded`` (the run's first action),
        ``react_first`` (the reference's), and per variant ``<variant>``: the arg-max command.

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`), with the
    episode's actions; ``react_first`` is read from ``reference`` each time.
    """
    from workbench.agents.loop import Agent
    from workbench.agents.policy import replay_at
    from workbench.eval.runner import policy_for, select_tasks
    from workbench.eval.task_cache import TaskCache, analysis_key, rows_per_episode

    require_score(cfg, "first_step_ablation")
    tasks = {t.task_id: t for t in select_tasks(cfg)}
    react_first = {t.task_id: t.steps[0].action for t in reference if t.steps}
    cache = TaskCache(cache_dir, "first_step", analysis_key(
        lm, memory=cfg.memory, budget=cfg.budget, ablation=cfg.ablation, decode=cfg.decode, split=cfg.split))
    agent = Agent.from_model(lm)

    def analyse(traj: Trajectory, steps: list[int]) -> list[dict]:
        cands = admissible_along(game(), tasks[traj.task_id], [])[0]
        mine: list[dict] = []
        for k, step, history, block in replay_at(policy_for(cfg), tasks[traj.task_id], traj, steps):
            score = _state_scorer(agent, traj, history, step.observation, cands)
            row = {"task_id": traj.task_id, "task_type": traj.task_type, "success": traj.success,
                   "recorded": step.action}
            for name, variant in _first_step_variants(block).items():
                row[name] = cands[argmax(score(variant))]
            mine.append(row)
        return mine

    def pick(traj: Trajectory) -> list[int]:
        first = react_first.get(traj.task_id)
        return [0] if traj.steps and traj.task_id in tasks and first and first != traj.steps[0].action else []

    with replay_game(cfg) as game:
        rows = rows_per_episode(cache, trajs, pick, analyse)
    return [{**r, "react_first": react_first[r["task_id"]]} for r in rows]


def summarize_first_step_ablation(rows: Sequence[dict]):
    """Per variant (rows: ``all`` and the run's wins among the states): the states where the variant exists,
    the share whose arg-max is the run's recorded first action (``keeps``: the replay reproduces it where the
    variant is ``as shown``) and the share whose arg-max is the action agent alone's first action
    (``reverts``). A DataFrame indexed by variant."""
    import pandas as pd

    names = list(dict.fromkeys(k for r in rows for k in r
                               if k not in ("task_id", "task_type", "success", "recorded", "react_first")))
    out = {}
    for name in names:
        for subset, rs in (("all", rows), ("won", [r for r in rows if r["success"]])):
            rs = [r for r in rs if name in r]
            out[(name, subset)] = {
                "states": len(rs),
                "keeps": mean(r[name] == r["recorded"] for r in rs) if rs else None,
                "reverts": mean(r[name] == r["react_first"] for r in rs) if rs else None}
    df = pd.DataFrame.from_dict(out, orient="index")
    df.index = [f"{n}|{s}" for n, s in df.index]
    return df
