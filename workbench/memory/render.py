"""The one canonical text of a memory entry as an ALFWorld demonstration (ReAct layout), and its typed pieces.

Layout (every line ends with a newline)::

    <room description>                      observation, segment None
    Your task is to: <goal>                 header,      segment None
    > think: <thought 0>\\nOK.               thought,     segment 0
    > <action 0>                            action,      segment 0
    <observation after action 0>            observation, segment 1   (= segments[1].observation)
    > think: <thought 1>\\nOK.               thought,     segment 1
    > <action 1>                            action,      segment 1
    ...
    <final observation>                     observation, segment L-1 (Trajectory.meta["final_observation"])

A piece's ``segment`` is the index of the Segment whose field produced its text, so segment k's span covers
exactly what editing or masking segment k touches: segment k's observation is the one *before* action k, which
the text shows right after action k-1. The room description and the task line belong to no segment (None);
the final observation, which no Segment holds, closes the last segment. Thoughts follow ReAct's ALFWorld
prompts, where thinking is an action the environment answers with "OK.".

Prompt layouts tokenize :func:`render_pieces` piece by piece to get each segment's token span and the
observation tokens; ``"".join(p.text for p in render_pieces(x)) == render_memory(x)`` always holds.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from workbench.memory.trajectory import MemoryEntry, Trajectory

__all__ = ["Piece", "PieceKind", "render_pieces", "render_memory", "segment_char_spans", "GOAL_PREFIX"]

PieceKind = Literal["header", "observation", "thought", "action"]
GOAL_PREFIX = "Your task is to: "


class Piece(NamedTuple):
    """One typed piece of a rendered memory: ``kind``, owning ``segment`` (None: header region), ``text``."""

    kind: PieceKind
    segment: int | None
    text: str


def _entry_and_final(item: MemoryEntry | Trajectory, final_observation: str | None) -> tuple[MemoryEntry, str | None]:
    if isinstance(item, Trajectory):
        final = final_observation if final_observation is not None else item.meta.get("final_observation")
        return MemoryEntry.from_trajectory(item), final
    if isinstance(item, MemoryEntry):
        return item, final_observation
    raise TypeError(f"render: expected a MemoryEntry or Trajectory, got {type(item).__name__}")


def render_pieces(
    item: MemoryEntry | Trajectory, *, final_observation: str | None = None, thoughts: bool = True
) -> list[Piece]:
    """The canonical rendering of ``item`` as ordered typed pieces (see the module docstring).

    Args:
        item: a memory entry, or a trajectory (segmented with ``MemoryEntry.from_trajectory``).
        final_observation: the observation after the last action; defaults to a trajectory's
            ``meta["final_observation"]`` (a MemoryEntry has none).
        thoughts: include ``> think: ...`` lines; False renders actions and observations only.

    Returns:
        Pieces whose texts concatenate to :func:`render_memory`'s string; empty fields produce no piece.
    """
    entry, final = _entry_and_final(item, final_observation)
    pieces: list[Piece] = []
    if entry.initial_observation:
        pieces.append(Piece("observation", None, entry.initial_observation + "\n"))
    pieces.append(Piece("header", None, f"{GOAL_PREFIX}{entry.goal}\n"))
    for k, seg in enumerate(entry.segments):
        # Segment 0's observation is the room description, stored once in initial_observation; a segment 0
        # built elsewhere may repeat it, and showing it twice would not be what the agent saw.
        if seg.observation and not (k == 0 and seg.observation == entry.initial_observation):
            pieces.append(Piece("observation", k, seg.observation + "\n"))
        if thoughts and seg.thought:
            pieces.append(Piece("thought", k, f"> think: {seg.thought}\nOK.\n"))
        if seg.action:
            pieces.append(Piece("action", k, f"> {seg.action}\n"))
    if final and entry.segments:
        pieces.append(Piece("observation", len(entry.segments) - 1, final + "\n"))
    return pieces


def render_memory(
    item: MemoryEntry | Trajectory, *, final_observation: str | None = None, thoughts: bool = True
) -> str:
    """The canonical demonstration text of ``item`` (arguments as in :func:`render_pieces`).

    >>> from workbench.memory import MemoryEntry, Segment
    >>> e = MemoryEntry(entry_id="e", task_id="t", goal="put a apple in fridge.",
    ...                 segments=(Segment(action="go to fridge 1"), Segment(observation="The fridge 1 is closed.",
    ...                                                                     action="open fridge 1")))
    >>> print(render_memory(e), end="")
    Your task is to: put a apple in fridge.
    > go to fridge 1
    The fridge 1 is closed.
    > open fridge 1
    """
    return "".join(p.text for p in render_pieces(item, final_observation=final_observation, thoughts=thoughts))


def segment_char_spans(pieces: list[Piece]) -> dict[int, tuple[int, int]]:
    """Character span ``[start, end)`` of each segment in the concatenated text of ``pieces``.

    A segment's pieces are contiguous in the canonical layout, so one span per segment covers them all.
    """
    spans: dict[int, tuple[int, int]] = {}
    pos = 0
    for piece in pieces:
        end = pos + len(piece.text)
        if piece.segment is not None:
            start = spans[piece.segment][0] if piece.segment in spans else pos
            spans[piece.segment] = (start, end)
        pos = end
    return spans
