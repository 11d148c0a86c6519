"""What the proactive memory agent did in a run (from each step's ``proactive`` record).

    interventions_per_episode   reminders shown to the action agent, per episode
    silence_rate                triggered steps on which the memory agent explicitly stayed silent / triggered steps
                                (a step whose phase-2 reply could not be used, ``phase2_error``, counts in neither)
    reminder_o200k              mean o200k tokens of a reminder; reminder_tokens: mean in the action model's tokens
    memory_calls_per_episode    requests to the memory agent's backend, per episode
    latency_ms_per_call         mean wall time of one such request (the only timing in a run's records)
    reminder_effect             the counterfactual of every reminder step (``agents.counterfactual``): for an
                                agent that scores, mean p(action) with minus without the reminder (biased
                                upward: the action is the argmax with it), the selection-free mean
                                total-variation distance and the other choice's side; for every agent (one that
                                writes its action writes it again without the reminder), the share of choices
                                it changed and the share followed (of the reminders that name an admissible
                                command; judged here by the current rule, ``agents.counterfactual.follows``, not
                                read from the record)
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean, median

from workbench.agents.counterfactual import follows
from workbench.memory.trajectory import Trajectory

__all__ = ["intervention_metrics"]


def intervention_metrics(trajs: Sequence[Trajectory]) -> dict | None:
    """The metrics of the module docstring, or None for a run without proactive records."""
    recs = [[s["proactive"] for s in t.meta.get("steps", []) if "proactive" in s] for t in trajs]
    if not any(recs):
        return None
    steps = [s for t in trajs for s in t.meta.get("steps", []) if "proactive" in s]
    effects = [{**eff, "followed": follows(rec.get("reminder") or "", step.action, eff.get("mentions") or [])}
               for t in trajs for step, rec in zip(t.steps, t.meta.get("steps", []))
               if "proactive" in rec and (eff := rec.get("reminder_effect")) is not None]
    flat = [r for rs in recs for r in rs]
    triggered = [r for r in flat if r.get("trigger") and not r.get("phase2_error")]  # an unusable reply decides nothing
    reminders = [r for r in flat if r.get("reminder")]
    calls = sum(r.get("n_calls", 0) for r in flat)
    return {
        "interventions_per_episode": len(reminders) / len(trajs),
        "silence_rate": (sum(bool(r.get("silent")) for r in triggered) / len(triggered)) if triggered else None,
        "reminder_o200k": mean(r.get("reminder_o200k", 0) for r in reminders) if reminders else 0.0,
        "reminder_tokens": mean(s.get("reminder_tokens", 0) for s in steps if s.get("reminder")) if reminders else 0.0,
        "memory_calls_per_episode": calls / len(trajs),
        "latency_ms_per_call": (sum(r.get("latency_ms", 0.0) for r in flat) / calls) if calls else None,
        "errors_per_episode": sum(len(r.get("errors", [])) for r in flat) / len(trajs),
        **({"reminder_effect": _effects(effects)} if effects else {}),
    }


def _effects(effects: list[dict]) -> dict:
    judged = [e["followed"] for e in effects if e["followed"] is not None]
    scored = [e for e in effects if "p_action" in e]  # a written action (``written``) has no distribution
    alt = [e for e in scored if "p_alt_with" in e]  # records written before the selection-free fields lack them
    # how flat the choice was without the reminder: near-ties flip on small moves, which "changed" alone hides
    return {"n": len(effects),
            **({"mean_delta_p": mean(e["p_action"] - e["p_action_without"] for e in scored),
                "median_p_action_without": median(e["p_action_without"] for e in scored)} if scored else {}),
            **({"mean_delta_p_alt": mean(e["p_alt_without"] - e["p_alt_with"] for e in alt),
                "mean_tv": mean(e["tv"] for e in alt)} if alt else {}),
            "changed": mean(bool(e["changed"]) for e in effects),
            "followed": mean(judged) if judged else None, "n_judged": len(judged)}
