"""Offline workflow induction for AWM (agent workflow memory, offline version) on ALFWorld: a documented algorithm.

For each successful trajectory of one task type:

1. Drop the steps the semantic reflector calls redundant (idle visits, repeats, "Nothing happens.", open/close
   pairs, look/inventory/examine that are not the last step: :func:`workbench.methods.agmr.offline.reflector.redundant_steps`).
2. Abstract every remaining command by role: the goal's object type -> ``{obj}``, the goal's receptacle type ->
   ``{target}``, anything else that holds or hides the object -> ``{place}``; the type's tool (sinkbasin,
   microwave, fridge, desklamp) keeps its type name; instance numbers go.
3. Collapse immediate repeats of one abstract command.

The workflow of the type is the most frequent abstract sequence (ties: fewer steps, then alphabetical); its
rationale says how many trajectories share it. The same stage through a model backend reads the trajectories'
actions and writes the workflow itself.
"""

from __future__ import annotations

from collections import Counter

from workbench.envs.alfworld_text import entity_type, parse_action, parse_goal
from workbench.methods.agmr.offline.reflector import redundant_steps
from workbench.methods.agmr.stage_types import Workflow, WorkflowInput

__all__ = ["induce_workflow", "abstract_actions"]

_VERB = {"go to X": "go to {x}", "take X from Y": "take {x} from {y}", "put X in/on Y": "put {x} in/on {y}",
         "open X": "open {x}", "close X": "close {x}", "clean X with Y": "clean {x} with {y}",
         "heat X with Y": "heat {x} with {y}", "cool X with Y": "cool {x} with {y}", "use X": "use {x}",
         "examine X": "examine {x}", "look": "look", "inventory": "inventory"}


def abstract_actions(goal: str, actions: list[str]) -> tuple[str, ...]:
    """The role-abstracted command sequence of one trajectory (steps 2-3 of the module docstring)."""
    spec = parse_goal(goal)
    obj, target = (spec.obj, spec.recep) if spec else (None, None)
    tool = spec.tool if spec else None

    def role(entity: str | None) -> str:
        t = entity_type(entity)
        if t and t == obj:
            return "{obj}"
        if t and t == target:
            return "{target}"
        if t and t == tool:
            return t
        return "{place}"

    out: list[str] = []
    for a in actions:
        p = parse_action(a)
        if p.template not in _VERB:
            continue
        step = _VERB[p.template].format(x=role(p.x) if p.x else "", y=role(p.y) if p.y else "")
        if not out or out[-1] != step:
            out.append(step)
    return tuple(out)


def induce_workflow(inp: WorkflowInput) -> Workflow:
    """The most frequent abstract skeleton of the examples (module docstring)."""
    skeletons: Counter = Counter()
    for e in inp.examples:
        drop = redundant_steps(e.segments)
        keep = [s.action for k, s in enumerate(e.segments) if k not in drop]
        sk = abstract_actions(e.goal, keep)
        if sk:
            skeletons[sk] += 1
    if not skeletons:
        return Workflow(steps=("look",), rationale="no example had a usable command")
    best = min(skeletons, key=lambda sk: (-skeletons[sk], len(sk), sk))
    return Workflow(steps=best, rationale=f"{skeletons[best]} of {len(inp.examples)} {inp.task_type} trajectories "
                                          f"share this skeleton ({len(skeletons)} distinct)")
