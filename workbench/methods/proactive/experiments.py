"""The proactive memory agent's evaluation (notebook 06): the method, its four ablations and the unchanged action
agent alone, as run folders ``ROOT/<model>/<condition>`` on the same tasks, model and dtype; what the reminders did
(the counterfactual re-score every run records) and whether the retrieval heads read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from .variants import list_variants

__all__ = ["proactive_configs", "intervention_table", "reminder_attention"]


def proactive_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                      variants: Sequence[str] | None = None, baselines: Sequence[str] = ("none",), interval: int = 1,
                      triggers: Sequence[str] = (), dtype: str = "float32", backend: str | None = None) -> list:
    """One run per baseline (``none``: the action agent alone) and per variant (default: all five)."""
    from workbench.eval.runner import RunConfig

    out = Path(root) / model
    common = dict(split=split, tasks=tasks, model=model, max_steps=max_steps, dtype=dtype, teacher_forcing=False)
    cfgs = [RunConfig(out=str(out / b), memory=b, **common) for b in baselines]
    for v in variants or list_variants():
        cfgs.append(RunConfig(out=str(out / v), memory=v, interval=interval, triggers=tuple(triggers),
                              **({"backend": backend} if backend else {}), **common))
    return cfgs


def intervention_table(metrics: dict[str, dict]):
    """Success, steps and ``metrics.json``'s ``interventions`` block per condition (reminders per episode, silence
    rate, reminder tokens, memory-agent calls and latency, and the reminder re-score: mean delta p, share changed,
    share followed)."""
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
                      "changed": eff.get("changed"), "followed": eff.get("followed")}
    return pd.DataFrame.from_dict(rows, orient="index")


def reminder_attention(lm, heads, split: str, tasks: str, variant: str = "proactive", max_steps: int = 50
                       ) -> tuple[dict, list]:
    """Do the retrieval heads read the reminder? While ``variant`` plays ``tasks`` with the heads captured: the
    reminder span's per-token attention u_token (1 = an average prompt token) at every reminder step.

    Returns:
        ``(summary, trajectories)``: ``summary`` has ``steps`` (reminder steps), ``mean_u_token``,
        ``share_above_average`` (u_token > 1) and ``rows`` (one per reminder step, with the task id).
    """
    from workbench.agents.loop import Agent
    from workbench.attention.items import episode_item_utilization
    from workbench.envs.alfworld import ALFWorldEnv
    from workbench.eval.runner import RunConfig, policy_for, select_tasks

    cfg = RunConfig(out="-", split=split, tasks=tasks, memory=variant)
    agent = Agent.from_model(lm, keep_prompts=True)
    env = ALFWorldEnv(max_steps=max_steps)
    rows, trajs = [], []
    try:
        for task in select_tasks(cfg):
            r, traj = episode_item_utilization(agent, env, task, policy_for(cfg), heads, max_steps)
            rows += [x for x in r if x["item"] == "reminder"]
            trajs.append(traj)
    finally:
        env.close()
    summary = {"steps": len(rows), "mean_u_token": mean(r["u_token"] for r in rows) if rows else None,
               "share_above_average": mean(r["u_token"] > 1 for r in rows) if rows else None, "rows": rows}
    return summary, trajs
