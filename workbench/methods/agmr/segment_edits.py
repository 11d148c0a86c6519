"""Segment edits of a memory entry (AGMR's refiner replies) applied and checked."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.memory.segment_text import parse_segment_text
from workbench.memory.trajectory import Segment
from workbench.methods.agmr.stage_types import SegmentEdit

__all__ = ["SegmentEditError", "apply_segment_edits"]


class SegmentEditError(ValueError):
    """Edits that cannot be applied together (index out of range, two edits of one segment)."""


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
