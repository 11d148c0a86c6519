"""The proactive agent's tables over run folders (notebook 06): written actions, interventions, reminder kinds, spoken tasks."""

from __future__ import annotations

from statistics import mean

from workbench.agents.counterfactual import follows, is_warning
from workbench.agents.counterfactual import named_commands as named
from workbench.envs.alfworld_text import normalize
from workbench.eval.behaviour import (
    common_failure_rates,
    failures,
    own_failure_rates,
    recurrence_rates,
)
from workbench.eval.compare import paired_outcomes

__all__ = ["written_action_table", "intervention_table", "named_commands", "reminder_kind", "reminder_kinds", "spoken_tasks"]


def written_action_table(runs: dict):
    """The written-action runs (:func:`verbatim_configs`), one row per condition: success and steps; failed
    executions and the tasks with any; one-step recovery and failed-action repetition over each run's own failure
    tasks and over the tasks every run failed a command on (``common``; :mod:`workbench.eval.behaviour`); adjacent
    repetition; and at the reminder steps that follow a failed command, how often the agent wrote the failed
    command again with the reminder and how often it would have without it (the same prompt written again
    without the reminder line). ``runs``: condition -> :func:`~workbench.eval.run_folder.load_run`."""
    import pandas as pd

    trajs = {n: r[0] for n, r in runs.items()}
    common = common_failure_rates(trajs)
    rows = {}
    for name, ts in trajs.items():
        after = []  # (repeated with the reminder, would have repeated without it) after a failed command
        for t in ts:
            failed = set(failures(t))
            for k, (step, rec) in enumerate(zip(t.steps, t.meta.get("steps", []))):
                eff = rec.get("reminder_effect")
                if eff is None or k - 1 not in failed or "action_without" not in eff:
                    continue
                prev = normalize(t.steps[k - 1].action)
                after.append((normalize(step.action) == prev, normalize(eff["action_without"]) == prev))
        own = own_failure_rates(ts)
        rows[name] = {"episodes": len(ts), "success_%": 100 * mean(t.success for t in ts) if ts else None,
                      "avg_steps": mean(t.n_steps for t in ts) if ts else None, **own,
                      f"common ({len(common['tasks'])} tasks): one_step_recovery": common[name]["one_step_recovery"],
                      "common: failed_action_repetition": common[name]["failed_action_repetition"],
                      "adjacent_repetition": recurrence_rates(ts)["adjacent_repetition"],
                      "reminders after a failure": len(after),
                      "repeats the failed command with the reminder": mean(a for a, _ in after) if after else None,
                      "without it": mean(b for _, b in after) if after else None}
    return pd.DataFrame.from_dict(rows, orient="index")


def intervention_table(metrics: dict[str, dict]):
    """Success, steps and ``metrics.json``'s ``interventions`` block per condition (reminders per episode, silence
    rate, reminder tokens, memory-agent calls and latency, and the reminder re-score: mean delta p, how flat the
    choice was without the reminder (median p of the chosen action) and how far the reminder moved the
    distribution (mean total variation), share changed, share followed)."""
    import pandas as pd

    rows = {}
    for name, m in metrics.items():
        iv = m.get("interventions") or {}
        eff = iv.get("reminder_effect") or {}
        rows[name] = {"episodes": m["n_episodes"], "success_%": 100 * m["success_rate"], "avg_steps": m["avg_steps"],
                      "interventions/episode": iv.get("interventions_per_episode"),
                      "silence_rate": iv.get("silence_rate"), "reminder_o200k": iv.get("reminder_o200k"),
                      "memory_calls/episode": iv.get("memory_calls_per_episode"),
                      "latency_ms/call": iv.get("latency_ms_per_call"), "errors/episode": iv.get("errors_per_episode"),
                      "re-scored reminders": eff.get("n"), "mean Δp(action)": eff.get("mean_delta_p"),
                      "median p(action) without": eff.get("median_p_action_without"), "mean TV": eff.get("mean_tv"),
                      "changed": eff.get("changed"), "followed": eff.get("followed")}
    return pd.DataFrame.from_dict(rows, orient="index")


def named_commands(effect: dict, reminder: str) -> list[str]:
    """The admissible commands a reminder names (:func:`workbench.agents.counterfactual.named_commands` over the
    re-score's ``mentions``: a one-word command such as look counts only when quoted)."""
    return named(reminder, effect.get("mentions") or [])


def reminder_kind(effect: dict, reminder: str) -> str:
    """What a reminder asks: ``warning`` (stop / avoid / already / failed / do not ...: the rule ``followed`` uses,
    :mod:`workbench.agents.counterfactual`), ``directive`` (names an admissible command, :func:`named_commands`,
    without warning against it), ``fact`` (names none: a location, the task, a status)."""
    return "warning" if is_warning(reminder) else "directive" if named_commands(effect, reminder) else "fact"


def reminder_kinds(runs: dict):
    """The counterfactual re-score of every reminder step (``reminder_effect`` records), per condition and
    :func:`reminder_kind`: reminders, their share of the condition's, mean total variation between the choice
    distributions with and without the reminder, share of choices it changed, share followed (of those naming a
    command, :func:`named_commands`: a warning is followed when the action is none of them, any other reminder
    when it is one of them), and the success of the episodes such reminders were shown in. ``runs``: condition ->
    :func:`~workbench.eval.run_folder.load_run`. A DataFrame indexed ``(condition, kind)``."""
    import pandas as pd

    rows = {}
    for name, (trajs, _, _) in runs.items():
        found = []
        for t in trajs:
            for step, rec in zip(t.steps, t.meta.get("steps", [])):
                if "reminder_effect" not in rec:
                    continue
                effect, text = rec["reminder_effect"], rec.get("reminder") or ""
                kind, followed = reminder_kind(effect, text), follows(text, step.action, effect.get("mentions") or [])
                found.append((kind, effect, followed, t.success, t.task_id))
        for kind in ("warning", "directive", "fact"):
            mine = [(e, f, ok, tid) for k, e, f, ok, tid in found if k == kind]
            if not mine:
                continue
            judged = [f for _, f, _, _ in mine if f is not None]
            tvs = [e["tv"] for e, _, _, _ in mine if "tv" in e]
            episodes = {tid: ok for _, _, ok, tid in mine}
            rows[(name, kind)] = {
                "reminders": len(mine), "share": len(mine) / len(found), "mean TV": mean(tvs) if tvs else None,
                "changed": mean(bool(e["changed"]) for e, _, _, _ in mine),
                "followed": mean(judged) if judged else None, "judged": len(judged),
                "episodes": len(episodes), "success_% of those episodes": 100 * mean(episodes.values())}
    return pd.DataFrame.from_dict(rows, orient="index")


def spoken_tasks(runs: dict, reference: str = "none"):
    """Where did the memory agent change anything? Per condition: the tasks on which the action agent was shown
    something at some step (a reminder, or for passive exposure the bank) and those on which it never was (for
    the silent-until-spoken variants those episodes *are* the action agent's alone), and on the shown tasks the
    paired comparison with ``reference`` (exact McNemar): the only tasks where the condition can differ from it.
    A DataFrame indexed by condition."""
    import pandas as pd

    ref = {t.task_id: t.success for t in runs[reference][0]}
    rows = {}
    for name, (trajs, _, _) in runs.items():
        if name == reference:
            continue
        shown = {t.task_id: t.success for t in trajs if any(s.get("reminder") for s in t.meta.get("steps", []))}
        pair = paired_outcomes(shown, ref)
        rows[name] = {"tasks": len(trajs), "shown something": len(shown),
                      "never shown anything": len(trajs) - len(shown),
                      "success_% where shown": 100 * pair["rate_a"] if pair["rate_a"] is not None else None,
                      f"{reference} success_% there": 100 * pair["rate_b"] if pair["rate_b"] is not None else None,
                      "only this": pair["only_a"], f"only {reference}": pair["only_b"], "p_mcnemar": pair["p_mcnemar"]}
    return pd.DataFrame.from_dict(rows, orient="index")
