"""ReAct-style action prompt whose builder knows the token span of every piece.

Prompt (chat template of the model; SmolLM2 shown):

    <|im_start|>system\\n{instructions}<|im_end|>\\n<|im_start|>user\\n      <- header
    Here is a solved example of a similar task.\\n ... (End of example.)\\n\\n   <- memory block (optional)
    Now it is your turn.\\n{room}\\nYour task is to: {goal}\\n                  <- task
    > {action_1}\\n{observation_1}\\n ...                                       <- history
    <|im_end|>\\n<|im_start|>assistant\\n                                        <- suffix (last token = q_t)

Pieces are tokenized one by one and concatenated, so each span is exact by construction and is never
re-derived by string search. Everything before the suffix is the *prefix*: it only grows along an
episode, which is what lets the scorer reuse its KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from workbench.memory.trajectory import Step

__all__ = ["PieceSpan", "BuiltPrompt", "PromptBuilder", "PromptTooLongError", "MemoryPiece", "INSTRUCTIONS"]

INSTRUCTIONS = (
    "You are an agent in a household. Interact with the environment to solve the task. "
    "Each turn, reply with exactly one admissible action, for example: go to countertop 1, "
    "take apple 1 from countertop 1, put apple 1 in/on fridge 1, open fridge 1, clean apple 1 with sinkbasin 1, "
    "heat apple 1 with microwave 1, cool apple 1 with fridge 1, use desklamp 1."
)
MEMORY_OPEN = "Here is a solved example of a similar task.\n"
MEMORY_CLOSE = "(End of example.)\n\n"
TASK_OPEN = "Now it is your turn.\n"
HISTORY_CUT = "(Earlier steps omitted.)\n"

Kind = Literal[
    "header", "memory_open", "memory_header", "observation", "thought", "action", "memory_close",
    "task", "history_cut", "history_action", "history_observation", "reminder", "suffix",
    "wm_open", "wm_bank", "wm_item", "wm_close", "current_observation",  # the working-memory layout (prompts.working_memory)
]
# A memory piece: (kind, segment index or None, text); kinds header/observation/thought/action.
MemoryPiece = tuple[str, "int | None", str]


class PromptTooLongError(ValueError):
    """Even with history and memory dropped the prompt does not fit the model's context."""


@dataclass(frozen=True)
class PieceSpan:
    """Token span [start, end) of one piece in the full prompt (prefix + suffix)."""

    kind: str
    start: int
    end: int
    segment: int | None = None  # memory segment index; history step index for history pieces
    item: str | None = None  # working-memory item id (``wm_item`` pieces, see prompts.working_memory)
    bank: str | None = None  # the item's (or section's) bank
    band: str | None = None  # the item's band: F (focal) or A (ambient)


@dataclass(frozen=True)
class BuiltPrompt:
    """Tokens and spans of one action prompt.

    Attributes:
        prefix: prompt tokens up to the end of the history (grows along an episode).
        suffix: end of the user turn + assistant header; ``suffix[-1]`` is q_t.
        spans: every piece, in order.
        n_segments: memory segments in the prompt (after any truncation).
        truncated_history / truncated_memory: steps / segments dropped by the overflow policy.
    """

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    spans: tuple[PieceSpan, ...]
    n_segments: int = 0
    truncated_history: int = 0
    truncated_memory: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def tokens(self) -> list[int]:
        return list(self.prefix) + list(self.suffix)

    @property
    def n_tokens(self) -> int:
        return len(self.prefix) + len(self.suffix)

    def kind_span(self, *kinds: str) -> tuple[int, int] | None:
        """(first start, last end) over pieces of the given kinds, or None."""
        sel = [s for s in self.spans if s.kind in kinds]
        return (sel[0].start, sel[-1].end) if sel else None

    @property
    def memory_span(self) -> tuple[int, int] | None:
        return self.kind_span("memory_open", "memory_header", "observation", "thought", "action", "memory_close",
                              "wm_open", "wm_bank", "wm_item", "wm_close")

    @property
    def task_span(self) -> tuple[int, int] | None:
        return self.kind_span("task")

    @property
    def history_span(self) -> tuple[int, int] | None:
        return self.kind_span("history_cut", "history_action", "history_observation")

    @property
    def memory_tokens(self) -> int:
        span = self.memory_span
        return 0 if span is None else span[1] - span[0]

    def segment_positions(self, exclude_observation: bool = True) -> list[list[int]]:
        """Key positions of each memory segment ℓ (observation tokens excluded by default, as C needs)."""
        out: list[list[int]] = [[] for _ in range(self.n_segments)]
        for s in self.spans:
            if s.segment is None or s.kind not in ("observation", "thought", "action"):
                continue
            if exclude_observation and s.kind == "observation":
                continue
            out[s.segment].extend(range(s.start, s.end))
        return out


class PromptBuilder:
    """Builds :class:`BuiltPrompt` for one tokenizer (chat template read once)."""

    def __init__(self, tokenizer: Any, max_tokens: int, instructions: str = INSTRUCTIONS, reserve: int = 48,
                 history_chunk: int = 1):
        if not isinstance(history_chunk, int) or history_chunk < 1:
            raise ValueError(f"history_chunk {history_chunk!r}: expected a whole number of steps, at least 1")
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens - reserve  # room for the packed candidate tokens' positions
        # an overflowing prompt drops its oldest history steps this many at a time: the kept history then starts at
        # the same step for several decisions, so their prompts extend one another (the agent's KV cache is reused,
        # training packs them into one forward); 1 drops no more than it must
        self.history_chunk = history_chunk
        self._cache: dict[str, tuple[int, ...]] = {}
        header, footer = self._template_parts(instructions)
        self._header = self._tok(header)
        self._suffix = self._tok(footer)

    def _template_parts(self, instructions: str) -> tuple[str, str]:
        sentinel = "\x00USER\x00"
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(
                [{"role": "system", "content": instructions}, {"role": "user", "content": sentinel}],
                tokenize=False, add_generation_prompt=True,
            )
            head, foot = text.split(sentinel)
            bos = tok.bos_token or ""
            if bos and head.startswith(bos) and tok("x").input_ids[:1] == [tok.bos_token_id]:
                pass  # template already carries BOS; tokenized without special tokens it stays once
            return head, foot
        return f"{instructions}\n\n", "\nAction: "

    def _tok(self, text: str) -> tuple[int, ...]:
        ids = self._cache.get(text)
        if ids is None:
            ids = tuple(self.tokenizer(text, add_special_tokens=False).input_ids)
            if len(self._cache) < 100_000:
                self._cache[text] = ids
        return ids

    def build(
        self,
        room: str,
        goal: str,
        history: Sequence[Step] = (),
        memory: Sequence[MemoryPiece] | None = None,
        reminder: str | None = None,
        final_observation: str | None = None,
        reminder_label: str = "Reminder",
    ) -> BuiltPrompt:
        """Build the prompt for the next decision.

        Args:
            room: the initial room description.
            goal: the goal sentence.
            history: steps taken so far; step k shows ``> action_k`` then the observation that followed it,
                which is ``history[k+1].observation`` or ``final_observation`` for the last step.
            memory: memory pieces (kind, segment, text) from :func:`workbench.memory.render.render_pieces`.
            reminder: an optional reminder block placed after the history (proactive memory agent).
            reminder_label: the word that introduces it (``Reminder: ...``).
        """
        obs_after = [h.observation for h in history[1:]] + [final_observation or ""]
        steps = [(h.action, o) for h, o in zip(history, obs_after)]
        memory = list(memory or [])
        n_seg = 1 + max((p[1] for p in memory if p[1] is not None), default=-1)
        drop_hist, drop_mem = 0, 0
        while True:
            built = self._assemble(room, goal, steps, drop_hist, memory, drop_mem, n_seg, reminder, reminder_label)
            if built.n_tokens <= self.max_tokens:
                return built
            if drop_hist < len(steps):
                # overflow policy 1: oldest history steps first, history_chunk at a time
                drop_hist = min(len(steps), drop_hist + self.history_chunk)
            elif drop_mem < n_seg:
                drop_mem += 1  # overflow policy 2: then trailing memory segments
            else:
                raise PromptTooLongError(
                    f"the task alone takes {built.n_tokens} tokens, over the model's budget of {self.max_tokens} "
                    "(context minus the candidates' reserve): use a model with a longer context"
                )

    def _assemble(self, room, goal, steps, drop_hist, memory, drop_mem, n_seg, reminder,
                  reminder_label: str = "Reminder") -> BuiltPrompt:
        pieces: list[tuple[str, int | None, str | tuple[int, ...]]] = [("header", None, self._header)]
        kept_seg = n_seg - drop_mem
        if memory and kept_seg > 0:
            pieces.append(("memory_open", None, MEMORY_OPEN))
            for kind, seg, text in memory:
                if seg is not None and seg >= kept_seg:
                    continue
                pieces.append((kind if seg is not None else "memory_header", seg, text))
            pieces.append(("memory_close", None, MEMORY_CLOSE))
        pieces.append(("task", None, f"{TASK_OPEN}{room}\nYour task is to: {goal}\n"))
        if drop_hist:
            pieces.append(("history_cut", None, HISTORY_CUT))
        for k, (action, obs) in enumerate(steps):
            if k < drop_hist:
                continue
            pieces.append(("history_action", k, f"> {action}\n"))
            if obs:
                pieces.append(("history_observation", k, f"{obs}\n"))
        if reminder:
            pieces.append(("reminder", None, f"{reminder_label}: {reminder}\n"))
        prefix, spans = self.tokenize_pieces([(kind, text, {"segment": seg}) for kind, seg, text in pieces])
        return BuiltPrompt(
            prefix=tuple(prefix), suffix=self._suffix, spans=tuple(spans),
            n_segments=kept_seg if memory else 0, truncated_history=drop_hist,
            truncated_memory=drop_mem if memory else 0,
        )

    def tokenize_pieces(self, pieces) -> tuple[list[int], list[PieceSpan]]:
        """Tokenize ``(kind, text or token ids, span fields)`` pieces one by one: the prefix tokens and every
        piece's exact span, then the suffix's span (what makes spans exact by construction in every layout)."""
        prefix: list[int] = []
        spans: list[PieceSpan] = []
        for kind, text, fields in pieces:
            ids = text if isinstance(text, tuple) else self._tok(text)
            spans.append(PieceSpan(kind, len(prefix), len(prefix) + len(ids), **fields))
            prefix.extend(ids)
        spans.append(PieceSpan("suffix", len(prefix), len(prefix) + len(self._suffix)))
        return prefix, spans

    def decode(self, built: BuiltPrompt) -> str:
        return self.tokenizer.decode(built.tokens)
