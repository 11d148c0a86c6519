"""Offline semantic reflector and retrieval analyzer for ALFWorld: plan tracking and template matching.

Failure branch, with the task's expert plan and the run's admissible commands (what ``workbench refine``
records): the run is replayed state by state with the plan-tracking oracle (:mod:`workbench.envs.oracle`).
Progress is the number of the plan's milestones achieved (any instance of the plan's object counts, any route
to it is fine). The run's high-water mark is the first state at which it reached the most milestones it ever
reached; the *earliest critical error* is the first step from there where the run's action differs from the
oracle's: the moment it left every way to the goal, after which it never got further (a run that puts the object
down and takes it again, over and over, erred at the first wrong move after its first take). The correct action
is the oracle's there.

With the plan but no admissible commands, the run is replayed against the plan with a pointer instead: an
action equal to the next plan action advances it, anything else is tolerated, and the error is the first action
after the last advance (exact plan steps: a different but valid route reads as no progress).

Either way the supporting memory segment is the one with the correct action's template, preferring matching
object and receptacle types, then the position in memory closest to the progress made.

Without an expert plan, the memory's own actions are the plan, matched by template and entity types after
renaming the memory task's goal object to this task's (see :func:`reflect_failure`).

Success branch. A memory segment is flagged redundant when its action cannot have guided progress: a
``go to`` followed by no successful interaction before the next move, an exact repeat of an earlier action
with no successful interaction in between, an action the environment answered with "Nothing happens.", an
open immediately undone by a close, or a look/inventory/examine that is not the final step of the task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from workbench.envs.alfworld_text import (
    INTERACTION,
    is_failure,
    normalize,
    parse_action,
    parse_goal,
)
from workbench.envs.oracle import label_state, milestones, progress, replay_state
from workbench.memory.segment_text import segment_text
from workbench.memory.trajectory import Segment, Trajectory
from workbench.methods.agmr.stage_types import (
    FailureReflection,
    RedundantSegment,
    ReflectorInput,
    RetrievalAnalysis,
    RetrievalAnalyzerInput,
    SuccessReflection,
)

__all__ = ["reflect_failure", "reflect_success", "analyze_retrieval", "supporting_segment", "plan_progress",
           "abstract", "redundant_steps"]


def abstract(action: str, rename: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """``(template, x type, y type)`` of an action, with object types renamed (``{"tomato": "apple"}``)."""
    a = parse_action(action)
    x, y = a.types
    rename = rename or {}
    return a.template, rename.get(x, x), rename.get(y, y)


def plan_progress(actions: Sequence[str], plan: Sequence[str], *, same: Callable[[str, str], bool] | None = None
                  ) -> tuple[int, int]:
    """Replay ``actions`` against ``plan``.

    Args:
        same: when an action counts as the plan step; exact (normalised) equality by default.

    Returns:
        ``(p, j)``: ``p`` plan steps achieved in order; ``j`` the step index right after the last progress
        (the earliest step from which the run never advanced again), clipped to the last action.
    """
    same = same or (lambda a, b: normalize(a) == normalize(b))
    p, last = 0, -1
    for t, a in enumerate(actions):
        if p < len(plan) and same(a, plan[p]):
            p, last = p + 1, t
    j = min(last + 1, max(len(actions) - 1, 0))
    return p, j


def supporting_segment(segments: Sequence[Segment], action: str, position: float = 0.0) -> int:
    """Index of the memory segment whose action best supports ``action`` (see module docstring).

    Args:
        segments: the memory.
        action: the action to support.
        position: expected relative position in memory (0..1), the last tie-breaker.
    """
    if not segments:
        return 0
    want = parse_action(action)
    want_types = [t for t in want.types if t]
    expected = position * (len(segments) - 1)

    def score(k: int) -> tuple[int, int, float, int]:
        got = parse_action(segments[k].action)
        same_template = int(got.template == want.template and want.template != "other")
        type_hits = sum(1 for t in want_types if t in got.types)
        return (same_template, type_hits, -abs(k - expected), -k)

    return max(range(len(segments)), key=score)


def _same_kind(a: str, b: str) -> bool:
    return abstract(a) == abstract(b)


def _memory_rename(inp: ReflectorInput) -> dict[str, str]:
    """Map the memory task's goal object onto this task's (a sibling task: tomato -> apple)."""
    mem, cur = parse_goal(inp.memory.goal), parse_goal(inp.trajectory.goal)
    if mem is None or cur is None:
        return {}
    pairs = [(mem.obj, cur.obj), (mem.recep, cur.recep)]
    return {a: b for a, b in pairs if a and b and a != b}


def _milestone_error(inp: ReflectorInput) -> FailureReflection | None:
    """The oracle-based rule of the module docstring; None when the run lacks what it needs."""
    t, plan = inp.trajectory, tuple(inp.expert_plan)
    steps = t.meta.get("steps") or []
    if not plan or not t.steps or len(steps) < t.n_steps or any("admissible" not in s for s in steps[:t.n_steps]):
        return None
    obs, acts = [s.observation for s in t.steps], t.actions()
    adm = [list(s["admissible"]) for s in steps[:t.n_steps]]
    after = [*obs[1:], t.meta.get("final_observation") or ""]
    # state k = before action k (state n: after the last one), each replayed once for the labels and the progress
    states = [replay_state(acts[:k], obs[:k], after[k - 1] if k else "", t.initial_observation)
              for k in range(t.n_steps + 1)]
    labels = [label_state(plan, states[k], adm[k]) for k in range(t.n_steps)]
    prog = [progress(plan, st) for st in states]
    best = max(prog)
    last = prog.index(best)  # the first state with the most milestones the run ever reached
    j = next((k for k in range(min(last, t.n_steps - 1), t.n_steps)
              if labels[k].action is not None and normalize(labels[k].action) != normalize(acts[k])), None)
    if j is None:
        return None
    correct, n_ms = labels[j].action, max(len(milestones(plan)), 1)
    reason = (f"{prog[j]} of {n_ms} milestones done (its best, first reached at step {last}); at step {j} the run "
              f"did '{acts[j]}' where the oracle does '{correct}' ({labels[j].reason}) and never got further")
    seg = supporting_segment(inp.memory.segments, correct, prog[j] / n_ms)
    return FailureReflection(critical_step=j, wrong_action=acts[j], correct_action=correct, supporting_segment=seg,
                             reason=reason)


def reflect_failure(inp: ReflectorInput) -> FailureReflection:
    """Earliest critical error, correct action and supporting segment of a failed run.

    With an expert plan, plan steps must be matched exactly. Without one, the memory's actions are the
    plan and are matched by template and entity types (the memory's goal object renamed to this task's),
    since a sibling task's instance numbers and objects differ; the correct action is then the memory's
    action with that renaming applied.
    """
    by_oracle = _milestone_error(inp)
    if by_oracle is not None:
        return by_oracle
    actions = inp.trajectory.actions()
    if inp.expert_plan:
        plan, same = inp.expert_plan, None
    else:
        rename = _memory_rename(inp)
        plan = tuple(_rename_text(s.action, rename) for s in inp.memory.segments)
        same = _same_kind  # the plan is already renamed to this task's objects
    p, j = plan_progress(actions, plan, same=same)
    correct = plan[min(p, len(plan) - 1)] if plan else (actions[j] if actions else "look")
    wrong = actions[j] if actions else ""
    if p >= len(plan) and plan:
        reason = "the run completed every step of the reference plan, so the error is its last action"
        j = max(len(actions) - 1, 0)
        wrong = actions[j] if actions else ""
    elif p == 0:
        reason = f"the run never performed the first plan step '{correct}'"
    else:
        reason = (f"after '{plan[p - 1]}' (plan step {p - 1}) the run left the plan and never performed "
                  f"'{correct}'")
    seg = supporting_segment(inp.memory.segments, correct, p / max(len(plan) - 1, 1))
    return FailureReflection(critical_step=j, wrong_action=wrong, correct_action=correct,
                             supporting_segment=seg, reason=reason)


def _rename_text(action: str, rename: Mapping[str, str]) -> str:
    text = normalize(action)
    for a, b in rename.items():
        text = re.sub(rf"\b{re.escape(a)}\b", b, text)
    return text


def _idle_visit(acts: Sequence, results: Sequence[str], k: int) -> bool:
    """True when the ``go to`` at ``k`` is followed by no successful interaction before the next move."""
    for a, res in zip(acts[k + 1:], results[k + 1:]):
        if a.template == "go to X":
            return True
        if a.template in INTERACTION and not is_failure(res):
            return False
    return True


def redundant_steps(segments: Sequence[Segment]) -> dict[int, str]:
    """Segment index -> why its action cannot have guided progress (the success-branch rules)."""
    flags: dict[int, str] = {}
    acts = [parse_action(s.action) for s in segments]
    results = [s.observation for s in segments[1:]] + [""]  # what each action produced
    seen: set[str] = set()
    last = len(segments) - 1
    for k, a in enumerate(acts):
        nxt = acts[k + 1] if k < last else None
        result = results[k]
        if a.text in seen:
            flags[k] = f"repeats the earlier action '{a.text}'"
        elif result and is_failure(result):
            flags[k] = f"'{a.text}' had no effect (Nothing happens.)"
        elif a.template == "go to X" and _idle_visit(acts, results, k):
            flags[k] = f"went to {a.x} and used nothing there"
        elif a.template == "open X" and nxt is not None and nxt.template == "close X" and nxt.x == a.x:
            flags[k] = f"opened {a.x} and closed it again without using it"
        elif a.template == "close X" and k > 0 and acts[k - 1].template == "open X" and acts[k - 1].x == a.x:
            flags[k] = f"closed {a.x} right after opening it"
        elif a.template in ("look", "inventory") or (a.template == "examine X" and k != last):
            flags[k] = f"'{a.text}' only gathers information"
        # A repeat only counts within one stretch without progress: going back to the countertop for the
        # second object of a pick-two task is not a loop.
        seen = set() if a.template in INTERACTION and k not in flags else seen | {a.text}
    return flags


def reflect_success(inp: ReflectorInput) -> SuccessReflection:
    """Memory segments a successful run did not need (rules in the module docstring)."""
    flags = redundant_steps(inp.memory.segments)
    return SuccessReflection(redundant_segments=tuple(RedundantSegment(index=k, reason=r)
                                                      for k, r in sorted(flags.items())))


def _key_step(failed: Trajectory, succeeded: Trajectory) -> int:
    done_before = {normalize(a) for a in failed.actions()}
    acts = succeeded.actions()
    for t, a in enumerate(acts):  # first interaction the memory-less run never managed
        if parse_action(a).template in INTERACTION and normalize(a) not in done_before:
            return t
    for t, a in enumerate(acts):
        if normalize(a) not in done_before:
            return t
    return max(len(acts) - 1, 0)


def analyze_retrieval(inp: RetrievalAnalyzerInput) -> RetrievalAnalysis:
    """Key step of the memory-augmented success and the memory snippet behind it (AGMR appendix C.1)."""
    t = _key_step(inp.failed, inp.succeeded)
    acts = inp.succeeded.actions()
    key_action = acts[t] if acts else "look"
    seg_idx = supporting_segment(inp.memory.segments, key_action, t / max(len(acts) - 1, 1))
    seg = inp.memory.segments[seg_idx] if inp.memory.segments else Segment(action=key_action)
    failed_acts = inp.failed.actions()
    repeats = max((failed_acts.count(a) for a in set(failed_acts)), default=0)
    reason = (f"without memory the agent never performed '{key_action}'"
              + (f" and repeated one action {repeats} times" if repeats > 2 else "")
              + f" in {len(failed_acts)} steps")
    return RetrievalAnalysis(failure_reason=reason, key_step=t, key_action=key_action, key_segment=seg_idx,
                             key_context=segment_text(seg, observation=False) or key_action)

