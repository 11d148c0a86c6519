"""Builders for the MemArbiter tests: candidate items, parsed states, contexts (build_x(**overrides))."""

from __future__ import annotations

from workbench.methods.arbiter.items import Item
from workbench.methods.arbiter.signals import Context
from workbench.methods.arbiter.stage_types import CandidateItem, ParsedState


def cand(bank: str = "reference", focal: str = "apple 1 is in/on countertop 1.", ambient: str = "",
         entities: tuple[str, ...] = ("apple 1", "countertop 1"), **kw) -> CandidateItem:
    return CandidateItem(bank=bank, focal=focal, ambient=ambient, entities=entities, **kw)


def state(subgoal: str = "find a apple", **kw) -> ParsedState:
    return ParsedState(subgoal=subgoal, **kw)


def ctx(step: int = 3, **kw) -> Context:
    st = kw.pop("state", None) or state()
    return Context(step=step, state=st, **kw)


def item(id: str = "R1", bank: str = "reference", focal: str = "apple 1 is in/on countertop 1.", ambient: str = "apple 1 @ countertop 1",
         entities: tuple[str, ...] = ("apple 1", "countertop 1"), **kw) -> Item:
    return Item(id=id, bank=bank, focal=focal, ambient=ambient, entities=entities, **kw)
