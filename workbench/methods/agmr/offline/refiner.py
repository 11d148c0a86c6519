"""Offline attention-guided refiner: a documented rule from utilization scores to pattern and edits.

Failure branch, on column ``c = C[:, j]`` at the critical step and the target (supporting) segment ``i``.
The pattern is the workbench's one rule, :func:`workbench.attention.diagnose_column` (alpha 0.5, gamma 0.8;
"attended" relative to the payload's ``scale``, the entry's median c^max, or to the column's peak when the
caller sends no scale):

1. ``c[i] < alpha * scale`` -> **missed_relevant**: the target was not read. Edit: make it salient (a task cue
   and the key action words in its thought).
2. else, any other segment with ``c[k] >= gamma * c[i]`` -> **distracted_by_irrelevant**: something else
   was read as much as the target. Edits: strengthen the target as in 1, and scope the strongest
   ``MAX_DISTRACTORS`` distractors with a guardrail note.
3. else -> **attended_but_wrong**: the target was clearly the most-read segment, yet the agent erred, so its
   content misled. Edit: rewrite its thought to state the correct action and rule out the wrong one.

Without the attention-guided refiner (AGMR Table 2, "w/o AGR": the reflector edits directly, no C), a text-only
edit cannot tell the three patterns apart, so :func:`direct_edit_failure` always corrects the supporting segment
in place (the pattern-1 edit), and :func:`direct_edit_success` deletes every redundancy candidate, utilized or not.

Success branch: a redundancy candidate is deleted only if weakly utilized by
:func:`workbench.attention.weakly_used_segments` under the payload's rule (AGMR appendix E.2; ALFWorld's
relative rule ``c_max < 1.2 * median_k(c_max_k)`` and ``c_max / c_mean < 3.5`` by default). The segment after a
deleted one loses its observation, which reported the outcome of the deleted move.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from workbench.attention.diagnosis import (
    DiagnosisConfig,
    diagnose_column,
    weakly_used_segments,
)
from workbench.envs.alfworld_text import parse_action
from workbench.memory.segment_text import parse_segment_text, segment_text
from workbench.memory.trajectory import Segment
from workbench.methods.agmr.stage_types import (
    MAX_SEGMENT_CHARS,
    DirectEdit,
    DirectFailureEditInput,
    DirectSuccessEditInput,
    FailureRefinerInput,
    FailureReflection,
    Refinement,
    SegmentEdit,
    SuccessRefinerInput,
)

__all__ = ["alfworld_kind", "diagnose", "refine_failure", "weakly_utilized", "refine_success", "direct_edit_failure",
           "direct_edit_success", "correction_edit", "deletion_edits", "ATTENDED", "COMPARABLE"]

ATTENDED = DiagnosisConfig().attended_fraction
COMPARABLE = DiagnosisConfig().distractor_ratio
MAX_DISTRACTORS = 2


def alfworld_kind(action: str) -> str:
    """An ALFWorld action's kind: its command template (``take``, ``put``, ``go to`` ...)."""
    return parse_action(action).template


def diagnose(column: Sequence[float], target: int, scale: float | None = None) -> tuple[str, tuple[int, ...]]:
    """Pattern and the distractors to edit (at most ``MAX_DISTRACTORS``, only when distracted) for one column."""
    d = diagnose_column(column, target, scale)
    return d.pattern, d.distractors[:MAX_DISTRACTORS] if d.pattern == "distracted_by_irrelevant" else ()


def fitted_text(seg: Segment) -> str:
    """``seg``'s edit text within a stage reply's segment limit (``MAX_SEGMENT_CHARS``): a segment over it (a
    ScienceWorld "look around" lists every object of a room) keeps the head of its observation, marked "…"; one within
    it, every ALFWorld segment, is rendered whole."""
    text = segment_text(seg)
    if len(text) <= MAX_SEGMENT_CHARS or not seg.observation:
        return text
    rest = len(segment_text(Segment(observation="", thought=seg.thought, action=seg.action)))
    room = MAX_SEGMENT_CHARS - rest - len("Observation: \n …")
    return segment_text(Segment(observation=seg.observation[:max(room, 0)].rstrip() + " …", thought=seg.thought,
                                action=seg.action))


def _with_thought(seg: Segment, thought: str) -> str:
    return fitted_text(Segment(observation=seg.observation, thought=thought, action=seg.action))


def _add_note(thought: str | None, note: str, first: bool = False) -> str:
    """``thought`` with ``note`` added once (an edit applied again changes nothing)."""
    if thought and note in thought:
        return thought
    if not thought:
        return note
    return f"{note} {thought}" if first else f"{thought} {note}"


def correction_edit(segs: Sequence[Segment], r: FailureReflection,
                    action_kind: Callable[[str], str] = alfworld_kind) -> SegmentEdit:
    """In-place correction of the supporting segment: its thought states the correct action, rules out the wrong one.
    ``action_kind``: an action's kind on the benchmark (ALFWorld's command template by default)."""
    i = r.supporting_segment
    target, kind = segs[i], action_kind(r.correct_action)
    if action_kind(target.action) == kind:
        thought = (f"Do exactly '{target.action}' here (a '{kind}' action). Do not '{r.wrong_action}' "
                   "instead; it is not needed at this point.")
    else:  # the memory has no step of that kind: name the action the task needs, not this segment's
        thought = (f"At this point the task needs '{r.correct_action}' (a '{kind}' action). Do not "
                   f"'{r.wrong_action}' instead; it is not needed at this point.")
    if target.thought and thought in target.thought:  # already corrected (perhaps with more): leave it
        thought = target.thought
    return SegmentEdit(index=i, op="replace", text=_with_thought(target, thought))


def deletion_edits(segs: Sequence[Segment], drop: Sequence[int]) -> list[SegmentEdit]:
    """Delete ``drop`` and smooth the neighbour: a segment's observation is what the previous action led to, so
    after deleting the run of segments k..m, segment m+1 (which reported a_m's outcome) shows what segment k showed
    instead: the outcome of a_(k-1), the action now before it. Every kept action keeps its outcome."""
    gone = set(drop)
    edits = [SegmentEdit(index=k, op="delete") for k in drop]
    for k in sorted(gone):
        if k - 1 in gone:
            continue  # not the first of its run
        m = k
        while m + 1 in gone:
            m += 1
        nxt = m + 1
        seg = segs[nxt] if nxt < len(segs) else None
        if seg is not None and seg.observation and (seg.thought or seg.action):
            edits.append(SegmentEdit(index=nxt, op="replace", text=fitted_text(
                Segment(observation=segs[k].observation, thought=seg.thought, action=seg.action))))
    return edits


def _scope_edit(segs: Sequence[Segment], d: int, kind: str, r: FailureReflection) -> SegmentEdit:
    seg = segs[d]
    note = (f"(Scope: this step only does '{seg.action}'. It is not the '{kind}' step; "
            f"do not repeat it when the task needs '{r.correct_action}'.)")
    return SegmentEdit(index=d, op="replace", text=_with_thought(seg, _add_note(seg.thought, note)))


def key_step_cue(goal: str, target: Segment, kind: str) -> str:
    """The salience cue put first in the target segment's thought."""
    return f"KEY STEP for '{goal}': next do '{target.action}' (the '{kind}' step); do not skip it."


def escalated_target_edit(segs: Sequence[Segment], r: FailureReflection, goal: str,
                          action_kind: Callable[[str], str] = alfworld_kind) -> SegmentEdit:
    """The target with both the in-place correction and the salience cue: a retry's edit when the plain one is
    already made."""
    i, kind = r.supporting_segment, action_kind(r.correct_action)
    corrected = parse_segment_text(correction_edit(segs, r, action_kind).text or "")
    thought = _add_note(corrected.thought, key_step_cue(goal, segs[i], kind), first=True)
    return SegmentEdit(index=i, op="replace", text=_with_thought(segs[i], thought))


def strongest_rivals(column: Sequence[float], i: int) -> list[int]:
    """The ``MAX_DISTRACTORS`` most-attended segments of a column other than ``i`` (ties: the earlier one)."""
    return sorted((k for k in range(len(column)) if k != i), key=lambda k: (-column[k], k))[:MAX_DISTRACTORS]


def _as_edited(seg: Segment) -> Segment:
    """What an unchanged ``seg`` reads as in an edit (its observation cut where :func:`fitted_text` cuts it)."""
    return seg if len(segment_text(seg)) <= MAX_SEGMENT_CHARS else parse_segment_text(fitted_text(seg))


def _changes(segs: Sequence[Segment], edits: Sequence[SegmentEdit]) -> bool:
    return any(e.op != "replace" or parse_segment_text(e.text or "") != _as_edited(segs[e.index]) for e in edits)


def refine_failure(inp: FailureRefinerInput, action_kind: Callable[[str], str] = alfworld_kind) -> Refinement:
    """Diagnose the failure pattern and emit the matching segment edits.

    A proposal that would leave the memory as it is (the same reflection on a retry, after the same edit was
    already made) is escalated once: the target gets both the salience cue and the in-place correction, and the
    two most-attended other segments of the column get scope notes. A retry then tries the stronger edit instead
    of failing as "unchanged".
    """
    r, segs, goal = inp.reflection, inp.memory.segments, inp.memory.goal
    i = r.supporting_segment
    pattern, distractors = diagnose(inp.utilization, i, inp.scale)
    target = segs[i]
    kind = action_kind(r.correct_action)
    cue = key_step_cue(goal, target, kind)
    if pattern == "attended_but_wrong":
        edits = [correction_edit(segs, r, action_kind)]
        why = f"segment {i} was the most attended at step {r.critical_step} but the agent still erred"
    else:
        thought = _add_note(target.thought, cue, first=True)
        edits = [SegmentEdit(index=i, op="replace", text=_with_thought(target, thought))]
        why = (f"segment {i} scored below {ATTENDED} of the {'entry scale' if inp.scale is not None else 'peak'} "
               f"at step {r.critical_step}")
        if pattern == "distracted_by_irrelevant":
            edits += [_scope_edit(segs, d, kind, r) for d in distractors]
            why = f"segments {list(distractors)} drew attention comparable to segment {i}"
    if not _changes(segs, edits):
        rivals = strongest_rivals(inp.utilization, i)
        edits = [escalated_target_edit(segs, r, goal, action_kind)]
        edits += [_scope_edit(segs, d, kind, r) for d in rivals]
        distractors = tuple(rivals)
        why += "; the edit was already made, so it is escalated (cue + correction, the strongest rivals scoped)"
    return Refinement(pattern=pattern, target_segment=i, distractor_segments=distractors, edits=tuple(edits),
                      rationale=why)


def weakly_utilized(matrix: Sequence[Sequence[float]], rule: str = "relative") -> set[int]:
    """Segments weakly utilized under ``rule`` (rows of ``matrix`` are segments; appendix E.2)."""
    if not matrix or not matrix[0]:
        return set()
    return set(weakly_used_segments(torch.tensor(matrix, dtype=torch.float32), rule=rule))


def refine_success(inp: SuccessRefinerInput) -> Refinement:
    """Delete redundancy candidates that are also weakly utilized; tidy the segment after each deletion."""
    weak = weakly_utilized(inp.utilization, inp.weak_rule)
    candidates = {r.index for r in inp.reflection.redundant_segments if r.index < len(inp.memory.segments)}
    drop = sorted(candidates & weak)
    edits = deletion_edits(inp.memory.segments, drop)
    kept = sorted(candidates - weak)
    why = f"deleted {drop} (redundant and weakly utilized)" + (f"; kept {kept} (utilized)" if kept else "")
    return Refinement(pattern="low_utilization_redundancy", edits=tuple(edits), rationale=why)


def direct_edit_failure(inp: DirectFailureEditInput, action_kind: Callable[[str], str] = alfworld_kind) -> DirectEdit:
    """w/o AGR, failure branch: correct the supporting segment in place (no utilization to choose another edit).

    Like the refiner, a retry whose correction is already made is escalated once instead of failing as
    "unchanged": the target also gets the salience cue (without C there are no rivals to scope), so the
    ablation gets as many real retries as AGMR."""
    r, segs = inp.reflection, inp.memory.segments
    edits = [correction_edit(segs, r, action_kind)]
    why = f"segment {r.supporting_segment} should have led to '{r.correct_action}'"
    if not _changes(segs, edits):
        edits = [escalated_target_edit(segs, r, inp.memory.goal, action_kind)]
        why += "; the correction was already made, so it is escalated (cue + correction)"
    return DirectEdit(edits=tuple(edits), rationale=why)


def direct_edit_success(inp: DirectSuccessEditInput) -> DirectEdit:
    """w/o AGR, success branch: delete every semantically redundant segment."""
    drop = sorted({r.index for r in inp.reflection.redundant_segments if r.index < len(inp.memory.segments)})
    return DirectEdit(edits=tuple(deletion_edits(inp.memory.segments, drop)), rationale=f"deleted {drop} (redundant)")
