"""At reminder steps after a failed command: write the action again as played, unquoted, with a placebo, without."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.agents.edits import PLACEBO_TEXT, EditError, PlaceboReminder
from workbench.agents.loop import Agent
from workbench.agents.policy import replay_at
from workbench.envs.alfworld_text import normalize
from workbench.eval.behaviour import failures
from workbench.eval.config import policy_for, select_tasks
from workbench.eval.task_cache import TaskCache, analysis_key, rows_per_episode
from workbench.models.generation import PrefixGenerator
from workbench.methods.proactive import LEGACY_WINDOW, WINDOW
from workbench.studies.failure_ablation import UNQUOTED

__all__ = ["REMINDER_ABLATIONS", "reminder_quote_ablation", "summarize_reminder_quote", "window_key"]


#: How the reminder at a state after a failed command is shown in :func:`reminder_quote_ablation`.
REMINDER_ABLATIONS = ("as played", "unquoted", "placebo", "without")


def _reminder_cache(cache_dir, name: str, lm, cfg, **params):
    """The per-episode cache of a reminder ablation of run ``cfg``: keyed on the model and everything of the run
    that decides its reminders, plus ``params``."""
    return TaskCache(cache_dir, name, analysis_key(
        lm, memory=cfg.memory, decode=cfg.decode, split=cfg.split, interval=cfg.interval,
        triggers=list(cfg.triggers), backend=cfg.backend, placebo=PLACEBO_TEXT, **window_key(cfg.window), **params))


def window_key(window: int | None) -> dict:
    """The memory agent's window as a cache key part: none for the 10 every cache was played with before the
    window was an option (so those caches stay valid), ``{"window": w}`` otherwise (None: the default, 8)."""
    w = WINDOW if window is None else window
    return {} if w == LEGACY_WINDOW else {"window": w}


def _placebo(prompt, block, tokenizer):
    """``prompt`` with its reminder's words replaced by the placebo's (the one algorithm: ``PlaceboReminder``),
    or None where it shows no reminder with words to replace."""
    try:
        return PlaceboReminder().edit_prompt(prompt, block, tokenizer)
    except EditError:
        return None


def reminder_quote_ablation(lm, cfg, trajs: Sequence, cache_dir: str | Path | None = None) -> list[dict]:
    """After a failed command, the agent that writes its actions writes it again far more often with the memory
    agent's reminder than without it. Is that the reminder quoting the command (a command in the prompt is a
    command to copy), a reminder being there at all, or what it says?

    At every reminder step of written-action run ``cfg`` (``decode="generate-verbatim"``) whose previous command
    failed, the memory agent is replayed along the episode to the same reminder, and the action is written again
    (greedy, one :class:`~workbench.models.generation.PrefixGenerator` per episode) from the prompt as played; with
    the failed command written as :data:`~workbench.studies.failure_ablation.UNQUOTED` wherever the reminder
    quotes it (``unquoted``; the rest of the reminder kept); with the reminder's words replaced token for token by
    the content-free :data:`PLACEBO_TEXT` (``placebo``: same positions and length, ``PlaceboReminder``); and
    without the reminder line (``without``).

    Returns:
        One row per state: ``task_id``, ``step``, ``failed``, ``recorded`` (the command the run wrote),
        ``reminder``, ``replayed_same`` (the replay gives the reminder played and, as played, writes the recorded
        command), ``quoted`` (the reminder names the failed command; else ``unquoted`` is the prompt as played),
        and per variant of :data:`REMINDER_ABLATIONS` the command written and ``<variant>|repeats`` (it is the
        failed one again).

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`).
    """
    import re
    from dataclasses import replace

    if cfg.decode != "generate-verbatim":
        raise ValueError(f"reminder_quote_ablation writes the actions again: run {cfg.out} decodes '{cfg.decode}', "
                         "expected 'generate-verbatim'")
    tasks = {t.task_id: t for t in select_tasks(cfg)}
    cache = _reminder_cache(cache_dir, "reminder_quote", lm, cfg, variants=list(REMINDER_ABLATIONS), unquoted=UNQUOTED)
    agent = Agent.from_model(lm)
    tok = lm.tokenizer

    def pick(traj) -> list[int]:
        if traj.task_id not in tasks:
            return []
        failed = set(failures(traj))
        return [k for k, rec in enumerate(traj.meta.get("steps", [])) if rec.get("reminder") and k - 1 in failed]

    def analyse(traj, steps: list[int]) -> list[dict]:
        gen = PrefixGenerator(lm)
        mine: list[dict] = []
        for k, step, history, block in replay_at(policy_for(cfg), tasks[traj.task_id], traj, steps):
            failed = traj.steps[k - 1].action
            quote = re.compile(r"(['\"]?)" + re.escape(failed.strip()) + r"\1", re.I)
            reminder = block.reminder or ""

            def with_reminder(text: str | None):  # the state's prompt with this reminder line (None: none)
                return agent.build_prompt(replace(block, reminder=text), traj.initial_observation, traj.goal,
                                          history, step.observation)

            shown = with_reminder(block.reminder)
            prompts = {"as played": shown, "unquoted": with_reminder(quote.sub(UNQUOTED, reminder)),
                       "placebo": _placebo(shown, block, tok), "without": with_reminder(None)}
            row = {"task_id": traj.task_id, "step": k, "failed": failed, "recorded": step.action,
                   "reminder": reminder, "quoted": bool(quote.search(reminder))}
            for name, prompt in prompts.items():
                written = None if prompt is None else gen.generate(prompt.prefix, prompt.suffix, [failed]).parsed
                row[name] = written
                row[f"{name}|repeats"] = None if written is None else normalize(written) == normalize(failed)
            row["replayed_same"] = (reminder == traj.meta["steps"][k].get("reminder")
                                    and normalize(row["as played"]) == normalize(step.action))
            mine.append(row)
        return mine

    return rows_per_episode(cache, trajs, pick, analyse)


def summarize_reminder_quote(rows: Sequence[dict]):
    """Per variant: the states (``unquoted`` over those whose reminder quotes the failed command; ``placebo`` over
    those with a reminder to replace), the share where the agent writes the failed command again, and the share
    where it writes another command than as played. A DataFrame indexed by variant."""
    import pandas as pd

    out = {}
    for name in REMINDER_ABLATIONS:
        rs = [r for r in rows if r.get(f"{name}|repeats") is not None and (name != "unquoted" or r["quoted"])]
        out[name] = {"states": len(rs),
                     "repeats the failed command": mean(r[f"{name}|repeats"] for r in rs) if rs else None,
                     "writes another command than as played": mean(normalize(r[name]) != normalize(r["as played"])
                                                                   for r in rs) if rs else None}
    df = pd.DataFrame.from_dict(out, orient="index")
    df.attrs["replayed_same"] = sum(r["replayed_same"] for r in rows)
    return df
