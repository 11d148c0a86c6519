"""Typed memory edits: what :func:`~workbench.agents.rescore.rescore` changes in a recorded state, one class each.

An edit acts at one *stage* of how the state's action prompt is made, and the stages run in this order whatever
the order of the list (within a stage, in list order)::

    policy   SetBand                      the policy re-assembles its block under its own budget
       |                                  (all SetBand edits of a list in one ``policy.reassemble(bands)`` call)
    block    DropItem  ShowOnly  DropBank  RewriteItem       the working-memory block P_t, piece by piece
             MaskSegments                                    the ReAct memory entry (through DropSegments)
             ReplaceReminder  RemoveReminder  ClearMemory    the reminder line / the whole block
       |
       |  agent.build_prompt(block, ...)  ->  tokens + spans (the layouts in workbench.prompts)
       v
    prompt   PlaceboReminder              the reminder span's words, token for token (positions kept)
       |
    forward  MaskHeads                    hooks on the scoring forward (the head-mask instrument)

Every edit acts on the typed block (items by id, banks, bands, segments) or on a span of the built prompt, never
by searching the rendered text, and an edit that names what the state does not hold (an unknown item id, bank or
segment; a reminder where there is none; an item edit on a ReAct block) raises :class:`EditError` naming it,
rather than silently scoring the factual state again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from workbench.agents.policy import MemoryBlock
from workbench.attention.head_set import Head, HeadSet
from workbench.attention.instrument import HeadMaskInstrument
from workbench.attention.segment_masking import DropSegments
from workbench.envs.base import Task
from workbench.prompts.layout import BuiltPrompt
from workbench.prompts.working_memory import WMPiece

__all__ = [
    "BANDS",
    "PLACEBO_TEXT",
    "REMINDER_MAX_O200K",
    "ClearMemory",
    "DropBank",
    "DropItem",
    "Edit",
    "EditError",
    "MaskHeads",
    "MaskSegments",
    "PlaceboReminder",
    "Reassembles",
    "RemoveReminder",
    "ReplaceReminder",
    "RewriteItem",
    "SetBand",
    "ShowOnly",
    "reassembled",
]

#: The bands a working-memory item can be put in: focal, ambient, hidden (left out of P_t).
BANDS = {"F": "F", "A": "A", "H": "H", "focal": "F", "ambient": "A", "hidden": "H"}

#: The placebo reminder's words: an instruction that names no object, place or command (its tokens are cut to the
#: real reminder's length).
PLACEBO_TEXT = "Keep working on the task one step at a time."


class EditError(ValueError):
    """An edit that cannot apply to this state (it names the edit and what is missing)."""


@runtime_checkable
class Reassembles(Protocol):
    """A memory policy that can re-assemble the block of the step it just decided with some items' bands replaced,
    under the same budget, without changing its own state (a re-score is not a new step).

    ``bands`` maps item ids to ``F`` / ``A`` / ``H``; an id that is not an active item of that step raises
    ``KeyError`` or ``ValueError``. Hidden items are absent from the block, so only the policy knows them.
    """

    def reassemble(self, bands: Mapping[str, str]) -> MemoryBlock: ...


class Edit:
    """Base of the typed edits (frozen dataclasses); ``stage`` says where it acts (module docstring)."""

    stage: ClassVar[str] = ""

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:  # stage "block"
        raise NotImplementedError

    def edit_prompt(self, prompt: BuiltPrompt, block: MemoryBlock, tokenizer: Any) -> BuiltPrompt:  # stage "prompt"
        raise NotImplementedError

    def instrument(self, lm: Any):  # stage "forward": a StepInstrument for the scoring forward
        raise NotImplementedError


# -- the working-memory block, piece by piece ------------------------------------------------------------------

def _wm(edit: Edit, block: MemoryBlock) -> tuple[WMPiece, ...]:
    if block.layout != "working_memory":
        raise EditError(f"{edit!r} edits working-memory items, but this state's block has the '{block.layout}' "
                        "layout (its memory is segments: use MaskSegments)")
    return tuple(block.working_memory)


def _item_ids(pieces: Iterable[WMPiece]) -> list[str]:
    return [p.item for p in pieces if p.kind == "wm_item" and p.item is not None]


def _check_items(edit: Edit, pieces: tuple[WMPiece, ...], ids: Iterable[str]) -> None:
    known = _item_ids(pieces)
    for item in ids:
        if item not in known:
            raise EditError(f"{edit!r}: no item '{item}' in this state's working memory "
                            f"(shown: {', '.join(known) or 'none'}; a hidden item can only come back by SetBand)")


def _keep_items(pieces: tuple[WMPiece, ...], keep) -> tuple[WMPiece, ...]:
    """``pieces`` without the items ``keep`` rejects; a bank header whose section loses its last item goes too (the
    policies' own assembly never shows an empty section)."""
    out: list[WMPiece] = []
    i = 0
    while i < len(pieces):
        p = pieces[i]
        if p.kind == "wm_bank":  # a section: its header, then its items up to the next non-item piece
            j = i + 1
            while j < len(pieces) and pieces[j].kind == "wm_item":
                j += 1
            items = pieces[i + 1:j]
            kept = [q for q in items if keep(q)]
            if kept or not items:
                out += [p, *kept]
            i = j
            continue
        if p.kind != "wm_item" or keep(p):
            out.append(p)
        i += 1
    return tuple(out)


@dataclass(frozen=True)
class DropItem(Edit):
    """Leave one working-memory item out of P_t (its line; its bank header too when it was the section's last).

    Unlike ``SetBand(item, "H")`` the rest of the block stays exactly as shown: nothing takes the freed budget.
    """

    item: str
    stage: ClassVar[str] = "block"

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:
        pieces = _wm(self, block)
        _check_items(self, pieces, [self.item])
        return replace(block, working_memory=_keep_items(pieces, lambda p: p.item != self.item))


@dataclass(frozen=True)
class ShowOnly(Edit):
    """Keep only the given working-memory items (with their bank headers and the block's open/close lines);
    ``ShowOnly(())`` shows the block's frame with no item."""

    items: tuple[str, ...]
    stage: ClassVar[str] = "block"

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", (self.items,) if isinstance(self.items, str) else tuple(self.items))

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:
        pieces = _wm(self, block)
        _check_items(self, pieces, self.items)
        return replace(block, working_memory=_keep_items(pieces, lambda p: p.item in self.items))


@dataclass(frozen=True)
class DropBank(Edit):
    """Leave a whole bank out of P_t: its section header and every item of it."""

    bank: str
    stage: ClassVar[str] = "block"

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:
        pieces = _wm(self, block)
        banks = list(dict.fromkeys(p.bank for p in pieces if p.kind in ("wm_bank", "wm_item") and p.bank))
        if self.bank not in banks:
            raise EditError(f"{self!r}: no bank '{self.bank}' in this state's working memory "
                            f"(shown: {', '.join(banks) or 'none'})")
        return replace(block, working_memory=tuple(p for p in pieces if p.bank != self.bank
                                                   or p.kind not in ("wm_bank", "wm_item")))


@dataclass(frozen=True)
class RewriteItem(Edit):
    """Show one item with another text in its place (its span, bank and band kept): e.g. the item with the command
    it quotes written out of it. ``text`` is the whole line (the policy's ``"- "`` marker included)."""

    item: str
    text: str
    stage: ClassVar[str] = "block"

    def __post_init__(self) -> None:
        if not self.text.endswith("\n"):
            object.__setattr__(self, "text", self.text + "\n")

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:
        pieces = _wm(self, block)
        _check_items(self, pieces, [self.item])
        return replace(block, working_memory=tuple(replace(p, text=self.text) if p.kind == "wm_item"
                                                   and p.item == self.item else p for p in pieces))


# -- the policy's own re-assembly -------------------------------------------------------------------------------

@dataclass(frozen=True)
class SetBand(Edit):
    """Put one item in another band (``F`` focal, ``A`` ambient, ``H`` hidden; or the words) and let the policy
    re-assemble P_t under its budget, as its gate would have: moving an item may push another one out or, hidden,
    free room for one. Needs a policy that implements :class:`Reassembles`; every SetBand of one edit list goes
    in one ``reassemble`` call (the other edits then act on its block)."""

    item: str
    band: str
    stage: ClassVar[str] = "policy"

    def __post_init__(self) -> None:
        if self.band not in BANDS:
            raise EditError(f"SetBand(item={self.item!r}): band '{self.band}' is not one of "
                            f"{', '.join(BANDS)}")
        object.__setattr__(self, "band", BANDS[self.band])


def reassembled(edits: Iterable[SetBand], block: MemoryBlock, policy: Any) -> MemoryBlock:
    """The block ``policy`` re-assembles with the bands of ``edits`` (the factual reminder kept: re-assembly is
    about the working memory only)."""
    edits = list(edits)
    if not edits:
        return block
    bands: dict[str, str] = {}
    for e in edits:
        if bands.setdefault(e.item, e.band) != e.band:
            raise EditError(f"{e!r}: item '{e.item}' is also put in band {bands[e.item]} by the same edit list")
    if not isinstance(policy, Reassembles):
        who = "no policy" if policy is None else f"policy '{getattr(policy, 'name', '?')}' ({type(policy).__name__})"
        raise EditError(f"{edits[0]!r} needs the policy to re-assemble its block under its budget, but {who} has no "
                        "reassemble(bands) method (workbench.agents.edits.Reassembles); use DropItem to leave an "
                        "item out of the block as shown")
    try:
        new = policy.reassemble(bands)
    except (KeyError, ValueError) as e:
        raise EditError(f"{edits[0]!r}: policy '{getattr(policy, 'name', '?')}' cannot re-assemble with bands "
                        f"{bands}: {e.args[0] if e.args else e}") from e
    return replace(new, reminder=block.reminder, reminder_label=block.reminder_label)


# -- the ReAct memory entry -------------------------------------------------------------------------------------

class _Shows:
    """A policy that shows one block (what DropSegments wraps to mask a recorded state's segments)."""

    name = "state"

    def __init__(self, block: MemoryBlock) -> None:
        self.block = block

    def begin(self, task, goal: str, room: str) -> None:
        pass

    def memory(self, step: int, history: list) -> MemoryBlock:
        return self.block

    def observe(self, step, next_observation: str) -> None:
        pass


@dataclass(frozen=True)
class MaskSegments(Edit):
    """Remove memory segments from a ReAct block, through the segment-masking instrument
    (:class:`~workbench.attention.segment_masking.DropSegments`: the rest renumbered 0..L'-1, as its re-runs do)."""

    segments: tuple[int, ...]
    stage: ClassVar[str] = "block"

    def __post_init__(self) -> None:
        segs = (self.segments,) if isinstance(self.segments, int) else self.segments
        object.__setattr__(self, "segments", tuple(int(s) for s in segs))

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:
        if block.layout != "react":
            raise EditError(f"{self!r}: this state's block has the '{block.layout}' layout, whose memory is items: "
                            "use DropItem / ShowOnly / DropBank")
        known = sorted({p[1] for p in block.pieces if p[1] is not None})
        for s in self.segments:
            if s not in known:
                raise EditError(f"{self!r}: no memory segment {s} in this state's block "
                                f"(segments: {', '.join(map(str, known)) or 'none'})")

        masked = DropSegments(_Shows(block), {task.task_id: self.segments})
        masked.begin(task, "", "")
        return masked.memory(0, [])


# -- the reminder and the whole block ---------------------------------------------------------------------------

#: The longest reminder ReplaceReminder shows, in o200k tokens (ours: above the longest the committed proactive runs
#: showed, 470 model tokens, the passive variant's whole bank).
REMINDER_MAX_O200K = 512


@dataclass(frozen=True)
class ReplaceReminder(Edit):
    """Show another reminder line (its label kept); where the state had none, add this one. At most
    ``REMINDER_MAX_O200K`` o200k tokens."""

    text: str
    stage: ClassVar[str] = "block"

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:
        from workbench.memory.tokens import count_o200k

        if not self.text.strip():
            raise EditError(f"{self!r}: an empty reminder; use RemoveReminder")
        n = count_o200k(self.text)
        if n > REMINDER_MAX_O200K:
            raise EditError(f"ReplaceReminder: the reminder is {n} o200k tokens, over the budget of "
                            f"{REMINDER_MAX_O200K}; shorten it")
        return replace(block, reminder=self.text)


@dataclass(frozen=True)
class RemoveReminder(Edit):
    """Leave the reminder line out (what the loop's ``reminder_effect`` record measures)."""

    stage: ClassVar[str] = "block"

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:
        if not block.reminder:
            raise EditError(f"{self!r}: this state shows no reminder")
        return replace(block, reminder=None)


@dataclass(frozen=True)
class ClearMemory(Edit):
    """Replace the whole block by an empty ReAct one (no memory, the ReAct layout: the history shows again); the
    reminder line stays (add RemoveReminder to drop it too)."""

    stage: ClassVar[str] = "block"

    def edit_block(self, block: MemoryBlock, task: Task) -> MemoryBlock:
        return MemoryBlock(reminder=block.reminder, reminder_label=block.reminder_label)


@dataclass(frozen=True)
class PlaceboReminder(Edit):
    """The reminder's words replaced, token for token, by a content-free placebo of the same length.

    The label (the tokens of ``"<label>:"``, when the span starts with them) and the span's last token (its line
    end) stay; every other token of the reminder span becomes a token of ``text`` (repeated and cut to length), so
    every position, the rest of the prompt, the candidates and the span are the same: only what it says differs.
    """

    text: str = PLACEBO_TEXT
    stage: ClassVar[str] = "prompt"

    def edit_prompt(self, prompt: BuiltPrompt, block: MemoryBlock, tokenizer: Any) -> BuiltPrompt:
        span = prompt.kind_span("reminder")
        if span is None:
            raise EditError(f"{self!r}: this state's prompt shows no reminder")
        start, end = span
        toks = prompt.tokens
        head = list(tokenizer(f"{block.reminder_label}:", add_special_tokens=False).input_ids)
        k = len(head) if toks[start:start + len(head)] == head else 0
        body = end - 1 - (start + k)
        if body <= 0:
            raise EditError(f"{self!r}: the reminder has no words between its label and its line end")
        filler = list(tokenizer((" " + self.text.strip()) * (body // 4 + 2), add_special_tokens=False).input_ids)
        if len(filler) < body:
            raise EditError(f"{self!r}: the placebo text is too short to fill {body} tokens")
        new = toks[:start + k] + filler[:body] + toks[start + k + body:]
        cut = len(prompt.prefix)
        return replace(prompt, prefix=tuple(new[:cut]), suffix=tuple(new[cut:]))


# -- the forward --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MaskHeads(Edit):
    """Zero the outputs of query heads in the scoring forward (the head-mask instrument,
    :class:`~workbench.attention.instrument.HeadMaskInstrument`)."""

    heads: tuple[Head, ...]
    stage: ClassVar[str] = "forward"

    def __post_init__(self) -> None:
        heads = self.heads.heads if isinstance(self.heads, HeadSet) else self.heads
        if len(heads) == 2 and all(isinstance(x, int) for x in heads):
            heads = (heads,)  # one head given bare: MaskHeads((layer, head_index))
        object.__setattr__(self, "heads", HeadSet.of(tuple(heads)).heads)

    def instrument(self, lm: Any) -> HeadMaskInstrument:
        try:
            HeadSet(self.heads).validate(lm.n_layers, lm.n_heads)
        except ValueError as e:
            raise EditError(f"{self!r}: {e}") from None
        return HeadMaskInstrument(self.heads, lm.n_heads)
