"""Segment text layout and segment edits: how a refiner's output turns into a new memory.

The refiner writes segments as ``Observation:`` / ``Thought:`` / ``Action:`` lines, the layout the stage
prompts show memory in, and :func:`apply_segment_edits` applies its edits to the original segment list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from workbench.llm.schemas import SegmentEdit
from workbench.memory.trajectory import Segment

__all__ = ["segment_text", "parse_segment_text", "apply_segment_edits", "SegmentEditError"]

_LINE = re.compile(r"^(Observation|Thought|Action):\s?(.*)$", re.IGNORECASE)


class SegmentEditError(ValueError):
    """Edits that cannot be applied together (index out of range, two edits of one segment)."""


def segment_text(seg: Segment, *, observation: bool = True) -> str:
    """Render a segment in the stage-prompt layout (one labelled line per part)."""
    lines = []
    if observation and seg.observation:
        lines.append(f"Observation: {seg.observation}")
    if seg.thought:
        lines.append(f"Thought: {seg.thought}")
    if seg.action:
        lines.append(f"Action: {seg.action}")
    return "\n".join(lines)


def parse_segment_text(text: str) -> Segment:
    """Inverse of :func:`segment_text`. Unlabelled lines continue the previous part; with no label at
    all, the whole text is taken as a thought (a note the agent reads, never an action it would copy)."""
    parts: dict[str, list[str]] = {}
    current: str | None = None
    for line in (text or "").strip().splitlines():
        m = _LINE.match(line.strip())
        if m:
            current = m.group(1).lower()
            parts.setdefault(current, []).append(m.group(2).strip())
        elif current is not None:
            parts[current].append(line.strip())
    if not parts:
        return Segment(thought=(text or "").strip() or None)

    def join(key: str) -> str:
        return " ".join(p for p in parts.get(key, []) if p).strip()

    return Segment(observation=join("observation"), thought=join("thought") or None, action=join("action"))


def apply_segment_edits(segments: Sequence[Segment], edits: Sequence[SegmentEdit]) -> tuple[Segment, ...]:
    """Apply edits whose indices all refer to the ORIGINAL ``segments``.

    Inserts at index ``k`` go before original segment ``k`` in the order given (``k == len`` appends);
    each original segment may be replaced or deleted at most once.

    Raises:
        SegmentEditError: an index out of range, or two replace/delete edits of the same segment.
    """
    n = len(segments)
    inserts: dict[int, list[Segment]] = {}
    change: dict[int, SegmentEdit] = {}
    for e in edits:
        limit = n if e.op == "insert" else n - 1
        if e.index > limit:
            raise SegmentEditError(f"{e.op} at index {e.index}, but the memory has {n} segments")
        if e.op == "insert":
            inserts.setdefault(e.index, []).append(parse_segment_text(e.text or ""))
        elif e.index in change:
            raise SegmentEditError(f"segment {e.index} is edited twice ({change[e.index].op} and {e.op})")
        else:
            change[e.index] = e
    out: list[Segment] = []
    for k in range(n + 1):
        out += inserts.get(k, [])
        if k == n:
            break
        e = change.get(k)
        if e is None:
            out.append(segments[k])
        elif e.op == "replace":
            out.append(parse_segment_text(e.text or ""))
    return tuple(out)
