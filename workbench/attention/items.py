"""Item-level utilization: how much of q_t's attention the retrieval heads give each memory item of a
working-memory prompt (MemArbiter's items, by bank and band; a reminder span too).

At step t, for an item i whose tokens are the span S_i of that step's prompt (``prompts.working_memory``),

    u[i, t]        = n_t / |H| * sum_{h in H} sum_{j in S_i} Attention_h(q_t -> j)     (C's formula, per item)
    u_token[i, t]  = u[i, t] / |S_i|                                                  (per token: a focal line is
                                                                                       longer than its ambient cue)

A uniform attention row gives u_token = 1 on every token, so u_token > 1 means the item is read more than an
average token of the prompt. The prompt changes from step to step (P_t is reassembled), so every step's spans
are read from that step's own prompt. :func:`focal_vs_ambient` compares bands at the same steps, per bank.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import mean

from workbench.attention.capture import CapturedStep
from workbench.attention.instrument import CaptureInstrument
from workbench.prompts.layout import BuiltPrompt

__all__ = ["item_utilization", "focal_vs_ambient", "span_utilization", "episode_item_utilization"]


def span_utilization(step: CapturedStep, start: int, end: int) -> float:
    """n_t / |H| * the attention mass of q_t on key positions [start, end), averaged over heads."""
    if end <= start:
        return 0.0
    if start < 0 or end > min(step.prompt_len, step.rows.shape[-1]):
        raise ValueError(f"span {start}..{end} outside a prompt of {step.prompt_len} tokens")
    return float(step.prompt_len * step.rows[:, start:end].float().sum(dim=-1).mean())


def item_utilization(steps: Sequence[CapturedStep], prompts: Sequence[BuiltPrompt]) -> list[dict]:
    """One row per (step, shown item): ``step, item, bank, band, tokens, u, u_token`` (and the reminder span as
    item ``reminder`` when the prompt has one)."""
    if len(steps) != len(prompts):
        raise ValueError(f"{len(steps)} captured steps but {len(prompts)} prompts")
    rows = []
    for t, (cap, prompt) in enumerate(zip(steps, prompts)):
        for s in prompt.spans:
            if s.kind == "wm_item" or s.kind == "reminder":
                u = span_utilization(cap, s.start, s.end)
                n = s.end - s.start
                rows.append({"step": t, "item": s.item if s.kind == "wm_item" else "reminder",
                             "bank": s.bank, "band": s.band, "tokens": n, "u": u, "u_token": u / n if n else 0.0})
    return rows


def focal_vs_ambient(rows: Sequence[dict]) -> dict:
    """Per bank, over the steps where the bank shows both bands (within steps, so the prompt and the state are the
    same): the mean u_token (attention per token: density) of focal and of ambient items and how often focal's is
    higher; the mean u (the item's whole attention mass) of each and how often focal's is higher; and each band's
    mean length in tokens. A focal item is longer than its ambient rendering, so per token it can be read less
    while as a whole it is read more: the two columns answer different questions.

    Every bank shown is listed with its item-steps per band (``focal_items``, ``ambient_items``): a bank whose
    items the gate never shows in both bands at one step (``steps`` 0, the comparison columns None) has no
    within-step answer here; the band-switch re-score (``studies.band_switches``) moves its items instead."""
    by = defaultdict(lambda: defaultdict(lambda: {"F": [], "A": []}))
    for r in rows:
        if r["band"] in ("F", "A") and r["bank"]:
            by[r["bank"]][r["step"], r.get("task_id")][r["band"]].append(r)
    out = {}
    for bank, steps in sorted(by.items()):
        counts = {"focal_items": sum(len(v["F"]) for v in steps.values()),
                  "ambient_items": sum(len(v["A"]) for v in steps.values())}
        both = [(v["F"], v["A"]) for v in steps.values() if v["F"] and v["A"]]
        if not both:
            out[bank] = {"steps": 0, **dict.fromkeys(("focal_u_token", "ambient_u_token", "focal_higher", "focal_u",
                                                      "ambient_u", "focal_u_higher", "focal_tokens",
                                                      "ambient_tokens")), **counts}
            continue

        def per_step(key):
            return [(mean(r[key] for r in f), mean(r[key] for r in a)) for f, a in both]

        tok, mass = per_step("u_token"), per_step("u")
        out[bank] = {"steps": len(both), "focal_u_token": mean(f for f, _ in tok),
                     "ambient_u_token": mean(a for _, a in tok), "focal_higher": mean(f > a for f, a in tok),
                     "focal_u": mean(f for f, _ in mass), "ambient_u": mean(a for _, a in mass),
                     "focal_u_higher": mean(f > a for f, a in mass),
                     "focal_tokens": mean(f for f, _ in per_step("tokens")),
                     "ambient_tokens": mean(a for _, a in per_step("tokens")), **counts}
    return out


def episode_item_utilization(agent, env, task, policy, heads, max_steps: int | None = None) -> tuple[list[dict], object]:
    """Play one episode with the retrieval heads captured; its :func:`item_utilization` rows (each with the
    ``task_id``) and the trajectory."""
    inst = CaptureInstrument(agent, list(heads))
    inst.reset()
    res = agent.run(env, task, policy, instruments=[inst], max_steps=max_steps)
    rows = [r | {"task_id": task.task_id} for r in item_utilization(inst.capture.steps, inst.prompts)]
    return rows, res.trajectory
