"""Where MemArbiter's items live between steps: five functional banks, or one pool (the no-banks ablation).

Every candidate write goes through validity checks first (:func:`check_write`); a write that fails them is
rejected whole with :class:`InvalidWriteError` and the banks stay exactly as they were (the step goes on with
the previous memory). A valid write is then deduplicated and applied with its bank's update rule (paper
section 3.1):

- **Goal** adds; it is protected: it stays active until the task is complete.
- **Task State** keeps one live snapshot: a new one supersedes the last (an identical one only refreshes it).
- **Constraint** merges duplicates (refreshing them), and revises: a constraint learnt from a failed action is
  invalidated when that same action later succeeds; an ``op="revise"`` write supersedes the constraints about
  the same entities. Task constraints are protected until the task is complete.
- **Episodic** appends action-outcome events in step order, deduplicated: an event that repeats an earlier one
  (the same action with the same outcome, a loop) is merged into it, which lists both steps and counts the
  repeats (``Steps 3, 9: 'go to desk 1' -> ...``, ambient ``go to desk 1: saw ... (x2)``) and is refreshed.
- **Reference** consolidates duplicates and resolves conflicts by newer evidence: two facts conflict when they
  are about the same subject (first entity) with the same arity (``apple 1 @ countertop 1`` vs ``apple 1 @
  fridge 1``; ``fridge 1: open`` vs ``fridge 1: closed``), and the newer wins; a location fact about the object
  the agent now holds is superseded by the holding.

Items are never deleted: superseded, completed and invalidated items keep their record (the explorer and the
episodic-share metric read them), they just never show again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from workbench.memory.tokens import count_o200k
from workbench.methods.arbiter.ambient import ambient_form
from workbench.methods.arbiter.items import (
    BANK_ORDER,
    BANK_PREFIX,
    PROTECTED_BANKS,
    TASK_SCOPE,
    Item,
    norm_text,
)
from workbench.methods.arbiter.stage_types import CandidateItem, ParsedState

__all__ = ["InvalidWriteError", "check_write", "UpdateLog", "Store", "FunctionalBanks", "SinglePool",
           "MAX_FOCAL_TOKENS", "MAX_ENTITIES", "TASK_DONE", "situation"]

MAX_FOCAL_TOKENS = 256  # o200k tokens: one fact (the room inventory, the longest, lists up to ~40 receptacles)
MAX_ENTITIES = 64
TASK_DONE = "the task is complete"  # the state parser's subgoal once every subgoal is done


class InvalidWriteError(ValueError):
    """A candidate write broke a validity rule; nothing of it was applied.

    Attributes:
        problems: ``(item index, field, what is wrong)`` for every problem found.
    """

    def __init__(self, problems: list[tuple[int, str, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__("candidate write rejected: " + "; ".join(f"items[{i}].{f}: {m}" for i, f, m in problems))


def check_write(candidates: Sequence[CandidateItem]) -> None:
    """Validity checks on a whole write (the schema already checked banks and required fields).

    Raises:
        InvalidWriteError: an over-long or blank item, or too many entities.
    """
    problems: list[tuple[int, str, str]] = []
    for i, c in enumerate(candidates):
        n = count_o200k(c.focal)
        if n > MAX_FOCAL_TOKENS:
            problems.append((i, "focal", f"{n} o200k tokens, over the limit of {MAX_FOCAL_TOKENS} for one atomic item"))
        if len(c.entities) > MAX_ENTITIES:
            problems.append((i, "entities", f"{len(c.entities)} entities, over the limit of {MAX_ENTITIES}"))
        if not c.focal.strip():
            problems.append((i, "focal", "blank text"))
    if problems:
        raise InvalidWriteError(problems)


_EVENT = re.compile(r"^steps?\s+(\d+(?:\s*,\s*\d+)*)\s*:\s*(.+)$", re.I | re.S)


def event_parts(focal: str) -> tuple[list[str], str]:
    """An episodic event's step labels and its body: ``Step 3: 'a' -> o.`` -> (["3"], "'a' -> o."); a text
    without a step label is all body."""
    m = _EVENT.match(focal.strip())
    if m is None:
        return [], focal.strip()
    return [x.strip() for x in m.group(1).split(",")], m.group(2).strip()


def situation(state: ParsedState | None) -> str:
    """The scope string of the agent's current situation (where a failed action failed)."""
    if state is None:
        return "at=?|holding=?"
    return f"at={state.location or 'start'}|holding={state.holding or 'nothing'}"


@dataclass
class UpdateLog:
    """What one write did: ids added, merged into (refreshed), superseded, completed, invalidated."""

    added: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    revised: list[str] = field(default_factory=list)  # merged items whose content changed (a repeated event)
    superseded: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    invalidated: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v}


class Store(Protocol):
    """The organisation of items: five banks or one pool."""

    name: str

    def reset(self) -> None: ...

    def update(self, candidates: Sequence[CandidateItem], step: int, state: ParsedState | None,
               outcome: tuple[str, bool] | None = None) -> UpdateLog: ...

    def items(self) -> list[Item]: ...

    def group(self, item: Item) -> str: ...

    def role(self, item: Item) -> str: ...

    def sections(self) -> tuple[str, ...]: ...


class _Items:
    """Item storage shared by both organisations: ordered by creation, ids ``<bank prefix><n>``."""

    name = "items"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._items: dict[str, Item] = {}
        self._counters: dict[str, int] = {}

    def items(self) -> list[Item]:
        return list(self._items.values())

    def active(self, bank: str | None = None) -> list[Item]:
        return [i for i in self._items.values() if i.active and (bank is None or i.bank == bank)]

    def _new(self, c: CandidateItem, step: int, scope: str, about: str = "") -> Item:
        prefix = BANK_PREFIX[c.bank]
        self._counters[prefix] = self._counters.get(prefix, 0) + 1
        entities = tuple(e for e in c.entities if e)
        item = Item(id=f"{prefix}{self._counters[prefix]}", bank=c.bank, focal=c.focal.strip(),
                    ambient=ambient_form(c.bank, c.focal.strip(), entities, about), entities=entities, scope=scope,
                    source_step=step, source=c.source, last_seen=step, about=about)
        self._items[item.id] = item
        return item

    def _set(self, item_id: str, **changes) -> None:
        self._items[item_id] = replace(self._items[item_id], **changes)

    def _duplicate(self, c: CandidateItem, bank: str | None) -> Item | None:
        key = norm_text(c.focal)
        return next((i for i in self.active(bank) if i.key == key), None)


class FunctionalBanks(_Items):
    """Five banks with their update rules (module docstring)."""

    name = "banks"

    def group(self, item: Item) -> str:
        return item.bank

    def role(self, item: Item) -> str:
        """``protected`` (goal, task constraints), ``situational`` (a constraint scoped to where it was learnt),
        ``snapshot`` (task state) or ``dynamic`` (episodic, reference): the gate's role rules key on this."""
        if item.bank == "constraint" and item.scope != TASK_SCOPE:
            return "situational"
        if item.bank in PROTECTED_BANKS:
            return "protected"
        return "snapshot" if item.bank == "task_state" else "dynamic"

    def sections(self) -> tuple[str, ...]:
        return BANK_ORDER

    def update(self, candidates: Sequence[CandidateItem], step: int, state: ParsedState | None,
               outcome: tuple[str, bool] | None = None) -> UpdateLog:
        check_write(candidates)
        log = UpdateLog()
        if outcome is not None and not outcome[1]:  # the previous action worked: what said it does not is wrong
            done = norm_text(outcome[0])
            for i in self.active("constraint"):
                if i.about and i.about == done:
                    self._set(i.id, status="invalidated")
                    log.invalidated.append(i.id)
        for c in candidates:
            getattr(self, f"_write_{c.bank}")(c, step, state, outcome, log)
        if state is not None and state.subgoal.strip().lower() == TASK_DONE:
            for i in self.active():
                if i.bank in PROTECTED_BANKS:
                    self._set(i.id, status="completed")
                    log.completed.append(i.id)
        if state is not None and state.holding:
            held = norm_text(state.holding)
            for i in self.active("reference"):
                if len(i.entities) == 2 and norm_text(i.entities[0]) == held:
                    self._set(i.id, status="superseded")
                    log.superseded.append(i.id)
        return log

    def _merge_or_add(self, c: CandidateItem, step: int, log: UpdateLog, scope: str = TASK_SCOPE,
                      about: str = "") -> Item | None:
        dup = self._duplicate(c, c.bank)
        if dup is not None:
            self._set(dup.id, last_seen=step, scope=scope if dup.scope != TASK_SCOPE else dup.scope)
            log.merged.append(dup.id)
            return None
        item = self._new(c, step, scope, about)
        log.added.append(item.id)
        return item

    def _write_goal(self, c, step, state, outcome, log) -> None:
        if c.op == "revise":
            for i in self.active("goal"):
                self._set(i.id, status="superseded")
                log.superseded.append(i.id)
        self._merge_or_add(c, step, log)

    def _write_task_state(self, c, step, state, outcome, log) -> None:
        live = self.active("task_state")
        if live and live[-1].key == norm_text(c.focal):
            self._set(live[-1].id, last_seen=step)
            log.merged.append(live[-1].id)
            return
        for i in live:
            self._set(i.id, status="superseded")
            log.superseded.append(i.id)
        item = self._new(c, step, TASK_SCOPE)
        log.added.append(item.id)

    def _write_constraint(self, c, step, state, outcome, log) -> None:
        learnt = c.source == "action" and outcome is not None
        scope = situation(state) if learnt else TASK_SCOPE
        if c.op == "revise":
            ents = {norm_text(e) for e in c.entities}
            for i in self.active("constraint"):
                if ents and {norm_text(e) for e in i.entities} == ents:
                    self._set(i.id, status="superseded")
                    log.superseded.append(i.id)
        self._merge_or_add(c, step, log, scope=scope, about=norm_text(outcome[0]) if learnt else "")

    def _write_episodic(self, c, step, state, outcome, log) -> None:
        steps, body = event_parts(c.focal)
        dup = next((i for i in self.active("episodic") if norm_text(event_parts(i.focal)[1]) == norm_text(body)),
                   None)
        if dup is not None:
            seen = event_parts(dup.focal)[0] + steps
            focal = f"Steps {', '.join(seen)}: {body}" if seen else dup.focal
            n = dup.repeats + 1
            self._set(dup.id, focal=focal, repeats=n, last_seen=step,
                      ambient=ambient_form("episodic", focal, dup.entities, dup.about) + f" (x{n})")
            log.merged.append(dup.id)
            log.revised.append(dup.id)
            return
        item = self._new(c, step, TASK_SCOPE, about=norm_text(outcome[0]) if outcome else "")
        log.added.append(item.id)

    def _write_reference(self, c, step, state, outcome, log) -> None:
        if self._duplicate(c, "reference") is None and c.entities:
            subject, arity = norm_text(c.entities[0]), len(c.entities)
            for i in self.active("reference"):
                if i.entities and norm_text(i.entities[0]) == subject and len(i.entities) == arity:
                    self._set(i.id, status="superseded")
                    log.superseded.append(i.id)
        self._merge_or_add(c, step, log)


class SinglePool(_Items):
    """One pool, type-agnostic (the w/o Functional Banks ablation): every valid candidate is appended unless
    it repeats an active item word for word (then that item is refreshed); no replacement, no conflict
    resolution, no protection. Items keep the writer's bank label for measurement only."""

    name = "pool"

    def group(self, item: Item) -> str:
        return "pool"

    def role(self, item: Item) -> str:
        return "dynamic"

    def sections(self) -> tuple[str, ...]:
        return ("pool",)

    def update(self, candidates: Sequence[CandidateItem], step: int, state: ParsedState | None,
               outcome: tuple[str, bool] | None = None) -> UpdateLog:
        check_write(candidates)
        log = UpdateLog()
        for c in candidates:
            dup = self._duplicate(c, None)
            if dup is not None:
                self._set(dup.id, last_seen=step)
                log.merged.append(dup.id)
            else:
                log.added.append(self._new(c, step, TASK_SCOPE).id)
        return log
