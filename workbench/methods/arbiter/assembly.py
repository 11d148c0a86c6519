"""Prompt assembly: the gate's bands -> the memory block P_t, under a budget counted in o200k tokens.

    Working memory:                   <- open   \\
    Goal:                             <- section (bank order: goal, task state, constraints, episodic, reference)
    - <focal text>                    <- F items first, by eta (descending)
    - <ambient text>                  <- then A items, by eta; H items are out
    Task state:                        ...
    (End of working memory.)          <- close  /   every line counts against the budget

**Budget invariant**: ``count_o200k(block text) <= budget`` always. When the gate's choice does not fit, the
allocation gives way by priority s = d * eta (protected items last): the lowest-priority shown item is first
shown ambient instead of focal (when that is shorter), then left out; a section left empty loses its header.
The final text is counted whole and cut further if BPE merges ever made it longer than its parts, so the
invariant does not rest on per-line sums. A budget smaller than the open and close lines gives an empty block.

Allocations: :class:`PriorityAllocation` (the method: one budget for all banks, by priority) and
:class:`FixedShares` (the no-signals ablation's fixed allocation: each bank a fixed share of the budget).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from workbench.memory.tokens import count_o200k
from workbench.methods.arbiter.items import BANK_TITLES, Item
from workbench.prompts.working_memory import WMPiece

__all__ = ["Candidate", "AssembledBlock", "Allocation", "PriorityAllocation", "FixedShares", "assemble",
           "OPEN", "CLOSE", "FIXED_SHARES", "block_text"]

OPEN = "Working memory:\n"
CLOSE = "(End of working memory.)\n"
FIXED_SHARES = {"goal": 0.15, "task_state": 0.15, "constraint": 0.2, "episodic": 0.25, "reference": 0.25,
                "pool": 1.0}


@dataclass(frozen=True)
class Candidate:
    """An item the gate did not hide, with what assembly orders and cuts by."""

    item: Item
    group: str  # its section (its bank, or "pool")
    band: str  # the gate's band: F or A
    eta: float
    priority: float  # d * eta (+1 for protected items, which give way last)
    order: int  # creation order (ties)


@dataclass(frozen=True)
class AssembledBlock:
    """P_t and its accounting.

    Attributes:
        pieces: the block, piece by piece (what the prompt layout tokenizes).
        shown: item id -> band actually shown (F/A); items cut for the budget are absent.
        cut: ids the budget left out (their gate band was F or A).
        o200k: tokens of the whole block text.
        bank_tokens: o200k tokens of each bank's item lines (by the items' own bank label).
    """

    pieces: tuple[WMPiece, ...]
    shown: dict[str, str]
    cut: tuple[str, ...]
    o200k: int
    bank_tokens: dict[str, int] = field(default_factory=dict)


def block_text(pieces: Sequence[WMPiece]) -> str:
    return "".join(p.text for p in pieces)


def _line(c: Candidate, band: str) -> str:
    return f"- {c.item.focal if band == 'F' else c.item.ambient}\n"


def _title(group: str) -> str:
    return f"{BANK_TITLES.get(group, group)}:\n"


class Allocation(Protocol):
    name: str

    def fit(self, chosen: dict[str, tuple[Candidate, str]], sections: Sequence[str], budget: int,
            cost: Callable[[str], int]) -> dict[str, tuple[Candidate, str]]: ...


def _total(chosen: dict[str, tuple[Candidate, str]], cost: Callable[[str], int]) -> int:
    groups = {c.group for c, _ in chosen.values()}
    return (cost(OPEN) + cost(CLOSE) + sum(cost(_title(g)) for g in groups)
            + sum(cost(_line(c, band)) for c, band in chosen.values()))


def _give_way(chosen: dict[str, tuple[Candidate, str]], cost: Callable[[str], int]) -> None:
    """Shrink the lowest-priority shown item: focal -> ambient when shorter, else out."""
    c, band = min(chosen.values(), key=lambda cb: (cb[0].priority, -cb[0].order))
    if band == "F" and cost(_line(c, "A")) < cost(_line(c, "F")):
        chosen[c.item.id] = (c, "A")
    else:
        del chosen[c.item.id]


class PriorityAllocation:
    """One budget for the whole block; what does not fit gives way by priority."""

    name = "priority"

    def fit(self, chosen, sections, budget, cost):
        chosen = dict(chosen)
        while chosen and _total(chosen, cost) > budget:
            _give_way(chosen, cost)
        return chosen


class FixedShares:
    """A fixed share of the budget per section (``FIXED_SHARES``, renormalised over the sections); inside a
    section items fill by priority, focal if it fits, else ambient, else out. Unused share is not lent."""

    name = "fixed-shares"

    def __init__(self, shares: dict[str, float] | None = None) -> None:
        self.shares = shares or FIXED_SHARES

    def fit(self, chosen, sections, budget, cost):
        room = budget - cost(OPEN) - cost(CLOSE)
        weights = {g: self.shares.get(g, 0.0) for g in sections}
        norm = sum(weights.values()) or 1.0
        out: dict[str, tuple[Candidate, str]] = {}
        for g in sections:
            quota = int(room * weights[g] / norm)
            items = sorted((cb for cb in chosen.values() if cb[0].group == g), key=lambda cb: (-cb[0].priority, cb[0].order))
            used = cost(_title(g)) if items else 0
            for c, band in items:
                for b in ([band, "A"] if band == "F" else [band]):
                    n = cost(_line(c, b))
                    if used + n <= quota:
                        out[c.item.id] = (c, b)
                        used += n
                        break
        while out and _total(out, cost) > budget:
            _give_way(out, cost)
        return out


def _render(chosen: dict[str, tuple[Candidate, str]], sections: Sequence[str]) -> list[WMPiece]:
    pieces = [WMPiece("wm_open", OPEN)]
    for g in sections:
        rows = [cb for cb in chosen.values() if cb[0].group == g]
        if not rows:
            continue
        pieces.append(WMPiece("wm_bank", _title(g), bank=g))
        for band in ("F", "A"):
            for c, b in sorted((cb for cb in rows if cb[1] == band), key=lambda cb: (-cb[0].eta, cb[0].order)):
                pieces.append(WMPiece("wm_item", _line(c, b), item=c.item.id, bank=c.item.bank, band=b))
    pieces.append(WMPiece("wm_close", CLOSE))
    return pieces


def assemble(candidates: Sequence[Candidate], sections: Sequence[str], budget: int,
             allocation: Allocation | None = None) -> AssembledBlock:
    """P_t from the non-hidden items (module docstring); never over ``budget`` o200k tokens."""
    cache: dict[str, int] = {}

    def cost(text: str) -> int:
        if text not in cache:
            cache[text] = count_o200k(text)
        return cache[text]

    if budget < cost(OPEN) + cost(CLOSE):
        return AssembledBlock((), {}, tuple(c.item.id for c in candidates), 0, {})
    chosen = {c.item.id: (c, c.band) for c in candidates if c.band in ("F", "A")}
    chosen = (allocation or PriorityAllocation()).fit(chosen, sections, budget, cost)
    pieces = _render(chosen, sections)
    while count_o200k(block_text(pieces)) > budget and chosen:  # BPE merges across lines (never seen; guarded)
        _give_way(chosen, cost)
        pieces = _render(chosen, sections)
    bank_tokens: dict[str, int] = {}
    for p in pieces:
        if p.kind == "wm_item" and p.bank:
            bank_tokens[p.bank] = bank_tokens.get(p.bank, 0) + cost(p.text)
    shown = {p.item: p.band for p in pieces if p.kind == "wm_item"}
    cut = tuple(c.item.id for c in candidates if c.band in ("F", "A") and c.item.id not in shown)
    return AssembledBlock(tuple(pieces), shown, cut, count_o200k(block_text(pieces)), bank_tokens)
