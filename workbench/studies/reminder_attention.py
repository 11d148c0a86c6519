"""Do the retrieval heads read the reminder? Its attention against a placebo of the same length at the same place."""

from __future__ import annotations

from pathlib import Path
from statistics import mean

from workbench.agents.counterfactual import choice_shift
from workbench.agents.loop import Agent
from workbench.attention.instrument import CaptureInstrument
from workbench.attention.items import item_utilization, span_utilization
from workbench.envs.alfworld import ALFWorldEnv
from workbench.eval.config import RunConfig, policy_for, select_tasks
from workbench.eval.task_cache import TaskCache, analysis_key
from workbench.memory.trajectory import Trajectory
from workbench.models.scoring import ActionScorer

__all__ = ["PLACEBO_TEXT", "placebo_prompt", "reminder_attention"]


#: The placebo reminder's words: an instruction that names no object, place or command (its tokens are cut to the
#: real reminder's length).
PLACEBO_TEXT = "Keep working on the task one step at a time."


def placebo_prompt(prompt, tokenizer, text: str = PLACEBO_TEXT):
    """``prompt`` with its reminder's words replaced, token for token, by a content-free placebo of the same length.

    The label (``Reminder:``, whatever word the span starts with before its colon) and the span's last token (its line end) stay, every other token of the reminder
    span becomes a token of ``text`` (repeated and cut to length), so every position, the history, the candidates
    and the span are the same: only what the reminder says differs. None when the prompt has no reminder (or one
    with no words between label and line end).
    """
    from dataclasses import replace

    span = prompt.kind_span("reminder")
    if span is None:
        return None
    start, end = span
    toks = prompt.tokens
    label = tokenizer.decode(toks[start:end]).split(":", 1)[0].strip()
    head = list(tokenizer(f"{label}:", add_special_tokens=False).input_ids)
    k = len(head) if toks[start:start + len(head)] == head else 0
    body = end - 1 - (start + k)
    if body <= 0:
        return None
    filler = list(tokenizer((" " + text.strip()) * (body // 4 + 2), add_special_tokens=False).input_ids)[:body]
    if len(filler) < body:
        raise ValueError(f"placebo text '{text}' is too short to fill {body} tokens")
    new = toks[:start + k] + filler + toks[start + k + body:]
    cut = len(prompt.prefix)
    return replace(prompt, prefix=tuple(new[:cut]), suffix=tuple(new[cut:]))


def _placebo_row(agent, heads, prompt, admissible: list[str]) -> dict | None:
    """The reminder step re-scored twice at the same state: as played, and with the placebo in the reminder's
    place (heads captured); the placebo span's u_token and how the two distributions differ."""
    fake = placebo_prompt(prompt, agent.builder.tokenizer)
    if fake is None:
        return None
    inst = CaptureInstrument(agent, list(heads))
    inst.reset()
    placebo = ActionScorer.normalise(agent.decide(fake, admissible, [inst]).scores)
    real = ActionScorer.normalise(agent.decide(prompt, admissible).scores)
    start, end = fake.kind_span("reminder")
    u = span_utilization(inst.capture.steps[-1], start, end)
    best, alt, tv = choice_shift(real, placebo)
    return {"u_token_placebo": u / (end - start), "p_action_placebo": placebo[best],
            "changed_vs_placebo": best != alt, "tv_vs_placebo": tv}


def reminder_attention(lm, heads, split: str, tasks: str, variant: str = "proactive", max_steps: int = 50,
                       placebo: bool = True, cache_dir: str | Path | None = None) -> tuple[dict, list]:
    """Do the retrieval heads read the reminder, and more than its place in the prompt explains? While ``variant``
    plays ``tasks`` with the heads captured: the reminder span's per-token attention u_token (1 = an average
    prompt token) at every reminder step; with ``placebo``, the same state re-scored with the reminder's words
    replaced by a content-free placebo of the same token length (:func:`placebo_prompt`): the placebo span's
    u_token is the position-and-length control (a reminder sits right before the action, where recency alone
    draws attention), and the choice and distribution with the reminder against the placebo's say what its
    content did.

    Returns:
        ``(summary, trajectories)``: ``summary`` has ``steps`` (reminder steps), ``mean_u_token``,
        ``share_above_average`` (u_token > 1), with ``placebo``: ``mean_u_token_placebo``,
        ``share_above_placebo`` (the reminder read more than the placebo at the same step),
        ``changed_vs_placebo`` (share of steps whose choice differs), ``mean_tv_vs_placebo``; and ``rows`` (one
        per reminder step, with the task id). Each task's rows and episode are kept in ``cache_dir`` as it finishes
        (:class:`~workbench.eval.task_cache.TaskCache`: a render resumes; None keeps nothing).
    """
    cfg = RunConfig(out="-", split=split, tasks=tasks, memory=variant)
    cache = TaskCache(cache_dir, f"reminder_attention-{variant}", analysis_key(
        lm, heads=[list(h) for h in heads], split=split, variant=variant, max_steps=max_steps, placebo=placebo))
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
                mine = []
                for r in item_utilization(inst.capture.steps, inst.prompts):
                    if r["item"] != "reminder":
                        continue
                    r = r | {"task_id": task.task_id}
                    if placebo:
                        r |= _placebo_row(agent, heads, inst.prompts[r["step"]], records[r["step"]]["admissible"]) or {}
                    mine.append(r)
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
