"""The retrieval supervision set (AGMR appendix C.1): prompts right before a key step + the memory that supports it.

A record pairs the complete prompt before a key decision step (``formatted_prompt``, its ``token_ids``) with the
token positions of the memory snippet that should be retrieved there (``key_spans``). Head scoring
(:func:`workbench.attention.score_heads`) reads ``(token_ids, key_positions)`` from it.

Two sources of transitions, both "memory turned a wrong decision into the right one":

* ``task-level`` (the paper's): tasks that fail without memory and succeed with the retrieved trajectory. An
  analyzer compares the two runs and names the key step of the successful run and the supporting memory segment.
* ``step-level`` (for models that fail every episode, e.g. an untrained 135M model): teacher-forced steps on the
  expert plan where the model's choice is wrong with memory ``none`` and equals the expert's action with ``traj``.
  The key step is that step; the supporting segment is chosen by the analyzer.

Analyzers. ``template`` (deterministic, the default): the supporting segment is the memory segment whose action
has the same ALFWorld action template as the target action (``go to X``, ``take X from Y``, ``put X in/on Y``,
``open X``, ``close X``, ``clean/heat/cool X with Y``, ``use X``, ``examine X``, ``look``, ``inventory``),
preferring the same object type, then the same receptacle type, ties to the earliest segment; a target whose
template no segment shares yields no record. Any :class:`workbench.llm.Backend` instead runs the
``retrieval_analyzer`` stage (an LLM, or ``offline-alfworld``'s rules); its ``key_segment`` is validated against
the memory. Either way the key span is the chosen segment's *action* tokens (and thought tokens, when the memory
has thoughts) as the prompt layout placed them: spans are never recovered by string search.

User files (JSONL of :class:`SupervisionRecord`) load with :func:`load_supervision`; a bad record is an error
naming the file, the record and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workbench.envs.alfworld_text import parse_action
from workbench.memory.trajectory import read_jsonl, write_jsonl

__all__ = ["SupervisionRecord", "template_segment", "load_supervision", "save_supervision", "supervision_pairs", "supervision_summary"]

Source = Literal["task-level", "step-level", "user"]
KEY_KINDS = ("action", "thought")  # the parts of a segment that make up its key context (never observations)


class SupervisionRecord(BaseModel):
    """One ``(key_context, formatted_prompt)`` pair of the retrieval supervision set (JSONL-serialisable).

    Attributes:
        task_id: the task the prompt belongs to.
        step: the key decision step (index into the trajectory the prompt was built from).
        key_context: text of the supporting memory snippet.
        formatted_prompt: the decoded prompt right before the key step (its last token plays q_t).
        token_ids: the prompt's tokens for ``model_name``'s tokenizer.
        key_spans: ``[start, end)`` token positions of the key context in ``token_ids``.
        target_action: the action the memory should support (the expert's / the successful run's).
        source: ``task-level``, ``step-level`` or ``user``.
        analyzer: what chose the supporting segment (``template``, ``llm:<backend>``, ...).
        model_name: the model whose tokenizer produced ``token_ids``.
        split: the task split.
        memory_entry: the memory entry shown in the prompt.
        key_segment: the index of the supporting segment in that entry.
        wrong_action: the action chosen without memory (what memory corrected), when known.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    step: int = Field(ge=0)
    key_context: str = Field(min_length=1)
    formatted_prompt: str
    token_ids: list[int] = Field(min_length=1)
    key_spans: list[tuple[int, int]] = Field(min_length=1)
    target_action: str
    source: Source
    analyzer: str
    model_name: str | None = None
    split: str = ""
    memory_entry: str | None = None
    key_segment: int | None = None
    wrong_action: str | None = None

    @field_validator("key_spans")
    @classmethod
    def _ordered(cls, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        for start, end in spans:
            if not 0 <= start < end:
                raise ValueError(f"span ({start}, {end}) must satisfy 0 <= start < end (end exclusive)")
        return spans

    @model_validator(mode="after")
    def _inside(self) -> SupervisionRecord:
        last = max(end for _, end in self.key_spans)
        if last > len(self.token_ids):
            raise ValueError(f"key_spans reach token {last} but token_ids holds {len(self.token_ids)} tokens")
        if last == len(self.token_ids):
            raise ValueError("key_spans cover the last prompt token, which is the query q_t itself")
        return self

    @property
    def key_positions(self) -> list[int]:
        """Every token position of the key context, ascending."""
        return sorted({p for start, end in self.key_spans for p in range(start, end)})

    def pair(self) -> tuple[list[int], list[int]]:
        """``(token_ids, key_positions)``, the :data:`SupervisionPair` that ``score_heads`` reads."""
        return list(self.token_ids), self.key_positions


def _parse(action: str):
    # ALFWorld's action grammar lives with the offline LLM backends; imported here, not at module level, so
    # the attention layer does not load the LLM package unless supervision is built.
    return parse_action(action)


def template_segment(segment_actions: Sequence[str], target_action: str) -> int | None:
    """The ``template`` analyzer: the segment whose action supports ``target_action`` (module docstring).

    Args:
        segment_actions: the action of every memory segment, in order.
        target_action: the action to support.

    Returns:
        The segment index, or None when no segment shares the target's action template.
    """
    want = _parse(target_action)
    if want.template == "other":
        return None
    wx, wy = want.types
    best: tuple[int, int] | None = None
    choice = None
    for k, action in enumerate(segment_actions):
        got = _parse(action)
        if got.template != want.template:
            continue
        gx, gy = got.types
        score = (int(bool(wx) and gx == wx), int(bool(wy) and gy == wy))
        if best is None or score > best:  # strict: ties keep the earliest segment
            best, choice = score, k
    return choice


def _segment_actions(pieces: Sequence) -> list[str]:
    n = 1 + max((p[1] for p in pieces if p[1] is not None), default=-1)
    actions = [""] * n
    for kind, seg, text in pieces:
        if seg is not None and kind == "action":
            actions[seg] = text.strip().removeprefix(">").strip()
    return actions


def save_supervision(path: str | Path, records: Iterable[SupervisionRecord]) -> Path:
    """Write records as JSONL (atomically)."""
    path = Path(path)
    write_jsonl(path, list(records))
    return path


def load_supervision(path: str | Path) -> list[SupervisionRecord]:
    """Read a supervision JSONL (ours or user-made).

    Raises:
        FileNotFoundError: no such file.
        TrajectoryFormatError: a record is malformed; the message names the file, the record and the field.
    """
    return read_jsonl(path, SupervisionRecord)


def supervision_pairs(records: Iterable[SupervisionRecord], lm: Any | None = None) -> list[tuple[list[int], list[int]]]:
    """``(token_ids, key_positions)`` per record, for :func:`score_heads`.

    Args:
        lm: when given, every record must have been tokenized for a model of this name or its token ids must
            decode to the record's ``formatted_prompt`` with ``lm``'s tokenizer (token ids of another tokenizer
            would point at the wrong tokens).
    """
    out = []
    for i, rec in enumerate(records):
        if lm is not None and rec.model_name not in (None, lm.name):
            if lm.tokenizer.decode(rec.token_ids) != rec.formatted_prompt:
                raise ValueError(
                    f"supervision record {i} ({rec.task_id} step {rec.step}): tokenized for '{rec.model_name}', "
                    f"whose token ids do not decode to its formatted_prompt with {lm.name}'s tokenizer; rebuild the "
                    "supervision set for this model"
                )
        out.append(rec.pair())
    return out


def supervision_summary(records: Sequence[SupervisionRecord]) -> dict[str, float | int]:
    """Counts and sizes of a supervision set: pairs per source, tasks, mean key / prompt tokens."""
    n = len(records)
    return {
        "pairs": n,
        "task-level": sum(r.source == "task-level" for r in records),
        "step-level": sum(r.source == "step-level" for r in records),
        "user": sum(r.source == "user" for r in records),
        "tasks": len({r.task_id for r in records}),
        "mean key tokens": round(sum(len(r.key_positions) for r in records) / n, 1) if n else 0,
        "mean prompt tokens": round(sum(len(r.token_ids) for r in records) / n, 1) if n else 0,
    }
