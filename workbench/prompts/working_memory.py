"""The action prompt of working-memory methods (MemArbiter, Flat Recency, Flat Retrieval): the memory block P_t
stands in place of the raw history, and every memory item has its own token span.

Prompt (chat template of the model; SmolLM2 shown):

    <|im_start|>system\\n{instructions}<|im_end|>\\n<|im_start|>user\\n      <- header
    Your task is to: {goal}\\n                                                <- task
    Working memory:\\n                                                         <- wm_open      \\
    Goal:\\n                                                                   <- wm_bank      |
    - Task goal: put a clean apple in fridge.\\n                               <- wm_item G1 F  |  P_t: the
    Task state:\\n                                                             <- wm_bank      |  policy's
    - @countertop 1 | apple 1 | clean the apple with the sinkbasin\\n          <- wm_item T4 A  |  pieces,
    ...                                                                                        |  verbatim
    (End of working memory.)\\n                                                <- wm_close     /
    Current observation: {o_t}\\n                                              <- current_observation
    Reminder: {reminder}\\n                                                    <- reminder (optional)
    <|im_end|>\\n<|im_start|>assistant\\n                                        <- suffix (last token = q_t)

This is the paper's a_t ~ pi(I, g, o_t, P_t): instructions, goal, current observation and the memory block,
no history. The policy owns every character of P_t (wrapper lines included), so the budget it enforces in o200k
tokens is the budget of exactly what the prompt shows. Pieces are tokenized one by one and concatenated, so
each item's span is exact by construction (never re-derived by string search) and carries the item's id, bank
and band; C over items, focal-vs-ambient attention and band-switch re-scores all read these spans.

The task line comes before the memory block so that the part shared by consecutive steps (header + task) is a
prefix the scorer's KV cache can reuse; the block changes from step to step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from workbench.prompts.layout import (
    BuiltPrompt,
    PieceSpan,
    PromptBuilder,
    PromptTooLongError,
)

__all__ = ["WMPiece", "WM_KINDS", "build_working_memory_prompt", "item_spans"]

WM_KINDS = ("wm_open", "wm_bank", "wm_item", "wm_close")


@dataclass(frozen=True)
class WMPiece:
    """One piece of a memory block P_t.

    Attributes:
        kind: ``wm_open`` | ``wm_bank`` (a bank's section header) | ``wm_item`` | ``wm_close``.
        text: the exact text (ends with a newline).
        item: the item's id (``wm_item`` only).
        bank: the item's bank, or the section's bank (None for one pool / flat records).
        band: ``F`` (focal) or ``A`` (ambient) for items.
    """

    kind: str
    text: str
    item: str | None = None
    bank: str | None = None
    band: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in WM_KINDS:
            raise ValueError(f"WMPiece kind '{self.kind}': expected one of {', '.join(WM_KINDS)}")
        if not self.text.endswith("\n"):
            raise ValueError(f"WMPiece text must end with a newline: {self.text!r}")


def build_working_memory_prompt(builder: PromptBuilder, goal: str, observation: str,
                                block: Sequence[WMPiece] = (), reminder: str | None = None,
                                reminder_label: str = "Reminder") -> BuiltPrompt:
    """The working-memory action prompt (see the module docstring) with one span per piece.

    Args:
        builder: the model's :class:`PromptBuilder` (tokenizer, chat template, context budget).
        goal: the goal sentence.
        observation: o_t, what the agent sees now (the room description at step 0).
        block: P_t as the policy assembled it.
        reminder: optional transient reminder line.

    Raises:
        PromptTooLongError: the prompt does not fit the model's context (the block is never cut here: its
            budget is the policy's business, and a silently shortened block would falsify the budget).
    """
    pieces: list[tuple[str, str | tuple[int, ...], dict]] = [("header", builder._header, {})]
    pieces.append(("task", f"Your task is to: {goal}\n", {}))
    for p in block:
        pieces.append((p.kind, p.text, {"item": p.item, "bank": p.bank, "band": p.band}))
    pieces.append(("current_observation", f"Current observation: {observation}\n", {}))
    if reminder:
        pieces.append(("reminder", f"{reminder_label}: {reminder}\n", {}))
    prefix, spans = builder.tokenize_pieces(pieces)
    built = BuiltPrompt(prefix=tuple(prefix), suffix=builder._suffix, spans=tuple(spans),
                        meta={"layout": "working_memory"})
    if built.n_tokens > builder.max_tokens:
        raise PromptTooLongError(
            f"the working-memory prompt takes {built.n_tokens} tokens, over the model's budget of "
            f"{builder.max_tokens}: lower the memory budget or use a model with a longer context")
    return built


def item_spans(prompt: BuiltPrompt) -> dict[str, PieceSpan]:
    """Item id -> its span in ``prompt`` (empty for a ReAct prompt)."""
    return {s.item: s for s in prompt.spans if s.kind == "wm_item" and s.item is not None}
