"""What went wrong in an episode, from its actions and observations alone, and where: the failure browser's index.

Each finding is a mode and the step a person should look at first:

* ``oscillation``: the first A, B, A, B (four steps going back and forth between two actions): its first A.
* ``step_limit_loop``: a failed episode that ran to its step limit: the first step of its repeating tail (from
  there on every action is one of the 8 before it), or, without such a tail, its last new action.
* ``put_back``: ``take X from Y`` followed at once by ``put X in/on Y`` (the object straight back): the take.
* ``failed_command``: an action the game answered with "Nothing happens.": the first such step.

The attention patterns (attended but wrong, missed relevant, distracted by irrelevant) need C and a critical
step; :func:`diagnosed_failures` reads them from a refinement's log (the first diagnosis of each failed task).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from workbench.memory.trajectory import Trajectory

__all__ = ["ACTION_MODES", "Finding", "failure_findings", "diagnosed_failures"]

ACTION_MODES = ("oscillation", "step_limit_loop", "put_back", "failed_command")
NOTHING = "Nothing happens."


@dataclass(frozen=True)
class Finding:
    """One thing that went wrong in one episode: its mode, the step to look at, and a line saying what."""

    task_id: str
    mode: str
    step: int
    detail: str


def _first_abab(a: list[str]) -> int | None:
    for k in range(len(a) - 3):
        if a[k] == a[k + 2] != a[k + 1] == a[k + 3]:
            return k
    return None


LOOP_WINDOW = 8


def _loop_start(a: list[str]) -> int:
    """Where the tail of repeats begins: the first step from which every action occurred in the LOOP_WINDOW steps
    before it; without a tail of at least LOOP_WINDOW such steps, the last action never taken before."""
    start = len(a)
    while start > 0 and a[start - 1] in a[max(0, start - 1 - LOOP_WINDOW):start - 1]:
        start -= 1
    if len(a) - start >= LOOP_WINDOW:
        return start
    return max((i for i, x in enumerate(a) if x not in a[:i]), default=0)


def failure_findings(traj: Trajectory, max_steps: int | None = None) -> list[Finding]:
    """Every action-level mode found in one episode, each at its first step (module docstring).

    Args:
        max_steps: the run's step limit (``step_limit_loop`` needs it; None: not looked for).
    """
    a, out = traj.actions(), []
    k = _first_abab(a)
    if k is not None:
        out.append(Finding(traj.task_id, "oscillation", k, f"{a[k]!r} <-> {a[k + 1]!r} from step {k}"))
    if not traj.success and max_steps is not None and len(a) >= max_steps:
        start = _loop_start(a)
        out.append(Finding(traj.task_id, "step_limit_loop", start,
                           f"ran to the limit ({len(a)} steps); from step {start} every action repeats one of the "
                           f"{LOOP_WINDOW} before it ({len(set(a[start:]))} distinct)"))
    for i, (x, y) in enumerate(zip(a, a[1:])):
        if x.startswith("take ") and " from " in x:
            obj, _, place = x[len("take "):].partition(" from ")
            if y == f"put {obj} in/on {place}":
                out.append(Finding(traj.task_id, "put_back", i, f"{x!r} then {y!r}"))
                break
    obs = [s.observation for s in traj.steps[1:]] + [str((traj.meta or {}).get("final_observation", ""))]
    for i, o in enumerate(obs):
        if o.strip() == NOTHING:
            out.append(Finding(traj.task_id, "failed_command", i, f"{a[i]!r}: the game answered {NOTHING!r}"))
            break
    return out


def diagnosed_failures(records: Iterable) -> list[Finding]:
    """The attention patterns of a refinement's failed tasks (``load_log(folder)``): each task's first diagnosed
    attempt, at its critical step (the rule's pattern on C[:, j]; the refiner's where the rule has none)."""
    out = []
    for r in records:
        if getattr(r, "branch", None) != "failure":
            continue
        for att in r.attempts:
            rule = att.rule or {}
            pattern = rule.get("pattern") or att.pattern
            if pattern and rule.get("step") is not None:
                out.append(Finding(r.task_id, pattern, int(rule["step"]),
                                   f"C[s{rule.get('segment')}, u{rule['step']}] = {rule.get('value', 0):.4f} "
                                   f"(rank {rule.get('rank')}, share {rule.get('share', 0):.2f})"))
                break
    return out
