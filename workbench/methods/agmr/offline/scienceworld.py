"""Offline reflector and refiner for AGMR's refinement on ScienceWorld (``offline-scienceworld``): rules, no model.

The ScienceWorld counterpart of ALFWorld's offline stages (:mod:`.reflector`, :mod:`.refiner`), for the same use:
a refinement whose reflector is the plan-tracking oracle (``workbench refine --reflector-sees-plan``), so the
attention-guided refiner and the verification by re-execution are measured apart from an LLM reflector's quality.

Failure branch. The plan is the refinement task's gold path (the simulator's solver; a dev or train variation,
never test) less its looks (``look around``, ``look at``, ``look in``, ``inventory``, ``examine``: they change
nothing in the world, and a run that skips one has not left the plan). The run is replayed against it with a
pointer: an action equal to the next plan action advances it, anything else is tolerated (ScienceWorld's valid
actions are exact strings, the gold path's among them). The *earliest critical error* is the first action after the
last advance (from there the run never made progress on the plan), the correct action the plan's next one. Without a plan, the memory's own actions are the plan. The
supporting segment is the memory segment whose action is of the correct action's kind (its verb: ``focus on``,
``move``, ``activate`` ...) and shares the most words with it, then the one nearest the progress made.

The refiner is ALFWorld's rule (:func:`.refiner.refine_failure`: the pattern from ``C[:, j]``, then the matching
edit) with ScienceWorld's action kinds.

Success branch. A memory segment is a redundancy candidate when its action cannot have guided progress: the
simulator refused it (``No known action matches that input.``, ``It's not clear how to ...``, ...), or it repeats the
action just before it. The refiner deletes a candidate only if C reads it weakly (E.2's rule for SciWorld by
default, ``global_capped``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from workbench.envs.scienceworld import REFUSALS, is_refusal
from workbench.memory.trajectory import Segment
from workbench.methods.agmr.offline.refiner import direct_edit_failure, refine_failure
from workbench.methods.agmr.stage_types import (
    DirectEdit,
    DirectFailureEditInput,
    FailureRefinerInput,
    FailureReflection,
    RedundantSegment,
    Refinement,
    ReflectorInput,
    SuccessReflection,
)

__all__ = ["VERBS", "LOOKS", "action_kind", "plan_progress", "supporting_segment", "reflect_failure", "reflect_success",
           "refine_failure_sw", "direct_edit_failure_sw", "REFUSALS"]

#: ScienceWorld's action verbs (its action templates), longest first so ``look around`` wins over ``look``
VERBS = tuple(sorted((
    "open", "close", "deactivate", "activate", "connect", "disconnect", "use", "look around", "look at", "look in",
    "read", "move", "pour", "mix", "teleport to", "go to", "pick up", "put down", "focus on", "wait1", "wait", "eat",
    "flush", "dunk", "inventory", "task", "examine", "lift", "drop"), key=len, reverse=True))
#: the kinds of action that change nothing in the world (left out of the plan the reflector tracks)
LOOKS = ("look around", "look at", "look in", "inventory", "examine")
_WORD = re.compile(r"[a-z0-9]+")


def _norm(action: str) -> str:
    return " ".join(action.lower().split())


def action_kind(action: str) -> str:
    """A ScienceWorld action's kind: its verb (``focus on substance in metal pot`` -> ``focus on``); an ambiguity
    answer (a bare option number) is ``option``; anything else its first word."""
    a = _norm(action)
    if a.isdigit():
        return "option"
    for verb in VERBS:
        if a == verb or a.startswith(verb + " "):
            return verb
    return a.split(" ", 1)[0] if a else ""


def _words(action: str) -> set[str]:
    """The words of an action other than its verb."""
    kind = action_kind(action)
    return set(_WORD.findall(_norm(action)[len(kind):])) - {"to", "in", "on", "the", "a", "of"}


def plan_progress(actions: Sequence[str], plan: Sequence[str]) -> tuple[int, int]:
    """``(p, j)``: ``p`` plan actions performed in order (exact, case and spacing aside); ``j`` the step right after
    the last advance (clipped to the last action)."""
    p, last = 0, -1
    for t, a in enumerate(actions):
        if p < len(plan) and _norm(a) == _norm(plan[p]):
            p, last = p + 1, t
    return p, min(last + 1, max(len(actions) - 1, 0))


def supporting_segment(segments: Sequence[Segment], action: str, position: float = 0.0) -> int:
    """The memory segment whose action best supports ``action``: same kind, then most shared words, then nearest the
    expected relative ``position`` (0..1), then the earliest."""
    if not segments:
        return 0
    kind, words = action_kind(action), _words(action)
    expected = position * (len(segments) - 1)

    def score(k: int) -> tuple[int, int, float, int]:
        got = segments[k].action or ""
        return (int(action_kind(got) == kind), len(words & _words(got)), -abs(k - expected), -k)

    return max(range(len(segments)), key=score)


def reflect_failure(inp: ReflectorInput) -> FailureReflection:
    """Earliest critical error, correct action and supporting segment of a failed ScienceWorld run (module
    docstring)."""
    actions = inp.trajectory.actions()
    plan = tuple(inp.expert_plan) or tuple(s.action for s in inp.memory.segments if s.action)
    plan = tuple(a for a in plan if action_kind(a) not in LOOKS) or plan
    p, j = plan_progress(actions, plan)
    correct = plan[min(p, len(plan) - 1)] if plan else (actions[j] if actions else "look around")
    wrong = actions[j] if actions else ""
    source = "gold path" if inp.expert_plan else "memory's own actions"
    if plan and p >= len(plan):
        j = max(len(actions) - 1, 0)
        wrong = actions[j] if actions else ""
        reason = f"the run performed every action of the {source}, so the error is its last action"
    elif p == 0:
        reason = f"the run never performed the first action of the {source}, '{correct}'"
    else:
        reason = (f"after '{plan[p - 1]}' (action {p - 1} of the {source}) the run never performed '{correct}', "
                  f"the next one")
    seg = supporting_segment(inp.memory.segments, correct, p / max(len(plan) - 1, 1))
    return FailureReflection(critical_step=j, wrong_action=wrong, correct_action=correct, supporting_segment=seg,
                             reason=reason)


def reflect_success(inp: ReflectorInput) -> SuccessReflection:
    """The memory's redundancy candidates (module docstring): a segment's action is judged by the observation that
    followed it, which is the next segment's (the last one's outcome is not in the memory: never a candidate)."""
    segs = inp.memory.segments
    out = []
    for k in range(len(segs) - 1):
        action, after = segs[k].action or "", segs[k + 1].observation or ""
        if is_refusal(after):
            out.append(RedundantSegment(index=k, reason=f"the simulator refused '{action}': {after[:80]}"))
        elif k and _norm(action) == _norm(segs[k - 1].action or ""):
            out.append(RedundantSegment(index=k, reason=f"'{action}' repeats the step before it"))
    return SuccessReflection(redundant_segments=tuple(out))


def refine_failure_sw(inp: FailureRefinerInput) -> Refinement:
    """The attention-guided refiner's rule (:func:`.refiner.refine_failure`) with ScienceWorld's action kinds."""
    return refine_failure(inp, action_kind)


def direct_edit_failure_sw(inp: DirectFailureEditInput) -> DirectEdit:
    """w/o AGR's in-place correction (:func:`.refiner.direct_edit_failure`) with ScienceWorld's action kinds."""
    return direct_edit_failure(inp, action_kind)
