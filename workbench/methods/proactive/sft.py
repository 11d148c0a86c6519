"""The memory agent's records as a supervised fine-tuning set: the paper's open-weight path (distil a prompted
memory agent into an open model).

Every triggered step of a proactive run gives two chat examples, in the conversational tool-calling format of
Hugging Face chat templates (what TRL's ``SFTTrainer`` takes: ``messages`` plus ``tools``):

- **phase 1**: the ``proactive_update`` prompt exactly as the memory agent received it, then an assistant turn
  whose ``tool_calls`` are the calls that were applied (rejected calls are not imitated), with the four tools'
  JSON schemas in ``tools``;
- **phase 2**: the ``proactive_intervene`` prompt, then the assistant's JSON reply ``{"reminder": ...}`` or
  ``{"reminder": null}`` (silence is a target too).

The prompts are rebuilt from the run's records: the window and the current observation from the trajectory, the
bank by replaying the applied calls in order (the status included: the memory agent sees it). A run whose bank
outgrew the 50-entry prefilter is rebuilt unfiltered, and its examples say ``"prefiltered": true``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from workbench.llm.protocol import ToolCall
from workbench.llm.stages import render_stage
from workbench.memory.trajectory import Trajectory, atomic_write_text
from workbench.methods.proactive.bank import PREFILTER_AT, Bank
from workbench.methods.proactive.policy import WINDOW
from workbench.methods.proactive.stage_types import PROACTIVE_TOOLS, ProactiveInput

__all__ = ["sft_examples", "export_sft"]


def _messages(stage: str, payload: ProactiveInput) -> list[dict]:
    msgs, _ = render_stage(stage, payload)
    return [{"role": m.role, "content": m.content} for m in msgs]


def _checked_steps(traj: Trajectory) -> list:
    """The episode's per-step records (``meta.steps``), checked against its steps.

    Raises:
        ValueError: naming the field (``meta.steps[3].proactive.calls``) and what is wrong.
    """
    steps = traj.meta.get("steps", [])
    if not isinstance(steps, list):
        raise ValueError(f"field 'meta.steps': a JSON {type(steps).__name__}, where a list of step records belongs")
    if len(steps) > traj.n_steps:
        raise ValueError(f"field 'meta.steps': {len(steps)} step records, but the episode has {traj.n_steps} steps")
    for k, s in enumerate(steps):
        rec = s.get("proactive") if isinstance(s, dict) else s
        if s is not None and not isinstance(s, dict):
            raise ValueError(f"field 'meta.steps.{k}': a JSON {type(s).__name__}, where a step record belongs")
        if rec is None:
            continue
        if not isinstance(rec, dict):
            raise ValueError(f"field 'meta.steps.{k}.proactive': a JSON {type(rec).__name__}, where an object belongs")
        calls = rec.get("calls", [])
        if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                                  and "arguments" in c for c in calls):
            raise ValueError(f"field 'meta.steps.{k}.proactive.calls': expected a list of {{name, arguments}}")
        if not isinstance(rec.get("reminder"), str | None):
            raise ValueError(f"field 'meta.steps.{k}.proactive.reminder': expected a string or null")
    return steps


def sft_examples(traj: Trajectory, window: int = WINDOW) -> list[dict]:
    """The phase-1 and phase-2 examples of one episode (module docstring).

    Raises:
        ValueError: the episode's records do not fit together (the message names the field).
    """
    steps = _checked_steps(traj)
    tools = [t.to_openai() for t in PROACTIVE_TOOLS]
    bank = Bank()
    out = []
    for k, rec in enumerate(s.get("proactive") for s in steps):
        if not rec or not rec.get("trigger"):
            continue
        current = traj.steps[k].observation if k else traj.initial_observation
        history = traj.steps[max(0, k - window):k]

        def payload() -> ProactiveInput:
            view, _ = bank.view()
            return ProactiveInput(goal=traj.goal, step=k, window=tuple(history), current_observation=current,
                                  bank=view)

        meta = {"task_id": traj.task_id, "step": k, "policy": traj.meta.get("memory_policy"),
                "prefiltered": len(bank) > PREFILTER_AT}
        calls = [ToolCall(name=c["name"], arguments=c["arguments"]) for c in rec.get("calls", [])]
        if traj.meta.get("memory_policy") in ("proactive", "proactive-always", "proactive-passive") and not rec.get(
                "phase1_error"):  # an unusable reply is no target
            msgs = _messages("proactive_update", payload())
            msgs.append({"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]})
            out.append({"messages": msgs, "tools": tools, "phase": 1, **meta})
        bank.apply(calls, k)
        if traj.meta.get("memory_policy") in ("proactive", "proactive-always", "proactive-advisor") and not rec.get(
                "phase2_error"):
            p2 = payload()
            advisor = traj.meta.get("memory_policy") == "proactive-advisor"
            msgs = _messages("proactive_advise" if advisor else "proactive_intervene", p2)
            said = None if rec.get("fallback") else rec.get("reminder")  # always-on's fallback is not the agent's
            msgs.append({"role": "assistant", "content": json.dumps({"reminder": said})})
            out.append({"messages": msgs, "phase": 2, **meta})
    return out


def export_sft(trajs: Iterable[Trajectory], path: str | Path, window: int = WINDOW) -> dict:
    """Write every episode's examples to ``path`` (JSONL, atomic); returns counts by phase. ``window``: the one
    the episodes were played with (the run's ``window``), so the prompts are those the memory agent read."""
    rows = [ex for t in trajs for ex in sft_examples(t, window)]
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
    return {"examples": len(rows), "phase_1": sum(r["phase"] == 1 for r in rows),
            "phase_2": sum(r["phase"] == 2 for r in rows), "silent": sum(r["phase"] == 2 and
            json.loads(r["messages"][-1]["content"])["reminder"] is None for r in rows)}
