"""At every loop warning: score the state as played, without the bank facts, unnamed, with a placebo, without the line."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.counterfactual import is_warning, mentioned_commands
from workbench.agents.counterfactual import named_commands as named
from workbench.agents.edits import (
    Edit,
    PlaceboReminder,
    RemoveReminder,
    ReplaceReminder,
)
from workbench.agents.loop import Agent
from workbench.agents.rescore import State, rescore_many, states_at
from workbench.envs.alfworld_text import normalize
from workbench.eval.compare import mcnemar_exact
from workbench.eval.config import policy_for, select_tasks
from workbench.eval.task_cache import (
    admissible_along,
    replay_game,
    require_score,
    rows_per_episode,
)
from workbench.studies.reminder_quote import _reminder_cache

__all__ = ["WARNING_ABLATIONS", "UNNAMED", "warning_edits", "warning_pull_ablation", "summarize_warning_pull"]


#: What :func:`warning_pull_ablation` scores at each warning state.
WARNING_ABLATIONS = ("as played", "no memory", "unnamed", "placebo", "without")


#: The words that stand for each command a warning names in its ``unnamed`` variant.
UNNAMED = "an earlier command"


#: The bank facts the offline memory agent appends to a reminder ("... Memory: mug 1 is in/on desk 1.").
_MEMORY_FACTS = r"\s*Memory: .*$"


def _warned(reminder: str, cands: Sequence[str]) -> list[str]:
    """The admissible commands ``reminder`` warns against (none unless it is a warning)."""
    return named(reminder, mentioned_commands(reminder, cands)) if is_warning(reminder) else []


def _reminder(text: str) -> Edit:
    return ReplaceReminder(text) if text else RemoveReminder()  # an emptied line is no line


def warning_edits(state: State, warned: Sequence[str]) -> dict[str, list[Edit]]:
    """The edit sets of :data:`WARNING_ABLATIONS` at a state whose reminder warns against ``warned`` (``no memory``
    only where the reminder carries bank facts)."""
    reminder = state.block.reminder or ""
    bare = re.sub(_MEMORY_FACTS, "", reminder)
    unnamed = reminder
    for c in sorted(warned, key=len, reverse=True):
        unnamed = re.sub(r"(['\"]?)" + re.escape(c) + r"\1", UNNAMED, unnamed, flags=re.I)
    sets = {"as played": [], "no memory": [_reminder(bare)], "unnamed": [_reminder(unnamed)],
            "placebo": [PlaceboReminder()], "without": [RemoveReminder()]}
    if bare == reminder:
        del sets["no memory"]
    return sets


def warning_pull_ablation(lm, cfg, trajs: Sequence, cache_dir: str | Path | None = None) -> list[dict]:
    """A scoring agent never fails a command, so the memory agent's warnings are loop warnings that name the
    loop's commands ("Stop repeating: you are cycling through 'go to shelf 1' -> 'go to desk 1'. ..."), and the
    recorded counterfactual shows the agent choosing one of them with the warning where it would not without it
    far more often than the reverse. Does the warning pull the agent onto what it warns against, and is that the
    commands it names, a line being there at all, or the bank facts the offline memory agent appends?

    At every reminder step of scoring run ``cfg`` (``decode="score"``) whose reminder warns against an admissible
    command (:func:`~workbench.agents.counterfactual.named_commands` of a warning), the game is replayed along
    the episode for the step's admissible commands, the memory agent is replayed to the same reminder, and the
    state is scored with each of :data:`WARNING_ABLATIONS`: as played; ``no memory``, the reminder without its
    trailing bank facts (``Memory: ...``; the advisor ablation's reminder; only where it has them); ``unnamed``,
    each command it names written as :data:`UNNAMED`; ``placebo``, its words replaced token for token by
    :data:`~workbench.agents.edits.PLACEBO_TEXT` (``PlaceboReminder``); ``without``, no reminder line
    (:func:`warning_edits`, scored by :func:`~workbench.agents.rescore.rescore_many` through the agent's cached
    prefix as the tables were made).

    Returns:
        One row per state: ``task_id``, ``step``, ``recorded`` (the run's action), ``reminder``, ``warned`` (the
        commands it names), ``has_memory``, ``replayed_same`` (the replay gives the reminder played and, as
        played, chooses the recorded action), and per variant (None where it does not apply) the choice,
        ``<variant>|warned`` (it is a warned command) and ``<variant>|p_warned`` (their total probability).

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`).
    """
    require_score(cfg, "warning_pull_ablation")
    tasks = {t.task_id: t for t in select_tasks(cfg)}
    cache = _reminder_cache(cache_dir, "warning_pull", lm, cfg, variants=list(WARNING_ABLATIONS), unnamed=UNNAMED)
    agent = Agent.from_model(lm)

    def pick(traj) -> list[int]:
        if traj.task_id not in tasks:
            return []
        recs = traj.meta.get("steps", [])
        return [k for k, rec in enumerate(recs) if rec.get("reminder")
                and _warned(rec["reminder"], (rec.get("reminder_effect") or {}).get("mentions", ()))]

    def analyse(traj, steps: list[int]) -> list[dict]:
        admissible = admissible_along(game(), tasks[traj.task_id], traj.actions()[:max(steps)])
        mine: list[dict] = []
        for state in states_at(policy_for(cfg), tasks[traj.task_id], traj, steps, admissible):
            cands, reminder = list(state.candidates), state.block.reminder or ""
            warned = _warned(reminder, cands)
            warned_n = {normalize(c) for c in warned}
            sets = warning_edits(state, warned)
            row = {"task_id": traj.task_id, "step": state.step, "recorded": state.action, "reminder": reminder,
                   "warned": warned, "has_memory": "no memory" in sets}
            scored = rescore_many(agent, state, sets, reuse_prefix=True) if warned else {}
            for name in WARNING_ABLATIONS:
                if name not in scored:
                    row[name] = row[f"{name}|warned"] = row[f"{name}|p_warned"] = None
                    continue
                r = scored[name]
                row[name] = r.edited_command
                row[f"{name}|warned"] = normalize(r.edited_command) in warned_n
                row[f"{name}|p_warned"] = round(sum(p for c, p in zip(cands, r.p_edited) if normalize(c) in warned_n),
                                                6)
            row["replayed_same"] = (reminder == traj.meta["steps"][state.step].get("reminder")
                                    and row["as played"] is not None
                                    and normalize(row["as played"]) == normalize(state.action))
            mine.append(row)
        return mine

    with replay_game(cfg) as game:
        return rows_per_episode(cache, trajs, pick, analyse)


def summarize_warning_pull(rows: Sequence[dict]):
    """Per variant of :data:`WARNING_ABLATIONS` over the states it applies to (``no memory``: those whose
    reminder carries bank facts): the states and their episodes, the share where the agent chooses a warned
    command, their mean total probability, and against ``without`` at the same states: ``pulled`` (this variant
    chooses a warned command, without the line it would not), ``pushed`` (the reverse) and the exact McNemar p of
    the two. A DataFrame indexed by variant; ``attrs["replayed_same"]`` counts the reproduced states."""
    import pandas as pd

    rows = [r for r in rows if r.get("as played") is not None]
    out = {}
    for name in WARNING_ABLATIONS:
        rs = [r for r in rows if r.get(name) is not None]
        pulled = sum(r[f"{name}|warned"] and not r["without|warned"] for r in rs)
        pushed = sum(r["without|warned"] and not r[f"{name}|warned"] for r in rs)
        out[name] = {"states": len(rs), "episodes": len({r["task_id"] for r in rs}),
                     "chooses a warned command": mean(r[f"{name}|warned"] for r in rs) if rs else None,
                     "mean p(warned)": mean(r[f"{name}|p_warned"] for r in rs) if rs else None,
                     "pulled vs without": pulled, "pushed vs without": pushed,
                     "p_mcnemar": mcnemar_exact(pulled, pushed) if name != "without" else None}
    df = pd.DataFrame.from_dict(out, orient="index")
    df.attrs["replayed_same"] = sum(r["replayed_same"] for r in rows)
    return df
