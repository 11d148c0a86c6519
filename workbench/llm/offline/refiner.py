"""Offline attention-guided refiner: a documented rule from utilization scores to pattern and edits.

Failure branch, on column ``c = C[:, j]`` at the critical step and the target (supporting) segment ``i``.
Scores are compared relative to the column's peak, ``z = c / max(c)``, because raw attention mass depends
on prompt length and model:

1. ``z[i] < ATTENDED`` -> **missed_relevant**: the target was not read. Edit: make it salient (a task cue
   and the key action words in its thought).
2. else, any other segment with ``z >= COMPARABLE * z[i]`` -> **distracted_by_irrelevant**: something else
   was read as much as the target. Edits: strengthen the target as in 1, and scope the strongest
   ``MAX_DISTRACTORS`` distractors with a guardrail note.
3. else -> **attended_but_wrong**: the target was clearly the most-read segment, yet the agent erred, so its
   content misled. Edit: rewrite its thought to state the correct action and rule out the wrong one.

Success branch: a redundancy candidate is deleted only if weakly utilized by AGMR's ALFWorld criterion
(appendix E.2): ``c_max < 1.2 * median_k(c_max_k)`` and ``c_max / c_mean < 3.5``. The segment after a
deleted one loses its observation, which reported the outcome of the deleted move.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from workbench.memory.trajectory import Segment

from ..edits import segment_text
from ..inputs import FailureRefinerInput, SuccessRefinerInput
from ..schemas import Refinement, SegmentEdit
from workbench.envs.alfworld_text import parse_action

__all__ = ["diagnose", "refine_failure", "weakly_utilized", "refine_success", "ATTENDED", "COMPARABLE"]

ATTENDED = 0.5
COMPARABLE = 0.8
MAX_DISTRACTORS = 2
PEAK_RATIO = 1.2  # appendix E.2, ALFWorld
CONCENTRATION = 3.5


def diagnose(column: Sequence[float], target: int) -> tuple[str, tuple[int, ...]]:
    """Pattern and distractor segments for one utilization column (rule in the module docstring)."""
    peak = max(column, default=0.0)
    z = [v / peak if peak > 0 else 0.0 for v in column]
    if z[target] < ATTENDED:
        return "missed_relevant", ()
    rivals = sorted((k for k, v in enumerate(z) if k != target and v >= COMPARABLE * z[target]),
                    key=lambda k: (-z[k], k))
    if rivals:
        return "distracted_by_irrelevant", tuple(rivals[:MAX_DISTRACTORS])
    return "attended_but_wrong", ()


def _with_thought(seg: Segment, thought: str) -> str:
    return segment_text(Segment(observation=seg.observation, thought=thought, action=seg.action))


def refine_failure(inp: FailureRefinerInput) -> Refinement:
    """Diagnose the failure pattern and emit the matching segment edits."""
    r, segs, goal = inp.reflection, inp.memory.segments, inp.memory.goal
    i = r.supporting_segment
    pattern, distractors = diagnose(inp.utilization, i)
    target = segs[i]
    kind = parse_action(r.correct_action).template
    cue = f"KEY STEP for '{goal}': next do '{target.action}' (the '{kind}' step); do not skip it."
    if pattern == "attended_but_wrong":
        thought = (f"Do exactly '{target.action}' here (a '{kind}' action). Do not '{r.wrong_action}' "
                   "instead; it is not needed at this point.")
        edits = [SegmentEdit(index=i, op="replace", text=_with_thought(target, thought))]
        why = f"segment {i} was the most attended at step {r.critical_step} but the agent still erred"
    else:
        thought = cue + (f" {target.thought}" if target.thought else "")
        edits = [SegmentEdit(index=i, op="replace", text=_with_thought(target, thought))]
        why = f"segment {i} scored below {ATTENDED} of the peak at step {r.critical_step}"
        if pattern == "distracted_by_irrelevant":
            for d in distractors:
                seg = segs[d]
                note = (f"(Scope: this step only does '{seg.action}'. It is not the '{kind}' step; "
                        f"do not repeat it when the task needs '{r.correct_action}'.)")
                edits.append(SegmentEdit(index=d, op="replace",
                                         text=_with_thought(seg, f"{seg.thought} {note}" if seg.thought else note)))
            why = f"segments {list(distractors)} drew attention comparable to segment {i}"
    return Refinement(pattern=pattern, target_segment=i, distractor_segments=distractors, edits=tuple(edits),
                      rationale=why)


def weakly_utilized(matrix: Sequence[Sequence[float]]) -> set[int]:
    """Segments weakly utilized by the appendix-E.2 ALFWorld rule (rows of ``matrix`` are segments)."""
    if not matrix:
        return set()
    c_max = [max(row, default=0.0) for row in matrix]
    c_mean = [sum(row) / len(row) if row else 0.0 for row in matrix]
    med = statistics.median(c_max)
    weak = set()
    for k, (mx, mean) in enumerate(zip(c_max, c_mean)):
        concentration = mx / mean if mean > 0 else 0.0
        if mx < PEAK_RATIO * med and concentration < CONCENTRATION:
            weak.add(k)
    return weak


def refine_success(inp: SuccessRefinerInput) -> Refinement:
    """Delete redundancy candidates that are also weakly utilized; tidy the segment after each deletion."""
    weak = weakly_utilized(inp.utilization)
    candidates = {r.index for r in inp.reflection.redundant_segments if r.index < len(inp.memory.segments)}
    drop = sorted(candidates & weak)
    edits = [SegmentEdit(index=k, op="delete") for k in drop]
    for k in drop:
        nxt = k + 1
        seg = inp.memory.segments[nxt] if nxt < len(inp.memory.segments) else None
        if seg is not None and nxt not in drop and seg.observation and (seg.thought or seg.action):
            edits.append(SegmentEdit(index=nxt, op="replace",
                                     text=segment_text(Segment(thought=seg.thought, action=seg.action))))
    kept = sorted(candidates - weak)
    why = f"deleted {drop} (redundant and weakly utilized)" + (f"; kept {kept} (utilized)" if kept else "")
    return Refinement(pattern="low_utilization_redundancy", edits=tuple(edits), rationale=why)
