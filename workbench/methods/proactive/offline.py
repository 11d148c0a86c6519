"""Offline proactive memory agent for ALFWorld: bank edits through the four tools, then remind or stay silent.

Phase 1 (bank management) replays the recent window and emits only the calls that change the bank:
knowledge ``task:<requirement>`` for the task description's requirements (the object must be cleaned / heated /
cooled first, two objects are needed, a lamp must be used: the paper's "key constraints from the task
description"), ``loc:<object>`` for every object seen ("On the countertop 1, you see a apple 1"), deleted when
the agent picks the object up and re-saved where it puts it; procedural ``fail:<action>`` for each action
answered "Nothing happens." and ``done:<action>`` for each successful interaction; one status update
(location, holding, next subgoal) when it changed.

Phase 2 (intervention) returns a reminder only when memory can change the next decision:
1. the last action failed and had failed before (a known dead end);
2. the agent repeats itself: the same action twice in a row, an A-B-A-B cycle, or the same
   (observation, action) pair seen earlier in the window;
3. it stands at the goal receptacle holding the object that still needs cleaning/heating/cooling.
Loop reminders add what the bank knows about where the goal object is. Otherwise the answer is null.
"""

from __future__ import annotations

import re

from workbench.envs.alfworld_text import (
    INTERACTION,
    entity_type,
    is_failure,
    normalize,
    pairs_from_steps,
    parse_action,
    parse_goal,
    sightings,
)
from workbench.llm.protocol import ToolCall
from workbench.memory.trajectory import Step
from workbench.methods.arbiter.offline import _PAST, parse_state
from workbench.methods.arbiter.stage_types import StateParserInput
from workbench.methods.proactive.stage_types import (
    BankView,
    Intervention,
    ProactiveInput,
)

__all__ = ["manage_bank", "intervene", "entry_id", "task_requirements"]

_MAX_CYCLE = 4


def entry_id(prefix: str, text: str) -> str:
    """A bank id that satisfies the tools' id pattern (``[A-Za-z0-9_.:-]{1,64}``)."""
    slug = re.sub(r"[^A-Za-z0-9_.:\-]+", "_", normalize(text)).strip("_") or "x"
    return f"{prefix}:{slug}"[:64]


def _pairs(inp: ProactiveInput) -> list[tuple[str, str]]:
    return pairs_from_steps([s.observation for s in inp.window], [s.action for s in inp.window],
                            inp.current_observation)


def _state_input(inp: ProactiveInput) -> StateParserInput:
    return StateParserInput(goal=inp.goal, observation=inp.current_observation or "",
                            history=tuple(inp.window))


def task_requirements(goal: str) -> dict[str, str]:
    """The task description's constraints as knowledge entries (id -> content)."""
    spec = parse_goal(goal)
    if spec is None:
        return {}
    out = {}
    if spec.transform:
        out["task:transform"] = (f"task: the {spec.obj} must be {_PAST[spec.transform]} with the {spec.tool} before it "
                                 f"goes in/on the {spec.recep}")
    if spec.count == 2:
        out["task:two"] = f"task: two {spec.obj}s must end up in/on the {spec.recep}"
    if spec.kind == "look_at":
        out["task:lamp"] = f"task: hold the {spec.obj} and turn on a desklamp to look at it"
    return out


def manage_bank(inp: ProactiveInput) -> list[ToolCall]:
    """Phase 1: the tool calls that bring the bank up to date with the window (see module docstring).

    The window is replayed on a copy of the bank and only the net difference is emitted (deletions first),
    so an object seen and picked up inside one window costs no save-then-delete pair.
    """
    before_k = {e.id: e.content for e in inp.bank.knowledge}
    before_p = {e.id: e.content for e in inp.bank.procedural}
    know, proc = dict(before_k), dict(before_p)
    for k, v in task_requirements(inp.goal).items():
        know.setdefault(k, v)
    for action, obs in _pairs(inp):
        a = parse_action(action)
        if is_failure(obs):
            proc[entry_id("fail", a.text)] = f"'{a.text}' did nothing (Nothing happens.)"
            continue
        for obj, rec in sightings(obs):
            know[entry_id("loc", obj)] = f"{obj} is in/on {rec}"
        if a.template == "take X from Y" and a.x:
            know.pop(entry_id("loc", a.x), None)  # it moves with the agent now
        if a.template == "put X in/on Y" and a.x:
            know[entry_id("loc", a.x)] = f"{a.x} is in/on {a.y} (placed by the agent)"
        if a.template in INTERACTION:
            first = obs.strip().split(". ")[0].rstrip(".")
            proc[entry_id("done", a.text)] = f"'{a.text}' worked: {first}"
    calls = [ToolCall(name="memory_delete", arguments={"id": k})
             for k in [*before_k, *before_p] if k not in know and k not in proc]
    for tool, now, before in (("memory_save_knowledge", know, before_k), ("memory_save_procedural", proc, before_p)):
        calls += [ToolCall(name=tool, arguments={"id": k, "content": v}) for k, v in now.items() if before.get(k) != v]
    st = parse_state(_state_input(inp))
    status = (f"step {inp.step}: at {st.location or 'start'}; holding {st.holding or 'nothing'}; "
              f"next: {st.subgoal}")
    if inp.window and status != inp.bank.status:
        calls.append(ToolCall(name="memory_update_status", arguments={"status": status}))
    return calls


def _loop(window: tuple[Step, ...]) -> str | None:
    acts = [normalize(s.action) for s in window]
    if len(acts) >= 2 and acts[-1] == acts[-2]:
        return f"you just did '{acts[-1]}' twice in a row"
    for k in range(2, _MAX_CYCLE + 1):
        if len(acts) >= 2 * k and acts[-k:] == acts[-2 * k:-k] and len(set(acts[-k:])) > 1:
            return "you are cycling through " + " -> ".join(f"'{a}'" for a in acts[-k:])
    if window:
        last = (normalize(window[-1].observation), acts[-1])
        if any((normalize(s.observation), a) == last for s, a in zip(window[:-1], acts[:-1])):
            return f"you already did '{acts[-1]}' in exactly this situation"
    return None


def _where(inp: ProactiveInput, bank: BankView) -> str:
    spec = parse_goal(inp.goal)
    if spec is None:
        return ""
    facts = [e.content for e in bank.knowledge if entity_type(e.content.split(" is ")[0]) == spec.obj]
    return (" Memory: " + "; ".join(facts) + ".") if facts else ""


def intervene(inp: ProactiveInput) -> Intervention:
    """Phase 2: a memory-grounded reminder, or ``None`` to stay silent (see module docstring)."""
    if not inp.window:
        return Intervention(reminder=None)
    last = normalize(inp.window[-1].action)
    failed_now = is_failure(inp.current_observation)
    # a dead end is *known* when its fail entry predates this step: phase 1 of this very step has just saved the
    # failure being answered now, and that one alone is no memory of an earlier failure
    known_dead = any(e.id == entry_id("fail", last) and (e.created is None or e.created < inp.step)
                     for e in inp.bank.procedural)
    earlier_fails = sum(1 for a, o in _pairs(inp)[:-1] if normalize(a) == last and is_failure(o))
    if failed_now and (known_dead or earlier_fails):
        return Intervention(reminder=f"'{last}' has failed before and does nothing here; choose a different "
                                     f"action.{_where(inp, inp.bank)}")
    loop = _loop(inp.window)
    if loop:
        return Intervention(reminder=f"Stop repeating: {loop}. Pick an action that makes progress."
                                     f"{_where(inp, inp.bank)}")
    spec = parse_goal(inp.goal)
    if spec is not None and spec.transform:
        st = parse_state(_state_input(inp))
        held = st.holding and entity_type(st.holding) == spec.obj
        at_goal = entity_type(st.location) == spec.recep
        if held and at_goal and not any(g.startswith(spec.transform) for g in st.completed):
            return Intervention(reminder=f"The {spec.obj} must be {spec.transform}ed with the {spec.tool} "
                                         f"before it goes in/on the {spec.recep}.")
    return Intervention(reminder=None)
