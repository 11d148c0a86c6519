"""Offline DC-RS curator for ALFWorld (Dynamic Cheatsheet, retrieval and synthesis): a documented algorithm.

A cheatsheet is a list of insights, one per topic, each with ``uses``: how many retrieved trajectories have
supported it so far. For one task of the stream (its goal and type, the previous task's cheatsheet, the
memory-base trajectories retrieved for it):

1. Each retrieved trajectory supports these insights (written about object and receptacle *kinds*, never the
   instance numbers or rooms of one game):
   - ``procedure: <task type>``: its command sequence without the steps the semantic reflector calls redundant,
     role-abstracted as AWM does (:func:`workbench.methods.agmr.offline.awm.abstract_actions`: the goal's object, its
     target, the place it was found; the type's tool keeps its name), written as one sentence;
   - ``where: <object> in <receptacle>``: for each object its goal names that it took, the kind of receptacle it
     took it from ("a mug can be found in/on a cabinet");
   - ``tool: <task type>``: for tasks that clean, heat, cool or look under a lamp, the command that uses the tool.
2. Merge. An insight already on the cheatsheet gains its support. A task type has one procedure: among the
   previous one (with its uses) and the retrieved trajectories' skeletons, the one with the most support is kept
   (ties: the previous, so the cheatsheet does not flicker), with that support. Any other insight enters with
   its support.
3. Order for the task: its type's procedure and tool, then where its object kind is found (most supported first),
   then every other insight by support (then topic). Cut to :data:`~workbench.llm.schemas.MAX_CHEATSHEET`: what is
   least useful for this task is forgotten.

The same stage through a model backend (``dc_curate``) reads the previous cheatsheet, the task and the runs as text
and writes the cheatsheet itself.
"""

from __future__ import annotations

from collections import Counter

from workbench.envs.alfworld_text import parse_action, parse_goal
from workbench.methods.agmr.offline.awm import abstract_actions
from workbench.methods.agmr.offline.reflector import redundant_steps
from workbench.methods.agmr.stage_types import (
    MAX_CHEATSHEET,
    Cheatsheet,
    CheatsheetEntry,
    CurateInput,
)

__all__ = ["curate", "supported_insights"]

_ROLE_WORDS = {"{obj}": "the object", "{target}": "the target", "{place}": "a place"}


def _procedure_text(task_type: str, skeleton: tuple[str, ...]) -> str:
    steps = []
    for s in skeleton:
        for k, v in _ROLE_WORDS.items():
            s = s.replace(k, v)
        steps.append(s)
    return f"To solve a '{task_type}' task: " + " -> ".join(steps) + "."


def supported_insights(example) -> tuple[tuple[str, ...] | None, list[tuple[str, str]]]:
    """What one retrieved trajectory supports: its abstract skeleton (None when it has no usable command), and its
    other insights as ``(topic, insight)``."""
    drop = redundant_steps(example.segments)
    actions = [s.action for k, s in enumerate(example.segments) if k not in drop]
    skeleton = abstract_actions(example.goal, actions) or None
    spec = parse_goal(example.goal)
    found: list[tuple[str, str]] = []
    if spec is None:
        return skeleton, found
    for a in actions:
        p = parse_action(a)
        obj, recep = p.types
        if p.template == "take X from Y" and obj == spec.obj and recep:
            found.append((f"where: {obj} in {recep}", f"A {obj} can be found in/on a {recep}."))
        if spec.tool and p.template in ("clean X with Y", "heat X with Y", "cool X with Y", "use X") \
                and spec.tool in (obj, recep):
            verb = p.template.split()[0]
            found.append((f"tool: {example.task_type}",
                          f"'{example.task_type}' tasks need the {spec.tool}: {verb} "
                          + ("it" if verb == "use" else f"the object with the {spec.tool}") + "."))
    return skeleton, list(dict.fromkeys(found))


def curate(inp: CurateInput) -> Cheatsheet:
    """The cheatsheet for ``inp``'s task (module docstring)."""
    entries: dict[str, CheatsheetEntry] = {e.topic: e for e in inp.previous.entries}
    skeletons: dict[str, Counter] = {}
    for ex in inp.examples:
        skeleton, others = supported_insights(ex)
        if skeleton:
            skeletons.setdefault(ex.task_type, Counter())[skeleton] += 1
        for topic, insight in others:
            old = entries.get(topic)
            entries[topic] = CheatsheetEntry(topic=topic, insight=insight, uses=(old.uses if old else 0) + 1)
    for task_type, counts in skeletons.items():
        topic = f"procedure: {task_type}"
        best = min(counts, key=lambda sk: (-counts[sk], len(sk), sk))
        text = _procedure_text(task_type, best)
        old = entries.get(topic)
        if old is not None and old.insight == text:
            entries[topic] = CheatsheetEntry(topic=topic, insight=text, uses=old.uses + counts[best])
        elif old is None or counts[best] > old.uses:
            entries[topic] = CheatsheetEntry(topic=topic, insight=text, uses=counts[best])
    spec = parse_goal(inp.goal)
    obj = spec.obj if spec else None

    def rank(e: CheatsheetEntry) -> tuple:
        own = e.topic in (f"procedure: {inp.task_type}", f"tool: {inp.task_type}")
        where = obj is not None and e.topic.startswith(f"where: {obj} in ")
        return (0 if own else 1 if where else 2, -e.uses, e.topic)

    kept = sorted(entries.values(), key=rank)[:MAX_CHEATSHEET]
    return Cheatsheet(entries=tuple(kept),
                      rationale=f"{len(inp.examples)} runs retrieved; {len(entries)} insights before the cut")
