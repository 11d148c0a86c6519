"""Notebook 06's report: the proactive memory agent's table pages, metrics and every caption, from run folders.

Pure functions of what the notebook has read (``name -> load_run(folder)``: the action agent alone and the
variants of :func:`~workbench.studies.proactive_grids.proactive_configs`, in their order; the written-action runs
of :func:`~workbench.studies.proactive_grids.verbatim_configs`) and of the frames of
:mod:`workbench.studies.proactive_tables`, :mod:`~workbench.studies.warning_pull` and
:mod:`~workbench.studies.reminder_quote`. The notebook writes what these return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workbench.studies.captions import (
    ALPHA,
    adopted_episodes,
    code_list,
    identical_sentence,
    largest,
    missing,
    pct,
    significance,
    versus,
)
from workbench.studies.parting import parting_sentence, parting_tables
from workbench.studies.table_pages import TablePage

__all__ = ["ProactiveSetting", "REFERENCE", "conditions_page", "verbatim_page", "parting_vs_react", "reminder_summary",
           "condition_metrics", "verbatim_metrics", "conditions_caption", "interventions_caption", "spoken_caption",
           "kinds_caption", "parting_caption", "warning_pull_caption", "written_caption", "reminder_quote_caption",
           "state_metrics"]

REFERENCE = "none"  # the action agent alone, with its raw history (ReAct)
METRICS = ("n_episodes", "success_rate", "avg_steps", "interventions")


@dataclass(frozen=True)
class ProactiveSetting:
    """How notebook 06's runs were made, as its pages say it."""

    split: str
    tasks: str
    max_steps: int
    profile: str
    backend: str | None = None
    interval: int = 1
    triggers: tuple[str, ...] = ()
    window: int | None = None  # None: not said (a setting made before the window was an option)

    @property
    def command(self) -> str:
        return f"make reproduce (notebook 06, profile {self.profile})"

    @property
    def trigger_text(self) -> str:
        return (f"memory agent on `{self.backend or 'offline-alfworld'}`, triggered at step 0 and every "
                f"{self.interval} step(s){' and on ' + ', '.join(self.triggers) if self.triggers else ''}"
                + (f", reading the last {self.window} steps" if self.window else ""))


def conditions_page(runs: Mapping[str, tuple], setting: ProactiveSetting) -> TablePage:
    """Success of every condition, the method paired with each ablation and each ablation with the action agent
    alone."""
    conds = list(runs)
    notes = (f"ReAct layout with the full history; {setting.trigger_text}; episodes limited to {setting.max_steps} "
             "steps."
             + "".join(f" `{c}`: {n} episodes read from notebook 01's run of the same parameters." for c in conds
                       if (n := adopted_episodes(runs[c][2], read=True)))
             + "".join(f" `{c}`: on {n} tasks the memory agent stayed silent throughout, so the prompts were ReAct's "
                       "at every step and the episode is `none`'s (adopted, not played)." for c in conds
                       if (n := adopted_episodes(runs[c][2], rule="same memory"))))
    pairs = ([("proactive", c) for c in conds if c != "proactive"]
             + [(c, REFERENCE) for c in conds if c not in ("proactive", REFERENCE)])
    return TablePage(f"proactive_conditions_{setting.split}", tuple(conds), f"Proactive memory agent "
                     f"({setting.split}, {setting.tasks})", setting.command, notes, tuple(pairs),
                     conditions_caption(runs))


def verbatim_page(vruns: Mapping[str, tuple], setting: ProactiveSetting, tasks: str) -> TablePage:
    """The written-action runs: the action agent alone, then the method, paired."""
    names = list(vruns)
    notes = (f"ReAct layout with the full history, actions written by the agent and executed as written; "
             f"{setting.trigger_text}; episodes limited to {setting.max_steps} steps."
             + "".join(f" `{n}`: on {k} tasks the memory agent stayed silent throughout, so the episode is "
                       f"`{names[0]}`'s (adopted, not played)." for n in names
                       if (k := adopted_episodes(vruns[n][2], rule="same memory"))))
    caption = ("The action agent alone and the method with their actions written and executed as written (a "
               "command the game cannot execute fails, and the memory agent's warnings about failed commands can "
               f"fire), paired: against `{names[0]}` ({pct(vruns[names[0]][1].get('success_rate'))}), "
               f"{versus(vruns, names[0], names[1:])}.")
    same = identical_sentence(vruns, names)
    return TablePage(f"proactive_verbatim_{setting.split}", tuple(names), f"Proactive memory agent with written "
                     f"actions ({setting.split}, {tasks})", setting.command, notes, ((names[1], names[0]),),
                     caption + (" " + same if same else ""))


def parting_vs_react(runs: Mapping[str, tuple]):
    """Where each condition's paired episodes part from the action agent alone's."""
    return parting_tables({c: (r[0], runs[REFERENCE][0]) for c, r in runs.items() if c != REFERENCE}, "condition",
                          "ReAct")


def reminder_summary(attention: dict):
    """The reminder-attention summary (without its rows), one row."""
    import pandas as pd

    return pd.DataFrame([{k: v for k, v in attention.items() if k != "rows"}], index=["proactive"])


def condition_metrics(runs: Mapping[str, tuple], attention: dict) -> dict:
    """metrics.json's numbers of the conditions and of the reminder attention."""
    return {"conditions": {c: {k: r[1].get(k) for k in METRICS} for c, r in runs.items()},
            "reminder_attention": {k: v for k, v in attention.items() if k != "rows"}}


def verbatim_metrics(vruns: Mapping[str, tuple]) -> dict:
    """metrics.json's numbers of the written-action runs."""
    return {"verbatim": {n: {k: r[1].get(k) for k in METRICS} for n, r in vruns.items()}}


# -- captions -------------------------------------------------------------------------------------------------


def conditions_caption(runs: Mapping[str, tuple]) -> str:
    """Caption of the conditions page: each condition against the action agent alone, and which are one."""
    others = [c for c in runs if c != REFERENCE]
    text = ("The action agent alone (`none`) and the proactive memory agent with its four ablations (passive bank "
            "exposure, always-on injection, advisor only, general retrieval) on the same tasks, paired exact McNemar. "
            f"Against `none` ({pct(runs[REFERENCE][1].get('success_rate'))}): {versus(runs, REFERENCE, others)}.")
    same = identical_sentence(runs, list(runs))
    return text + (" " + same if same else "")


def interventions_caption(table) -> str:
    """Caption of :func:`~workbench.studies.proactive_tables.intervention_table`."""
    import pandas as pd

    text = ("Per condition, what the memory agent did (reminders per episode, silence rate, reminder size in o200k "
            "tokens, memory-agent calls and latency) and what its reminders did when each reminder step was scored "
            "again without the reminder (mean change in p of the chosen action, total variation of the choice "
            "distribution, the share of choices it changed and that followed it).")
    dp = table["mean Δp(action)"].dropna() if "mean Δp(action)" in table else []
    changed = table["changed"].dropna() if "changed" in table else []
    if len(dp) and dp.abs().max() < 0.01:
        text += (f" The mean change in p(chosen action) stays within ±{dp.abs().max():.3f} in every condition, "
                 f"while the choice changes at {pct(changed.min())}-{pct(changed.max())} of the re-scored steps.")
    elif len(dp) == 0 and len(changed):
        text += (" The actions are written, so there is no distribution to compare: Δp, p without and TV are "
                 "empty; `changed` and `followed` compare the written commands.")
    elif len(changed) == 0:
        text += " No reminder was re-scored: the memory agent showed the action agent nothing."
    if "proactive" in table.index and pd.notna(table.loc["proactive", "silence_rate"]):
        text += f" The method stays silent at {pct(table.loc['proactive', 'silence_rate'])} of its triggered steps."
    return text


def spoken_caption(table) -> str:
    """Caption of :func:`~workbench.studies.proactive_tables.spoken_tasks`."""
    text = ("Each condition against the action agent alone on the tasks where it showed the action agent something "
            "(the only tasks on which it can differ from it; paired, exact McNemar).")
    below = [c for c, r in table.iterrows() if r["p_mcnemar"] < ALPHA and r["only this"] < r[f"only {REFERENCE}"]]
    above = [c for c, r in table.iterrows() if r["p_mcnemar"] < ALPHA and r["only this"] > r[f"only {REFERENCE}"]]
    level = [c for c in table.index if c not in below + above]
    for what, cs in (("Significantly below it there", below), ("Significantly above it there", above),
                     ("Not distinguishable from it there", level)):
        text += f" {what}: {code_list(cs)}." if cs else ""
    if "proactive" in table.index and not table.loc["proactive", "shown something"]:
        text += " The method showed nothing on any task: its episodes are the action agent's own."
    elif "proactive" in table.index:
        r = table.loc["proactive"]
        text += (f" The method showed something on {int(r['shown something'])} of {int(r['tasks'])} tasks "
                 f"({r['success_% where shown']:.1f}% vs {r[f'{REFERENCE} success_% there']:.1f}% for `{REFERENCE}`, "
                 f"{significance(r['p_mcnemar'])}).")
    return text


def kinds_caption(table) -> str:
    """Caption of :func:`~workbench.studies.proactive_tables.reminder_kinds`: what each condition mostly said."""
    text = ("The re-scored reminders by kind (`warning`: stop, already, failed...; `directive`: names a command to "
            "take; `fact`: names none) per condition: their share, how far they moved the choice distribution "
            "(mean TV), how often they changed the choice and were followed, and the success of the episodes they "
            "were shown in.")
    rows = {}
    for (cond, kind), r in zip(table.index, table.to_dict("records")):
        rows.setdefault(cond, []).append((kind, r))
    parts = []
    for cond, kinds in rows.items():
        kind, r = max(kinds, key=lambda kr: kr[1]["share"])
        parts.append(f"`{cond}` {pct(r['share'])} {kind}s")
    if parts:
        text += " Mostly: " + ", ".join(parts) + "."
    if "mean TV" in table and table["mean TV"].isna().all():
        text += " Mean TV is empty: the actions are written, with no distribution over admissible commands."
    return text


def parting_caption(table) -> str:
    """Caption of :func:`parting_vs_react`."""
    return ("For the tasks only one side solves (a condition, or the action agent alone), the step at which the two "
            "episodes first take different actions, per task type (`all` first): the first step at which what the "
            "condition showed changed the choice. " + parting_sentence(table, "condition", "ReAct"))


def warning_pull_caption(table) -> str:
    """Caption of :func:`~workbench.studies.warning_pull.summarize_warning_pull`: does naming the command pull?"""
    n, episodes = largest(table["states"]), largest(table["episodes"])
    same = table.attrs.get("replayed_same")
    text = (f"At the method's loop-warning states ({n} states of {episodes} episodes"
            + (f"; {same} replayed to the recorded action" if same is not None else "") + "), the warning scored as "
            "played, without its bank facts (`no memory`), with the commands it names unnamed, as a placebo of the "
            "same length, and without the line: `pulled` / `pushed` count the states where a variant chooses a "
            "warned command and the prompt without the line does not, or the reverse.")
    if not n:
        text += " No loop warning was shown on these tasks: nothing to score."
    elif "as played" in table.index and "unnamed" in table.index:
        played, unnamed = table.loc["as played"], table.loc["unnamed"]
        text += (f" As played it pulls at {int(played['pulled vs without'])} states and pushes at "
                 f"{int(played['pushed vs without'])} ({significance(played['p_mcnemar'])}); unnamed, at "
                 f"{int(unnamed['pulled vs without'])} and {int(unnamed['pushed vs without'])} "
                 f"({significance(unnamed['p_mcnemar'])})")
        pulls = lambda row: row["p_mcnemar"] < ALPHA and row["pulled vs without"] > row["pushed vs without"]  # noqa: E731
        if not pulls(played):
            text += (": as played the warning does not pull significantly, so there is nothing to attribute to "
                     "naming the command." if played["p_mcnemar"] >= ALPHA else
                     ": as played the warning pushes away from the warned commands.")
        elif pulls(unnamed) and unnamed["pulled vs without"] >= played["pulled vs without"]:
            text += ": unnamed pulls as much, so naming the command is not what pulls."
        elif unnamed["p_mcnemar"] >= ALPHA:
            text += ": unnamed does not pull significantly, so naming the command is what pulls."
        else:
            text += "."
    return text


def written_caption(table) -> str:
    """Caption of :func:`~workbench.studies.proactive_tables.written_action_table`."""
    common = next((c for c in table.columns if c.startswith("common (")), None)
    text = ("Per written-action run: failed executions and the tasks with any, one-step recovery and failed-action "
            "repetition on its own failure tasks and on the tasks every run failed a command on"
            + (f" ({common.split('(')[1].split(')')[0]})" if common else "") + ", adjacent repetition; and at the "
            "reminder steps that follow a failed command, how often the agent wrote the failed command again with "
            "the reminder and from the same prompt without it.")
    after = table[table["reminders after a failure"].fillna(0) > 0] if "reminders after a failure" in table else []
    for name, r in (after.iterrows() if len(after) else []):
        text += (f" `{name}`: {pct(r['repeats the failed command with the reminder'])} with the reminder, "
                 f"{pct(r['without it'])} without it, over {int(r['reminders after a failure'])} steps.")
    return text


MIN_STATES = 20  # below this a reminder-quote caption states the rates without reading a cause into them (ours)


def reminder_quote_caption(table) -> str:
    """Caption of :func:`~workbench.studies.reminder_quote.summarize_reminder_quote`: the quote, or the warning?"""
    n = largest(table["states"]) if len(table) else 0
    same = table.attrs.get("replayed_same")
    col = "repeats the failed command"
    text = (f"At the reminder steps that follow a failed command ({n} states"
            + (f"; {same} replayed to the recorded command" if same is not None else "") + "), the action written "
            "again as played, with the failed command unquoted in the reminder, with a same-length placebo in its "
            "place, and without the line: how often it repeats the failed command.")
    if not n:
        text += " No reminder followed a failed command on these tasks: nothing to score."
    elif {"as played", "unquoted", "without"} <= set(table.index) and not any(
            missing(table.loc[k, col]) for k in ("as played", "unquoted", "without")):
        v = table[col]
        text += (" " + ", ".join(f"`{k}` {pct(v[k])}" for k in table.index) + ".")
        if n < MIN_STATES:
            text += f" {n} states are too few to say whether the quote or the warning is copied."
        elif abs(v["unquoted"] - v["without"]) < abs(v["unquoted"] - v["as played"]):
            text += " Unquoted is nearer `without` than `as played`: the quote is what the agent copies."
        else:
            text += " Unquoted is nearer `as played` than `without`: the quote alone does not explain the repetition."
    return text


def state_metrics(rows: Sequence[dict], table) -> dict:
    """metrics.json's count of a warning-pull or reminder-quote study: its rows and the states replayed the same."""
    return {"states": len(rows), "replayed_same": table.attrs["replayed_same"]}
