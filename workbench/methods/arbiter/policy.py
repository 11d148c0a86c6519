"""The MemArbiter memory policy: per step, parse the state, write candidates into the banks, compute d and
eta, run the gate, assemble P_t under the budget, and record all of it.

One step t (``memory(t, history)``), with o_t the observation the agent now sees:

    s_t  = state parser(goal, history, o_t)                 LLM stage ``arbiter_state_parser`` (any backend)
    W_t  = candidate writer(goal, t, a_{t-1}, o_t, s_t)     LLM stage ``arbiter_writer``
    M_t  = store.update(M_{t-1}, W_t)                       validity, dedup, the banks' rules (banks.py)
    d, eta                                                  signals.py
    z_t  = gate(z_{t-1}, d, eta, h)                          gate.py
    P_t  = assemble(items with z in {F, A}, budget)         assembly.py

A reply that does not validate (unknown bank, missing field: ``LLMOutputError`` after the one repair retry) or
breaks a validity rule (an over-long item: ``InvalidWriteError``) is logged in the step's record and the step
goes on with the previous banks (or the previous parsed state); a backend that cannot be reached still raises.

What a run records per step (``Trajectory.meta["steps"][t]``):

    "wm":      {"o200k", "budget", "bank_tokens", "shown"}    (every working-memory policy)
    "arbiter": {"state", "demand", "new_items", "items", "cut", "update", "errors"}

``items`` holds one row ``[id, bank, gate band, shown band, eta, transition]`` per item that is active or
changed state (``ROW_FIELDS``); ``new_items`` the full description of the items created or revised (a repeated
episodic event) at this step, so a run folder alone rebuilds every step's memory (the explorer does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.agents.policy import MemoryBlock
from workbench.envs.alfworld_text import is_failure, normalize
from workbench.envs.benchmarks import failure_check
from workbench.envs.base import Task
from workbench.llm.errors import LLMOutputError
from workbench.llm.ledger import ledger_records, reject_last
from workbench.llm.registry import OFFLINE_BACKEND, get_backend
from workbench.llm.stages import run_stage
from workbench.memory.trajectory import Step
from workbench.methods.arbiter.assembly import Candidate, assemble
from workbench.methods.arbiter.banks import InvalidWriteError
from workbench.methods.arbiter.gate import H, transition
from workbench.methods.arbiter.signals import Context
from workbench.methods.arbiter.stage_types import (
    ParsedState,
    StateParserInput,
    WriterInput,
)
from workbench.methods.arbiter.variants import get_variant

__all__ = ["ArbiterPolicy", "ROW_FIELDS", "DEFAULT_BUDGET"]

ROW_FIELDS = ("id", "bank", "gate", "shown", "eta", "transition")
DEFAULT_BUDGET = 500



class ArbiterPolicy:
    """MemArbiter (or one of its ablations) behind the MemoryPolicy seam.

    Args:
        budget: P_t's budget in o200k tokens (500 and 750 in the paper).
        variant: ``arbiter`` or an ablation (``no-banks``, ``no-signals``, ``no-gate``), see variants.py.
        backend: the LLM backend of the state parser and candidate writer (default: the offline ALFWorld
            algorithms, ``offline-alfworld``).
    """

    def __init__(self, budget: int = DEFAULT_BUDGET, variant: str = "arbiter", backend: Any = None) -> None:
        if budget <= 0:
            raise ValueError(f"budget {budget}: expected a positive number of o200k tokens")
        self.budget = budget
        self.variant = get_variant(variant)
        self.name = "arbiter" if variant == "arbiter" else f"arbiter/{variant}"
        self.backend = backend if backend is not None else get_backend(OFFLINE_BACKEND)
        self.store = self.variant.store()
        self.signals = self.variant.signals()
        self.gate = self.variant.gate()
        self.allocation = self.variant.allocation()
        self._benchmark = "alfworld"  # the words of its stages' prompts: the episode's task's (begin)
        self._is_failure = is_failure
        self.begin_state("", "")

    # -- episode state -----------------------------------------------------------------------------------
    def begin_state(self, goal: str, room: str) -> None:
        self.store.reset()
        self._goal, self._obs = goal, room
        self._bands: dict[str, str] = {}
        self._hist: dict[str, tuple[float, ...]] = {}
        self._state: ParsedState | None = None
        self._prev_action: str | None = None
        self._actions: list[str] = []
        self._failed = False
        self._last_block: MemoryBlock | None = None
        self._last_step: int | None = None
        self._step_candidates: list[Candidate] = []
        self._ledger: list = []

    def begin(self, task: Task, goal: str, room: str) -> None:
        self._benchmark = getattr(task, "benchmark", "alfworld")  # the words of its stages' prompts
        self._is_failure = failure_check(self._benchmark)  # how it says an action did nothing
        self.begin_state(goal, room)

    def observe(self, step: Step, next_observation: str) -> None:
        self._prev_action = step.action
        self._actions.append(normalize(step.action))
        self._failed = self._is_failure(next_observation)
        self._obs = next_observation
        self._last_step = None

    # -- one decision ------------------------------------------------------------------------------------
    def memory(self, step: int, history: list[Step]) -> MemoryBlock:
        if self._last_step == step and self._last_block is not None:
            return self._last_block  # asked twice at one state (e.g. re-scoring): same block, no second write
        errors: list[dict] = []
        self._ledger = []
        prev_subgoal = self._state.subgoal if self._state else None
        state = self._parse(history, errors)
        log = self._write(step, state, errors)
        ctx = Context(step=step, state=state, previous_subgoal=prev_subgoal, previous_action=self._prev_action,
                      failed=self._failed and self._prev_action is not None,
                      repeated=bool(self._actions) and self._actions[-1] in self._actions[:-1])
        block, record = self._arbitrate(ctx, log, errors)
        self._state = state
        self._last_block, self._last_step = block, step
        return block

    def _parse(self, history: list[Step], errors: list[dict]) -> ParsedState:
        try:
            return run_stage(self.backend, "arbiter_state_parser",
                             StateParserInput(goal=self._goal, observation=self._obs, history=tuple(history)),
                             ledger=self._ledger, benchmark=self._benchmark).value
        except LLMOutputError as e:
            errors.append({"stage": "arbiter_state_parser", "error": type(e).__name__, "reason": e.reason})
            return self._state or ParsedState(subgoal=f"work towards: {self._goal}")

    def _write(self, step: int, state: ParsedState, errors: list[dict]):
        try:
            writes = run_stage(self.backend, "arbiter_writer",
                               WriterInput(goal=self._goal, step=step, observation=self._obs,
                                           previous_action=self._prev_action, state=state,
                                           memory=tuple(f"[{i.id}] {i.bank}: {i.focal}" for i in self.store.active())
                                           ), ledger=self._ledger, benchmark=self._benchmark).value
            outcome = (self._prev_action, self._failed) if self._prev_action is not None else None
            return self.store.update(writes.items, step, state, outcome)
        except LLMOutputError as e:
            errors.append({"stage": "arbiter_writer", "error": type(e).__name__, "reason": e.reason})
        except InvalidWriteError as e:
            reject_last(self._ledger, "arbiter_writer", str(e))
            errors.append({"stage": "arbiter_writer", "error": type(e).__name__, "reason": str(e),
                           "problems": [list(p) for p in e.problems]})
        return None

    def _arbitrate(self, ctx: Context, log, errors: list[dict]) -> tuple[MemoryBlock, dict]:
        items = self.store.items()
        groups: dict[str, list] = {g: [] for g in self.store.sections()}
        for it in items:
            if it.active:
                groups[self.store.group(it)].append(it)
        demand = self.signals.demand(groups, ctx)
        rows, cands = [], []
        for order, it in enumerate(items):
            group, role = self.store.group(it), self.store.role(it)
            eta = self.signals.relevance(it, ctx, role) if it.active else 0.0
            d = demand.get(group, 0.0)
            s = d * eta
            prev = self._bands.get(it.id)
            z = self.gate.decide(prev, s, d, self._hist.get(it.id, ()), role, it.active)
            self._bands[it.id] = z
            self._hist[it.id] = (*self._hist.get(it.id, ()), s)[-self._history_len():]
            if it.active:  # hidden ones too: a counterfactual may bring one back (H -> F)
                cands.append(Candidate(it, group, z, eta, s + (1.0 if role == "protected" else 0.0), order))
            rows.append((it, z, eta, transition(prev, z)))
        self._step_candidates = cands
        block = assemble(cands, self.store.sections(), self.budget, self.allocation)
        new_ids = set(log.added) | set(log.revised) if log is not None else set()
        record = {
            "wm": {"o200k": block.o200k, "budget": self.budget, "bank_tokens": block.bank_tokens,
                   "shown": len(block.shown)},
            "arbiter": {
                "state": {"subgoal": ctx.state.subgoal, "location": ctx.state.location, "holding": ctx.state.holding,
                          "needs": list(ctx.state.information_needs), "failed": ctx.failed, "repeated": ctx.repeated},
                "demand": {k: round(v, 4) for k, v in demand.items()},
                "new_items": [it.describe() for it in items if it.id in new_ids],
                "items": [[it.id, it.bank, z, block.shown.get(it.id, H), round(eta, 4), tr] for it, z, eta, tr in rows
                          if it.active or tr != "H->H"],
                "cut": list(block.cut),
                "update": log.as_dict() if log is not None else {},
                "errors": errors,
            },
        }
        if calls := ledger_records(self._ledger):
            record["arbiter"]["stage_calls"] = calls
        mb = MemoryBlock(layout="working_memory", working_memory=block.pieces, record=record,
                         meta={"variant": self.variant.name, "budget": self.budget})
        return mb, record

    @property
    def step_item_ids(self) -> set[str]:
        """The active items of the step just decided (what :meth:`counterfactual` may move)."""
        return {c.item.id for c in self._step_candidates}

    def reassemble(self, bands: Mapping[str, str]) -> MemoryBlock:
        """The re-assembly behind :class:`workbench.agents.edits.SetBand` edits (the
        :class:`~workbench.agents.edits.Reassembles` protocol): :meth:`counterfactual`."""
        return self.counterfactual(dict(bands))

    def counterfactual(self, bands: dict[str, str]) -> MemoryBlock:
        """The memory block of the step just decided with some items' bands replaced (``{item id: F|A|H}``),
        assembled under the same budget; the policy's state is untouched (a re-score, not a new step)."""
        from dataclasses import replace as _replace

        if self._last_block is None:
            raise RuntimeError("counterfactual() needs a decided step: call memory() first")
        unknown = sorted(set(bands) - {c.item.id for c in self._step_candidates})
        if unknown:
            raise KeyError(f"no active item {unknown[0]} at this step")
        cands = [_replace(c, band=bands.get(c.item.id, c.band)) for c in self._step_candidates]
        block = assemble(cands, self.store.sections(), self.budget, self.allocation)
        return MemoryBlock(layout="working_memory", working_memory=block.pieces,
                           record={"wm": {"o200k": block.o200k, "budget": self.budget}}, meta={"counterfactual": bands})

    def _history_len(self) -> int:
        cfg = getattr(self.gate, "cfg", None)
        return getattr(cfg, "history", 4)
