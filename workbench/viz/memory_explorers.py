"""Explorers over a run's own records: step through a MemArbiter episode (items, banks, bands, d, eta, gate
transitions, the assembled P_t and, when given, each item's attention) or a proactive-memory episode (bank, tool
calls, reminder or silence, the action agent's choice with and without the reminder).

Everything comes from ``trajectories.jsonl`` (``meta["steps"][t]["arbiter"]`` / ``["proactive"]``), so a run folder
alone is enough. :func:`arbiter_step_view` and :func:`proactive_step_view` are the tables the widgets show
(plain functions, usable and tested without a browser); the widgets only wire a task dropdown and a step slider.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from workbench.agents.counterfactual import follows
from workbench.memory.trajectory import Trajectory

__all__ = ["arbiter_items", "arbiter_step_view", "arbiter_block_text", "arbiter_explorer", "proactive_step_view",
           "proactive_explorer"]

_BANKS = ("goal", "task_state", "constraint", "episodic", "reference")
_TITLES = {"goal": "Goal", "task_state": "Task state", "constraint": "Constraints", "episodic": "Episodic",
           "reference": "Reference"}


def arbiter_items(traj: Trajectory, upto: int | None = None) -> dict[str, dict]:
    """Every item of the episode (of steps 0..``upto``), as last described by then (created or revised)."""
    out: dict[str, dict] = {}
    for s in traj.meta.get("steps", [])[: None if upto is None else upto + 1]:
        for d in s.get("arbiter", {}).get("new_items", []):
            out[d["id"]] = d
    return out


def arbiter_step_view(traj: Trajectory, step: int, utilization: Sequence[dict] = ()):
    """The items at ``step``: bank, gate band, shown band, d of its bank, eta, transition, the text shown, and
    (with ``utilization`` rows of ``workbench.attention.items``) the retrieval heads' per-token attention."""
    import pandas as pd

    steps = traj.meta.get("steps", [])
    if not 0 <= step < len(steps) or "arbiter" not in steps[step]:
        raise ValueError(f"step {step}: not a MemArbiter step of this episode ({len(steps)} steps)")
    rec, items = steps[step]["arbiter"], arbiter_items(traj, upto=step)
    attn = {r["item"]: r["u_token"] for r in utilization if r["step"] == step}
    rows = []
    for item_id, bank, gate, shown, eta, tr in rec["items"]:
        d = items.get(item_id, {})
        text = d.get("focal") if shown == "F" else d.get("ambient") if shown == "A" else ""
        rows.append({"item": item_id, "bank": bank, "gate": gate, "shown": shown,
                     "d": rec["demand"].get(bank, rec["demand"].get("pool")), "eta": eta, "transition": tr,
                     **({"attention/token": attn.get(item_id)} if utilization else {}), "text": text})
    return pd.DataFrame(rows).set_index("item")


def arbiter_block_text(traj: Trajectory, step: int) -> str:
    """P_t as the prompt showed it, rebuilt from the records (bank order, focal first, each band by eta)."""
    view = arbiter_step_view(traj, step)
    lines = ["Working memory:"]
    pooled = "pool" in traj.meta["steps"][step]["arbiter"]["demand"]  # the no-banks ablation: one section
    groups = [("pool", list(_BANKS))] if pooled else [(b, [b]) for b in _BANKS]
    for title, banks in groups:
        rows = view[(view["bank"].isin(banks)) & (view["shown"] != "H")]
        if rows.empty:
            continue
        lines.append(f"{'Memory' if title == 'pool' else _TITLES[title]}:")
        for band in ("F", "A"):
            for _, r in rows[rows["shown"] == band].sort_values("eta", ascending=False, kind="stable").iterrows():
                lines.append(f"- {r['text']}")
    lines.append("(End of working memory.)")
    return "\n".join(lines)


def _explorer(trajs: Sequence[Trajectory], kind: str, render):
    import ipywidgets as w

    trajs = [t for t in trajs if any(kind in s for s in t.meta.get("steps", []))]
    if not trajs:
        raise ValueError(f"no episode with {kind} records to explore (run with --memory {kind}...)")
    task = w.Dropdown(options=[(f"{t.task_id} ({'won' if t.success else 'lost'}, {t.n_steps} steps)", i)
                               for i, t in enumerate(trajs)], description="episode", layout=w.Layout(width="90%"))
    step = w.IntSlider(min=0, max=max(trajs[0].n_steps - 1, 0), value=0, description="step")
    out = w.HTML()

    def show(_=None):
        t = trajs[task.value]
        step.max = max(t.n_steps - 1, 0)
        out.value = render(t, min(step.value, step.max))

    task.observe(show, names="value")
    step.observe(show, names="value")
    show()
    box = w.VBox([task, step, out])
    box.add_class(f"workbench-{kind}-explorer")
    return box


def _arbiter_html(t: Trajectory, k: int, utilization: Sequence[dict]) -> str:
    st = t.meta["steps"][k]["arbiter"]["state"]
    view = arbiter_step_view(t, k, utilization)
    head = (f"<p><b>step {k}</b> · action <code>{escape(t.steps[k].action)}</code> · subgoal "
            f"<i>{escape(st['subgoal'])}</i> · at {escape(str(st['location']))} holding {escape(str(st['holding']))}"
            f"{' · <b>last action failed</b>' if st.get('failed') else ''}</p>")
    return (head + view.to_html(classes="arbiter-items", escape=True)
            + f"<pre class='arbiter-block'>{escape(arbiter_block_text(t, k))}</pre>")


def arbiter_explorer(trajs: Sequence[Trajectory], utilization: dict[str, Sequence[dict]] | None = None):
    """A widget over MemArbiter episodes (``load_run(folder)[0]``); ``utilization``: task id -> item rows."""
    return _explorer(trajs, "arbiter", lambda t, k: _arbiter_html(t, k, (utilization or {}).get(t.task_id, ())))


def proactive_step_view(traj: Trajectory, step: int) -> dict:
    """The memory agent at ``step``: trigger, tool calls applied, errors, reminder or silence, the bank as it
    stood after phase 1 (replayed from the created entries and calls), and what the reminder did."""
    steps = traj.meta.get("steps", [])
    if not 0 <= step < len(steps) or "proactive" not in steps[step]:
        raise ValueError(f"step {step}: not a proactive step of this episode ({len(steps)} steps)")
    bank: dict[str, str] = {}
    for s in steps[: step + 1]:
        for c in s["proactive"].get("calls", []):
            if c["name"] in ("memory_save_knowledge", "memory_save_procedural"):
                bank[c["arguments"]["id"]] = c["arguments"]["content"]
            elif c["name"] == "memory_delete":
                bank.pop(c["arguments"]["id"], None)
    rec = steps[step]["proactive"]
    return {"trigger": rec.get("trigger"), "calls": rec.get("calls", []), "errors": rec.get("errors", []),
            "reminder": rec.get("reminder"), "silent": rec.get("silent"), "bank": bank,
            "action": traj.steps[step].action, "effect": _judged(steps[step], traj.steps[step].action)}


def _judged(rec: dict, action: str) -> dict | None:
    """A step's reminder re-score, ``followed`` judged by the current rule (``agents.counterfactual.follows``)."""
    eff = rec.get("reminder_effect")
    return None if eff is None else {**eff, "followed": follows(rec.get("reminder") or "", action,
                                                                eff.get("mentions") or [])}


def _proactive_html(t: Trajectory, k: int) -> str:
    v = proactive_step_view(t, k)
    said = (f"<p class='reminder'><b>Reminder:</b> {escape(v['reminder'])}</p>" if v["reminder"] else
            "<p class='silence'><b>Silent</b> (explicit null)</p>" if v["silent"] else "<p>not triggered</p>")
    eff = v["effect"]
    effect = ""
    if eff:
        scores = (f"p(<code>{escape(v['action'])}</code>) with the reminder {eff['p_action']:.3f}, without "
                  f"{eff['p_action_without']:.3f}; " if "p_action" in eff else "")
        effect = (f"<p>{scores}without it the agent would {'write' if eff.get('written') else 'choose'} "
                  f"<code>{escape(eff['action_without'])}</code>{' (changed)' if eff['changed'] else ''}; "
                  f"followed: {eff['followed']}</p>")
    calls = "".join(f"<li><code>{escape(c['name'])}</code> {escape(str(c['arguments']))}</li>" for c in v["calls"])
    bank = "".join(f"<li>[{escape(i)}] {escape(c)}</li>" for i, c in v["bank"].items())
    return (f"<p><b>step {k}</b> · trigger {v['trigger']} · action <code>{escape(v['action'])}</code></p>{said}{effect}"
            f"<p>tool calls:</p><ul>{calls or '<li>none</li>'}</ul><p>bank:</p><ul class='bank'>{bank or '<li>empty</li>'}</ul>")


def proactive_explorer(trajs: Sequence[Trajectory]):
    """A widget over proactive-memory episodes (``load_run(folder)[0]``)."""
    return _explorer(trajs, "proactive", _proactive_html)
