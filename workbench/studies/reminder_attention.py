"""Do the retrieval heads read the reminder? Its attention against a placebo of the same length at the same place."""

from __future__ import annotations

from pathlib import Path
from statistics import mean

from workbench.agents.edits import EditError, PlaceboReminder
from workbench.agents.loop import Agent
from workbench.agents.rescore import State, rescore, states_at
from workbench.attention.instrument import CaptureInstrument
from workbench.attention.items import item_utilization, span_utilization
from workbench.envs.alfworld import ALFWorldEnv
from workbench.eval.config import RunConfig, policy_for, select_tasks
from workbench.eval.task_cache import TaskCache, analysis_key
from workbench.memory.trajectory import Trajectory
from workbench.prompts.layout import BuiltPrompt
from workbench.studies.reminder_quote import window_key

__all__ = ["reminder_attention"]


def _placebo_row(agent, heads, state: State, played: BuiltPrompt) -> dict:
    """The reminder step re-scored twice at the same state: with the placebo in the reminder's place (heads
    captured; :class:`~workbench.agents.edits.PlaceboReminder`), then as played, through the agent's cached prefix
    in that order, as the tables were made; the placebo span's u_token and how the two distributions differ.
    Empty where the reminder has no words to replace."""
    if state.prompt(agent).tokens != played.tokens:
        raise ValueError(f"{state.task.task_id} step {state.step}: the replayed memory agent does not give the prompt "
                         "the episode was played with, so its placebo would not be the same state's")
    inst = CaptureInstrument(agent, list(heads))
    inst.reset()
    try:
        r = rescore(agent, state, [PlaceboReminder()], [inst], reuse_prefix=True, factual_first=False)
    except EditError:
        return {}
    start, end = r.edited_prompt.kind_span("reminder")
    u = span_utilization(inst.capture.steps[0], start, end)  # the placebo's forward, the first scored
    return {"u_token_placebo": u / (end - start), "p_action_placebo": r.p_chosen_edited,
            "changed_vs_placebo": r.flipped, "tv_vs_placebo": r.tv}


def reminder_attention(lm, heads, split: str, tasks: str, variant: str = "proactive", max_steps: int = 50,
                       placebo: bool = True, cache_dir: str | Path | None = None,
                       window: int | None = None) -> tuple[dict, list]:
    """Do the retrieval heads read the reminder, and more than its place in the prompt explains? While ``variant``
    plays ``tasks`` with the heads captured: the reminder span's per-token attention u_token (1 = an average
    prompt token) at every reminder step; with ``placebo``, the same state re-scored with the reminder's words
    replaced by a content-free placebo of the same token length (:class:`~workbench.agents.edits.PlaceboReminder`,
    the memory agent replayed to the step: :func:`~workbench.agents.rescore.states_at`): the placebo span's
    u_token is the position-and-length control (a reminder sits right before the action, where recency alone
    draws attention), and the choice and distribution with the reminder against the placebo's say what its
    content did. ``window``: the memory agent's (None: the method's default).

    Returns:
        ``(summary, trajectories)``: ``summary`` has ``steps`` (reminder steps), ``mean_u_token``,
        ``share_above_average`` (u_token > 1), with ``placebo``: ``mean_u_token_placebo``,
        ``share_above_placebo`` (the reminder read more than the placebo at the same step),
        ``changed_vs_placebo`` (share of steps whose choice differs), ``mean_tv_vs_placebo``; and ``rows`` (one
        per reminder step, with the task id). Each task's rows and episode are kept in ``cache_dir`` as it finishes
        (:class:`~workbench.eval.task_cache.TaskCache`: a render resumes; None keeps nothing).
    """
    cfg = RunConfig(out="-", split=split, tasks=tasks, memory=variant, window=window)
    cache = TaskCache(cache_dir, f"reminder_attention-{variant}", analysis_key(
        lm, heads=[list(h) for h in heads], split=split, variant=variant, max_steps=max_steps, placebo=placebo,
        **window_key(cfg.window)))
    agent, env = None, None
    rows, trajs = [], []
    try:
        for task in select_tasks(cfg):
            if (done := cache.get(task.task_id)) is None:
                if env is None:
                    agent = Agent.from_model(lm, keep_prompts=True, record_admissible=True)
                    env = ALFWorldEnv(max_steps=max_steps)
                inst = CaptureInstrument(agent, list(heads))
                inst.reset()
                res = agent.run(env, task, policy_for(cfg), instruments=[inst], max_steps=max_steps)
                records = res.trajectory.meta["steps"]
                mine = [r | {"task_id": task.task_id} for r in item_utilization(inst.capture.steps, inst.prompts)
                        if r["item"] == "reminder"]
                if placebo and mine:
                    at = {r["step"]: r for r in mine}
                    for state in states_at(policy_for(cfg), task, res.trajectory, list(at),
                                           {k: records[k]["admissible"] for k in at}):
                        at[state.step] |= _placebo_row(agent, heads, state, inst.prompts[state.step])
                done = {"rows": mine, "trajectory": res.trajectory.model_dump(mode="json")}
                cache.put(task.task_id, done)
            rows += done["rows"]
            trajs.append(Trajectory.model_validate(done["trajectory"]))
    finally:
        if env is not None:
            env.close()
    summary = {"steps": len(rows), "mean_u_token": mean(r["u_token"] for r in rows) if rows else None,
               "share_above_average": mean(r["u_token"] > 1 for r in rows) if rows else None}
    if placebo:
        ctl = [r for r in rows if "u_token_placebo" in r]
        summary |= {"placebo_steps": len(ctl),
                    "mean_u_token_placebo": mean(r["u_token_placebo"] for r in ctl) if ctl else None,
                    "share_above_placebo": mean(r["u_token"] > r["u_token_placebo"] for r in ctl) if ctl else None,
                    "changed_vs_placebo": mean(r["changed_vs_placebo"] for r in ctl) if ctl else None,
                    "mean_tv_vs_placebo": mean(r["tv_vs_placebo"] for r in ctl) if ctl else None}
    summary["rows"] = rows
    return summary, trajs
