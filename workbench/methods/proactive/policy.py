"""The proactive memory agent behind the MemoryPolicy seam: a second agent beside the unchanged action agent.

At a triggered step t (``triggers.py``) the memory agent sees the goal, the recent window of W steps, what the
action agent sees now, and its bank (``bank.py``; the BM25 top 50 once it holds more than 50 entries):

    phase 1   calls = memory agent(goal, window, o_t, bank)      tool stage ``proactive_update``
              bank  = execute calls in order                     each call whole or not at all; bad ones logged
    phase 2   r_t   = memory agent(goal, window, o_t, bank)      stage ``proactive_intervene``: text or null

A non-null r_t is transient context for the next action call only: the ReAct prompt (full history, the action
agent's own layout) gets one ``Reminder: r_t`` line after the history at step t and none at t + 1 unless the
memory agent speaks again. A null is an explicit silence. Both phases run through any LLM backend
(``offline-alfworld``, the deterministic ALFWorld algorithm, by default; ``openai``; ``local``).

The paper's ablations are variants of one registry (``variants.py``): what manages the bank, and what speaks.

What a run records per step (``Trajectory.meta["steps"][t]["proactive"]``): ``trigger`` (why the memory agent
ran, or null), ``calls`` (applied tool calls), ``errors`` (rejected replies and calls), ``reminder`` (text or
null), ``silent``, ``n_calls`` (memory-agent requests this step), ``latency_ms`` (their wall time; the only
field that differs between two runs of the same episode, with ``stage_calls``' ``ms``), ``bank`` (entry count),
``new_entries`` and ``stage_calls`` (each request's fate, :mod:`workbench.llm.ledger`).
"""

from __future__ import annotations

import time
from typing import Any

from workbench.agents.policy import MemoryBlock
from workbench.envs.alfworld_text import normalize, parse_action
from workbench.envs.benchmarks import failure_check
from workbench.envs.base import Task
from workbench.llm.errors import LLMOutputError
from workbench.llm.ledger import ledger_records, reject_last
from workbench.llm.registry import OFFLINE_BACKEND, get_backend
from workbench.llm.stages import run_stage
from workbench.memory.tokens import count_o200k
from workbench.memory.trajectory import Step
from workbench.methods.proactive.bank import Bank
from workbench.methods.proactive.stage_types import BankView, ProactiveInput
from workbench.methods.proactive.triggers import Trigger
from workbench.methods.proactive.variants import get_variant

__all__ = ["ProactivePolicy", "WINDOW", "LEGACY_WINDOW"]

#: Steps of recent trajectory the memory agent reads: the authors' public configuration
#: (yifannnwu/proactive-memory-agent, ``sliding_window_size: 8`` in configs/memory_terminalbench.yaml and the default
#: of src/memory_agent/config.py; the paper gives no number).
WINDOW = 8
#: What runs recorded before the window was an option were played with (ours, before issue 47 set the authors' 8).
LEGACY_WINDOW = 10



class ProactivePolicy:
    """The proactive memory agent (or one of its ablations).

    Args:
        variant: ``proactive`` or an ablation (``proactive-passive``, ``proactive-always``, ``proactive-advisor``,
            ``proactive-retrieval``).
        interval: run the memory agent at step 0 and every ``interval`` steps.
        events: extra event triggers (``failed``, ``repeated``, ``new-location``).
        backend: the memory agent's LLM backend (default: the offline ALFWorld algorithm).
        window: how many recent steps the memory agent reads.
    """

    def __init__(self, variant: str = "proactive", interval: int = 1, events: tuple[str, ...] = (),
                 backend: Any = None, window: int = WINDOW) -> None:
        self.variant = get_variant(variant)
        self.name = variant
        self.trigger = Trigger(interval, tuple(events))
        self.backend = backend if backend is not None else get_backend(OFFLINE_BACKEND)
        self.window = window
        self._ledger: list = []
        self.begin(None, "", "")  # type: ignore[arg-type]

    def begin(self, task: Task, goal: str, room: str) -> None:
        self._benchmark = getattr(task, "benchmark", "alfworld")  # the words of its stages' prompts
        self._is_failure = failure_check(self._benchmark)  # how it says an action did nothing (the failed trigger)
        self.bank = Bank()
        self._goal, self._obs = goal, room
        self._steps: list[Step] = []
        self._locations: set[str] = set()
        self._last: tuple[int, MemoryBlock] | None = None

    def observe(self, step: Step, next_observation: str) -> None:
        self._steps.append(step)
        self._obs = next_observation

    # -- one decision ------------------------------------------------------------------------------------
    def payload(self, step: int, bank: BankView) -> ProactiveInput:
        return ProactiveInput(goal=self._goal, step=step, window=tuple(self._steps[-self.window:]),
                              current_observation=self._obs, bank=bank)

    def query(self) -> str:
        """What the BM25 prefilter ranks bank entries against: goal, last action, current observation."""
        last = self._steps[-1].action if self._steps else ""
        return f"{self._goal} {last} {self._obs}"

    def memory(self, step: int, history: list[Step]) -> MemoryBlock:
        if self._last is not None and self._last[0] == step:
            return self._last[1]
        acts = [normalize(s.action) for s in self._steps]
        failed = bool(acts) and self._is_failure(self._obs)
        repeated = bool(acts) and acts[-1] in acts[:-1]
        loc = None
        if acts:
            a = parse_action(acts[-1])
            loc = a.x if a.template == "go to X" and not failed else None
        new_location = loc is not None and loc not in self._locations
        if loc:
            self._locations.add(loc)
        why = self.trigger.fires(step, failed=failed, repeated=repeated, new_location=new_location)
        rec: dict = {"trigger": why, "calls": [], "errors": [], "reminder": None, "silent": False,
                     "n_calls": 0, "latency_ms": 0.0}
        self._ledger: list = []
        before = set(self.bank.entries)
        reminder, label = None, "Reminder"
        if why is not None:
            if self.variant.manages:
                self._phase1(step, rec)
            reminder, label = self.variant.speaker.speak(self, step, rec)
        elif self.variant.speaker.every_step:
            reminder, label = self.variant.speaker.speak(self, step, rec)
        rec["reminder"] = reminder
        rec["silent"] = why is not None and reminder is None and not rec.get("phase2_error")
        if reminder:
            rec["reminder_o200k"] = count_o200k(reminder)
        rec["bank"] = len(self.bank)
        rec["new_entries"] = [e.describe() for k, e in self.bank.entries.items() if k not in before]
        rec["latency_ms"] = round(rec["latency_ms"], 1)
        if calls := ledger_records(self._ledger):
            rec["stage_calls"] = calls
        block = MemoryBlock(reminder=reminder, reminder_label=label, record={"proactive": rec},
                            meta={"variant": self.name})
        self._last = (step, block)
        return block

    def timed_stage(self, stage: str, payload, rec: dict):
        t0 = time.perf_counter()
        try:
            return run_stage(self.backend, stage, payload, ledger=self._ledger, benchmark=self._benchmark).value
        finally:
            rec["n_calls"] += 1
            rec["latency_ms"] += (time.perf_counter() - t0) * 1000

    def _phase1(self, step: int, rec: dict) -> None:
        view, _ = self.bank.view(self.query())
        try:
            calls = self.timed_stage("proactive_update", self.payload(step, view), rec)
        except LLMOutputError as e:
            rec["errors"].append({"phase": 1, "error": type(e).__name__, "reason": e.reason})
            rec["phase1_error"] = True  # the bank stays as it was; no tool-call target for the SFT export
            return
        applied, errors = self.bank.apply(calls, step)
        if calls and not applied:  # every call refused by the bank: the reply was not used
            reject_last(self._ledger, "proactive_update", f"all {len(calls)} tool call(s) refused by the bank")
        rec["calls"] = applied
        rec["errors"] += [{"phase": 1, "error": type(e).__name__, "call": e.index, "tool": e.call.name,
                           "reason": e.reason} for e in errors]
