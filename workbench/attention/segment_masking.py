"""Which memory segments the segment-masking test removes (AGMR section 2.1, figure 3).

Segments are ranked by peak utilization c^max_l = max_t C[l, t]; the test re-runs the task once without the top
20% and once without the bottom 20%. This module only chooses the indices; the re-run belongs to the agent loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxtyping import Float
from torch import Tensor

from workbench.attention.utilization import UtilizationMatrix

__all__ = ["DropSegments", "SegmentMaskChoice", "segments_to_mask"]


@dataclass(frozen=True)
class SegmentMaskChoice:
    """Segments to remove for the high- and low-utilization arms.

    Attributes:
        top: the ``k`` segments of highest c^max (ascending index order).
        bottom: the ``k`` segments of lowest c^max (ascending index order).
        c_max: c^max per segment, the ranking key.
        k: how many segments each arm removes.
    """

    top: tuple[int, ...]
    bottom: tuple[int, ...]
    c_max: tuple[float, ...]
    k: int


def segments_to_mask(C: Float[Tensor, "segment step"] | UtilizationMatrix, fraction: float = 0.2) -> SegmentMaskChoice:
    """Choose the top and bottom ``fraction`` of segments by peak utilization.

    ``k = max(1, floor(fraction * n_segments + 0.5))`` (20% of 7 segments is 1, of 8 is 2). Ties are broken by
    segment index (the earlier segment ranks first in both orders), so the choice is deterministic. With fewer
    than ``2k`` segments the two arms overlap.

    Args:
        C: the utilization matrix ``[n_segments, n_steps]`` (or a UtilizationMatrix).
        fraction: share of segments per arm, in (0, 1].

    Returns:
        The :class:`SegmentMaskChoice`.
    """
    if isinstance(C, UtilizationMatrix):
        C = C.C
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction={fraction} must be in (0, 1]")
    if C.ndim != 2 or C.shape[0] == 0 or C.shape[1] == 0:
        raise ValueError(f"C must be a non-empty [segment, step] matrix, got shape {tuple(C.shape)}")
    c_max = [float(v) for v in C.max(dim=1).values]
    n = len(c_max)
    k = max(1, math.floor(fraction * n + 0.5))
    top = sorted(range(n), key=lambda i: (-c_max[i], i))[:k]
    bottom = sorted(range(n), key=lambda i: (c_max[i], i))[:k]
    return SegmentMaskChoice(top=tuple(sorted(top)), bottom=tuple(sorted(bottom)), c_max=tuple(c_max), k=k)


def _with_segment(piece, segment: int):
    return piece._replace(segment=segment) if hasattr(piece, "_replace") else (piece[0], segment, piece[2])


class DropSegments:
    """A memory policy wrapper that removes chosen segments from the entry the wrapped policy shows.

    The remaining segments are renumbered 0..L'-1 in their original order, so the prompt layout (and any C
    computed on the re-run) sees an ordinary, shorter entry. Pieces outside any segment (the memory's room
    description and task line) stay.

    Args:
        policy (MemoryPolicy): the wrapped :class:`~workbench.agents.policy.MemoryPolicy` (e.g. ``RetrievedTrajectory``).
        drop: task_id -> segment indices to remove (indices of the wrapped policy's entry); tasks not listed
            keep their whole memory.
    """

    def __init__(self, policy, drop: dict[str, tuple[int, ...] | list[int] | set[int]]):
        self.policy = policy
        self.drop = {task_id: frozenset(int(i) for i in idx) for task_id, idx in drop.items()}
        self.name = f"{policy.name}-drop"
        self._drop: frozenset[int] = frozenset()

    def begin(self, task, goal: str, room: str) -> None:
        self.policy.begin(task, goal, room)
        self._drop = self.drop.get(task.task_id, frozenset())

    def memory(self, step: int, history: list):
        from dataclasses import replace

        block = self.policy.memory(step, history)
        if not self._drop or not block.pieces:
            return block
        kept = sorted({p[1] for p in block.pieces if p[1] is not None} - self._drop)
        renumber = {old: new for new, old in enumerate(kept)}
        pieces = tuple(_with_segment(p, renumber[p[1]]) if p[1] is not None else p
                       for p in block.pieces if p[1] is None or p[1] in renumber)
        entry = block.entry
        if entry is not None:
            entry = entry.model_copy(update={"segments": tuple(s for i, s in enumerate(entry.segments)
                                                               if i not in self._drop)})
        return replace(block, pieces=pieces, entry=entry,
                       meta={**block.meta, "dropped_segments": sorted(self._drop)})

    def observe(self, step, next_observation: str) -> None:
        self.policy.observe(step, next_observation)
