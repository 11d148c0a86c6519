"""Where a working-memory run's first action differs from the action agent alone's: score step 0 without each piece."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.edits import ClearMemory, DropBank, Edit, ShowOnly
from workbench.agents.loop import Agent
from workbench.agents.rescore import State, rescore_many, states_at
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

__all__ = ["first_step_edits", "first_step_ablation", "summarize_first_step_ablation"]


def first_step_edits(state: State) -> dict[str, list[Edit]]:
    """The step-0 edit sets :func:`first_step_ablation` scores: P_t as shown, without each bank it shows (the
    bank's header and items), with no item (the working-memory layout alone: goal, an empty block, the
    observation) and the ReAct prompt (no working memory, no history: the action agent alone's step 0)."""
    return {"as shown": [], **{f"no {b}": [DropBank(b)] for b in state.banks}, "no items": [ShowOnly(())],
            "react": [ClearMemory()]}


def first_step_ablation(lm, cfg, trajs: Sequence[Trajectory], reference: Sequence[Trajectory],
                        cache_dir: str | Path | None = None) -> list[dict]:
    """Where a working-memory run and the action agent alone part at the very first step, which piece of the
    step-0 prompt makes the difference?

    At step 0 the block holds only what the goal and the first observation give (no history to arbitrate), so
    a first action that differs from the reference run's (``reference``: the action agent alone's episodes of
    the same tasks) comes from the layout or from those first items. For each episode of run ``cfg``
    (``decode="score"``) whose first action differs from the reference's on its task, the policy is replayed to
    step 0 and the state is scored over its admissible commands with each of :func:`first_step_edits`
    (:func:`~workbench.agents.rescore.rescore_many`, through the agent's cached prefix as the tables were made).

    Returns:
        One row per such episode: ``task_id``, ``task_type``, ``success``, ``recorded`` (the run's first action),
        ``react_first`` (the reference's), and per variant ``<variant>``: the arg-max command.

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`), with the
    episode's actions; ``react_first`` is read from ``reference`` each time.
    """
    require_score(cfg, "first_step_ablation")
    tasks = {t.task_id: t for t in select_tasks(cfg)}
    react_first = {t.task_id: t.steps[0].action for t in reference if t.steps}
    cache = TaskCache(cache_dir, "first_step", analysis_key(
        lm, memory=cfg.memory, budget=cfg.budget, ablation=cfg.ablation, decode=cfg.decode, split=cfg.split))
    agent = Agent.from_model(lm)

    def analyse(traj: Trajectory, steps: list[int]) -> list[dict]:
        cands = admissible_along(game(), tasks[traj.task_id], [])[0]
        mine: list[dict] = []
        for state in states_at(policy_for(cfg), tasks[traj.task_id], traj, steps, {0: cands}):
            row = {"task_id": traj.task_id, "task_type": traj.task_type, "success": traj.success,
                   "recorded": state.action}
            for name, r in rescore_many(agent, state, first_step_edits(state), reuse_prefix=True).items():
                row[name] = r.edited_command
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
