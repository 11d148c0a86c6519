"""An expert for any state: the next correct action from wherever an agent has got to on an ALFWorld game.

Behaviour cloning from expert states only never shows the agent a failed action or a loop; DAgger needs the
expert's action at the states the *agent* reaches. TextWorld's planner can replan from a state, but it takes
minutes on some games; this oracle instead tracks the planner's own plan.

**Milestones.** The game's planner plan (read once at reset, as for the expert trajectories) is cut into its
interactions, each with the location where the plan does it: ``take o from r``, ``open r``, ``clean/heat/cool
o with t``, ``use lamp``, ``put o in/on R``. Navigation is not a milestone: it is how one gets to the next.

**State.** The agent's own steps are replayed with :func:`~workbench.envs.alfworld_text.track` (location,
held object, transformed objects, puts, lamp) plus the receptacles it opened or closed and where it took each
object from.

**Next action**, in order:

1. Holding an object the plan does not use: put it down (here if the game allows, else where it was taken).
2. Holding another instance of the object type the plan uses (``apple 2`` for the plan's ``apple 1``) that is
   not already placed: the plan continues with that instance (any instance satisfies an ALFWorld goal).
3. The first milestone not yet achieved — with the held object's milestones first (a pick-two agent holding the
   second object finishes it before fetching the first) — is the target: ``take`` is achieved while holding o
   or once its ``put`` is; ``clean/heat/cool`` once that is o's last transformation (a heated potato is not a
   cooled one); ``open r`` while r is open, or once what it was opened for is done; ``put`` once o stands in a
   receptacle of R's type after its transformation (a dirty pan put on the counter is fetched again); ``use``
   once the lamp is on.
4. The milestone's action when it is admissible where the agent stands (ALFWorld receptacles can share a spot);
   else ``go to`` the plan's location for it (or its receptacle, when that location cannot be walked to from
   here). There: ``open <location>`` first if the action needs it; a ``take`` of an object the agent has put
   elsewhere goes there. ``use`` (look-at) counts as done while the lamp is on, unless the agent carries the plan's
   object away from it (the goal is the state lamp on + object in hand at the lamp, in any order).
5. A result that is not among the admissible commands is no answer (``None``) with the reason, never a guess.

The oracle is a labeller, not a player: it answers one state at a time and keeps nothing between calls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.envs.alfworld_text import (
    AlfState,
    entity_type,
    is_failure,
    normalize,
    pairs_from_steps,
    parse_action,
    track,
)
from workbench.envs.normalize import split_initial_observation

__all__ = ["Milestone", "Label", "milestones", "label_state", "OracleState", "replay_state", "label_trajectory_states",
           "oracle_rollout", "oracle_agreement", "progress"]

_TRANSFORMS = ("clean X with Y", "heat X with Y", "cool X with Y")
_INTERACT = {"take X from Y", "open X", "clean X with Y", "heat X with Y", "cool X with Y", "use X", "put X in/on Y"}


@dataclass(frozen=True)
class Milestone:
    """One interaction of the plan: its action, the plan's location for it, its template and object."""

    action: str
    location: str | None
    template: str
    obj: str | None  # the object it acts on (take/transform/put), the receptacle (open) or the lamp (use)
    target: str | None = None  # the receptacle (take: from; put: into) or the tool


@dataclass(frozen=True)
class Label:
    """The oracle's answer at one state: an admissible action, or None and why."""

    action: str | None
    reason: str
    milestone: int | None = None  # index of the target milestone


@dataclass
class OracleState:
    """The replayed situation: ``track``'s state plus open receptacles and where each object was taken from."""

    base: AlfState
    opened: set
    taken_from: dict


def milestones(plan: Sequence[str]) -> list[Milestone]:
    """The plan's interactions, each with the location the plan is at when it does it."""
    out, where = [], None
    for action in plan:
        a = parse_action(action)
        if a.template == "go to X":
            where = a.x
        elif a.template in _INTERACT:
            target = a.y if a.template != "open X" else None
            out.append(Milestone(a.text, where, a.template, a.x, target))
    return out


def replay_state(actions: Sequence[str], observations_before: Sequence[str], current_observation: str,
                 initial_observation: str = "") -> OracleState:
    """The agent's situation after its steps (observation k precedes action k; ``current_observation`` follows the
    last action)."""
    pairs = pairs_from_steps(list(observations_before), list(actions), current_observation)
    base = track(pairs, final_observation=initial_observation)
    opened: set = set()
    taken_from: dict = {}
    for action, obs in pairs:
        if is_failure(obs):
            continue
        a = parse_action(action)
        if a.template == "open X":
            opened.add(a.x)
        elif a.template == "close X":
            opened.discard(a.x)
        elif a.template == "take X from Y":
            taken_from[a.x] = a.y
    return OracleState(base, opened, taken_from)


def _placed_at(b: AlfState, obj: str | None) -> str | None:
    """Where the agent last put ``obj`` (None if never, or if it holds it again)."""
    if obj is None or b.holding == obj:
        return None
    return next((r for o, r in reversed(b.placed) if o == obj), None)


def _achieved(ms: list[Milestone], k: int, st: OracleState) -> bool:
    m, b = ms[k], st.base
    if m.template == "take X from Y":
        return b.holding == m.obj or _put_done(ms, m.obj, st)
    if m.template in _TRANSFORMS:
        return b.transforms.get(m.obj) == m.template.split()[0]  # the right one, and the last one
    if m.template == "open X":
        enabled = next((j for j in range(k + 1, len(ms)) if ms[j].location == m.location), None)
        return m.obj in st.opened or (enabled is not None and _achieved(ms, enabled, st))
    if m.template == "put X in/on Y":  # in a receptacle of the goal's type, after its transformation
        r = _placed_at(b, m.obj)
        ready = all(_achieved(ms, j, st) for j in range(k) if ms[j].obj == m.obj and ms[j].template in _TRANSFORMS)
        return r is not None and entity_type(r) == entity_type(m.target) and ready
    if m.template == "use X":  # look-at's goal is a state: lamp on, the object in hand, at the lamp
        carried_away = any(x.obj == b.holding for x in ms if x.template == "take X from Y") and b.location != m.location
        return b.lamp_on and not carried_away
    return False


def _follow_held(ms: list[Milestone], state: OracleState) -> tuple[list[Milestone], bool]:
    """Rule 2: the milestones with the held instance in place of the plan's (when it is another instance of a plan
    object not yet placed), and whether the agent holds a stray object the plan does not use (rule 1)."""
    held = state.base.holding
    plan_objs = [m.obj for m in ms if m.template == "take X from Y"]
    if not held or held in plan_objs:
        return ms, False
    free = [o for o in plan_objs if entity_type(o) == entity_type(held) and not _put_done(ms, o, state)]
    if not free:
        return ms, True
    return [_with_object(m, free[0], held) for m in ms], False


def progress(plan: Sequence[str], state: OracleState) -> int:
    """How many of the plan's milestones ``state`` has achieved (any instance of the plan's object counts)."""
    ms, _ = _follow_held(milestones(plan), state)
    return sum(_achieved(ms, k, state) for k in range(len(ms)))


def _put_done(ms: list[Milestone], obj: str | None, st: OracleState) -> bool:
    return any(m.template == "put X in/on Y" and m.obj == obj and _achieved(ms, j, st) for j, m in enumerate(ms))


def _with_object(m: Milestone, old: str, new: str) -> Milestone:
    if m.obj != old:
        return m
    return Milestone(re.sub(rf"\b{re.escape(old)}\b", new, m.action), m.location, m.template, new, m.target)


def _about(ms: list[Milestone], k: int, obj: str) -> bool:
    """Milestone k acts on ``obj``, or opens the place of the next milestone that does."""
    m = ms[k]
    if m.template == "open X":
        enabled = next((j for j in range(k + 1, len(ms)) if ms[j].location == m.location), None)
        return enabled is not None and ms[enabled].obj == obj
    return m.obj == obj


def label_state(plan: Sequence[str], state: OracleState, admissible: Sequence[str]) -> Label:
    """The next correct action at ``state`` (module docstring), among ``admissible``."""
    adm = {normalize(c): c for c in admissible}
    ms = milestones(plan)
    if not ms:
        return Label(None, "the plan has no interaction")
    b = state.base
    held = b.holding
    ms, stray = _follow_held(ms, state)  # rule 2: continue the plan with the instance in hand
    if stray:  # rule 1: put the stray object down
        here = [c for n, c in adm.items() if n.startswith(f"put {held} ") and b.location and n.endswith(b.location)]
        if here:
            return Label(here[0], f"put down {held}, which the plan does not use")
        back = state.taken_from.get(held)
        if back and b.location != back:
            return _go(back, adm, f"return {held} to {back}")
        return Label(None, f"holding {held}, which the plan does not use, and no way to put it down here")
    pending = [k for k in range(len(ms)) if not _achieved(ms, k, state)]
    if not pending:
        return Label(None, "every milestone is achieved (the game should be won)")
    mine = [k for k in pending if held and _about(ms, k, held)]
    k = (mine or pending)[0]
    m = ms[k]
    moved = _placed_at(b, m.obj) if m.template == "take X from Y" else None
    if moved and moved != m.target:  # objects move only when the agent moves them
        m = Milestone(f"take {m.obj} from {moved}", moved, m.template, m.obj, moved)
    if normalize(m.action) in adm:  # doable from here (receptacles can share a spot): no walk needed
        return Label(adm[normalize(m.action)], f"milestone {k}", k)
    if m.location and b.location != m.location:
        if f"go to {m.location}" not in adm and m.target and f"go to {m.target}" in adm:
            return _go(m.target, adm, f"towards milestone {k}: {m.action} (its receptacle)", k)
        return _go(m.location, adm, f"towards milestone {k}: {m.action}", k)
    if normalize(m.action) in adm:
        return Label(adm[normalize(m.action)], f"milestone {k}", k)
    if m.location and f"open {m.location}" in adm:
        return Label(adm[f"open {m.location}"], f"open {m.location} first, for milestone {k}", k)
    return Label(None, f"milestone {k} ({m.action}) is not admissible here", k)


def _go(location: str, adm: dict, why: str, k: int | None = None) -> Label:
    cmd = f"go to {location}"
    if cmd in adm:
        return Label(adm[cmd], why, k)
    return Label(None, f"'{cmd}' is not admissible ({why})", k)


def label_trajectory_states(plan: Sequence[str], observations_before: Sequence[str], actions: Sequence[str],
                            admissible: Sequence[Sequence[str]], final_observation: str = "",
                            initial_observation: str = "") -> list[Label]:
    """The oracle's label at every state of a trajectory (state k = before action k)."""
    out = []
    for k in range(len(actions)):
        current = observations_before[k] if k else initial_observation
        st = replay_state(actions[:k], observations_before[:k], current if k else "", initial_observation)
        out.append(label_state(plan, st, admissible[k]))
    return out




def oracle_rollout(env, task, plan: Sequence[str], prefix: Sequence[str], max_steps: int = 50) -> dict:
    """Play ``prefix`` (an agent's actions) on ``task``, then follow the oracle's labels until the game ends.

    The check that the labels are *correct* from states the planner never visited: ``won`` says whether the
    oracle, taking over at the end of the prefix, solves the game within ``max_steps`` steps in total.

    Returns:
        ``{"won", "steps", "oracle_steps", "no_answer"}`` (``no_answer``: the reason, when the oracle had none).
    """
    res = env.reset(task)
    initial = res.observation
    room, _ = split_initial_observation(initial)
    obs_before: list[str] = []
    actions: list[str] = []
    current = initial
    for a in prefix:
        obs_before.append(current)
        actions.append(a)
        res = env.step(a)
        current = res.observation
        if res.done:
            return {"won": bool(res.won), "steps": len(actions), "oracle_steps": 0, "no_answer": None}
    n_oracle = 0
    while len(actions) < max_steps:
        st = replay_state(actions, obs_before, current if actions else "", room)
        lab = label_state(plan, st, list(res.admissible_commands))
        if lab.action is None:
            return {"won": False, "steps": len(actions), "oracle_steps": n_oracle, "no_answer": lab.reason}
        obs_before.append(current)
        actions.append(lab.action)
        res = env.step(lab.action)
        current = res.observation
        n_oracle += 1
        if res.done:
            break
    return {"won": bool(res.won), "steps": len(actions), "oracle_steps": n_oracle, "no_answer": None}


def oracle_agreement(experts: Sequence) -> dict:
    """The oracle on the planner's own states: share of states where its label is the planner's action, and share
    with no answer (planner trajectories only: a handcoded searcher's exploration is no plan to track)."""
    n = agree = none = 0
    for e in experts:
        if e.source != "planner":
            continue
        labels = label_trajectory_states(e.actions(), [s.observation for s in e.steps], e.actions(),
                                         e.meta["admissible"], e.meta.get("final_observation", ""),
                                         e.initial_observation)
        for lab, a in zip(labels, e.actions()):
            n += 1
            none += lab.action is None
            agree += lab.action == a
    return {"states": n, "agreement": agree / n if n else 0.0, "no_answer": none / n if n else 0.0}
