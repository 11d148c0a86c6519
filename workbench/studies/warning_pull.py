"""At every loop warning: score the state as played, without the bank facts, unnamed, with a placebo, without the line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.counterfactual import argmax, is_warning, mentioned_commands
from workbench.agents.counterfactual import named_commands as named
from workbench.agents.loop import Agent
from workbench.agents.policy import replay_at
from workbench.envs.alfworld_text import normalize
from workbench.eval.compare import mcnemar_exact
from workbench.eval.config import policy_for, select_tasks
from workbench.eval.task_cache import (
    admissible_along,
    replay_game,
    require_score,
    rows_per_episode,
)
from workbench.models.scoring import ActionScorer
from workbench.studies.reminder_attention import placebo_prompt
from workbench.studies.reminder_quote import _reminder_cache

__all__ = ["WARNING_ABLATIONS", "UNNAMED", "warning_pull_ablation", "summarize_warning_pull"]


#: What :func:`warning_pull_ablation` scores at each warning state.
WARNING_ABLATIONS = ("as played", "no memory", "unnamed", "placebo", "without")


#: The words that stand for each command a warning names in its ``unnamed`` variant.
UNNAMED = "an earlier command"


#: The bank facts the offline memory agent appends to a reminder ("... Memory: mug 1 is in/on desk 1.").
_MEMORY_FACTS = r"\s*Memory: .*$"


def _warned(reminder: str, cands: Sequence[str]) -> list[str]:
    """The admissible commands ``reminder`` warns against (none unless it is a warning)."""
    return named(reminder, mentioned_commands(reminder, cands)) if is_warning(reminder) else []


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
    :data:`PLACEBO_TEXT` (:func:`placebo_prompt`); ``without``, no reminder line.

    Returns:
        One row per state: ``task_id``, ``step``, ``recorded`` (the run's action), ``reminder``, ``warned`` (the
        commands it names), ``has_memory``, ``replayed_same`` (the replay gives the reminder played and, as
        played, chooses the recorded action), and per variant (None where it does not apply) the choice,
        ``<variant>|warned`` (it is a warned command) and ``<variant>|p_warned`` (their total probability).

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`).
    """
    import re
    from dataclasses import replace

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
        for k, step, history, block in replay_at(policy_for(cfg), tasks[traj.task_id], traj, steps):
            cands, reminder = admissible[k], block.reminder or ""
            warned = _warned(reminder, cands)
            warned_n = {normalize(c) for c in warned}

            def with_reminder(text: str | None):  # the state's prompt with this reminder line (None: none)
                return agent.build_prompt(replace(block, reminder=text), traj.initial_observation, traj.goal,
                                          history, step.observation)

            shown = with_reminder(reminder)
            bare = re.sub(_MEMORY_FACTS, "", reminder)
            unnamed = reminder
            for c in sorted(warned, key=len, reverse=True):
                unnamed = re.sub(r"(['\"]?)" + re.escape(c) + r"\1", UNNAMED, unnamed, flags=re.I)
            prompts = {"as played": shown, "no memory": with_reminder(bare) if bare != reminder else None,
                       "unnamed": with_reminder(unnamed), "placebo": placebo_prompt(shown, lm.tokenizer),
                       "without": with_reminder(None)}
            row = {"task_id": traj.task_id, "step": k, "recorded": step.action, "reminder": reminder,
                   "warned": warned, "has_memory": bare != reminder}
            for name, prompt in prompts.items():
                if prompt is None or not warned:
                    row[name] = row[f"{name}|warned"] = row[f"{name}|p_warned"] = None
                    continue
                probs = ActionScorer.normalise(agent.decide(prompt, cands).scores)
                choice = cands[argmax(probs)]
                row[name] = choice
                row[f"{name}|warned"] = normalize(choice) in warned_n
                row[f"{name}|p_warned"] = round(sum(p for c, p in zip(cands, probs) if normalize(c) in warned_n), 6)
            row["replayed_same"] = (reminder == traj.meta["steps"][k].get("reminder") and row["as played"] is not None
                                    and normalize(row["as played"]) == normalize(step.action))
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
