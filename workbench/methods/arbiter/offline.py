"""Offline MemArbiter state parser and candidate writer for ALFWorld.

State parser: replay the steps (:func:`workbench.envs.alfworld_text.track`), expand the goal into its subgoal chain
(find -> take -> [clean/heat/cool with the tool] -> put, twice for pick-two; find -> take -> find lamp ->
use lamp for look-at) and mark each subgoal done from the replayed state; the current subgoal is the first
one not done. Information needs are the goal entities not yet located.

Candidate writer: split the newest evidence into atomic items, one fact each. The goal and its
constraints come from the goal at step 0; each object sighting and open/closed state is a reference item;
the previous action and its whole outcome is an episodic item (a "Nothing happens." also yields a constraint
not to repeat it); the agent's situation is a task-state snapshot (``op="revise"``: it replaces the last one).
"""

from __future__ import annotations

import re

from workbench.envs.alfworld_text import (
    GoalSpec,
    entity_type,
    is_failure,
    pairs_from_steps,
    parse_action,
    parse_goal,
    sightings,
    track,
)
from workbench.methods.arbiter.stage_types import (
    CandidateItem,
    CandidateWrites,
    ParsedState,
    StateParserInput,
    WriterInput,
)

__all__ = ["parse_state", "write_candidates", "subgoals"]

_ROOM = re.compile(r"looking quickly around you, you see ([^.]*)\.")
_OPEN_STATE = re.compile(r"the ([a-z]+ \d+) is (open|closed)")
_PAST = {"clean": "cleaned", "heat": "heated", "cool": "cooled"}


def subgoals(spec: GoalSpec) -> list[str]:
    """The subgoal chain of a goal, in order."""
    if spec.kind == "look_at":
        return [f"find a {spec.obj}", f"take the {spec.obj}", "find a desklamp", "use the desklamp"]
    chain: list[str] = []
    for r in range(spec.count):
        nth = "" if spec.count == 1 else (" (first)" if r == 0 else " (second)")
        chain += [f"find a {spec.obj}{nth}", f"take the {spec.obj}{nth}"]
        if spec.transform:
            chain.append(f"{spec.transform} the {spec.obj} with the {spec.tool}{nth}")
        chain.append(f"put the {spec.obj} in/on the {spec.recep}{nth}")
    return chain


def parse_state(inp: StateParserInput) -> ParsedState:
    """Current subgoal, completed subgoals, entities and information needs (see module docstring)."""
    hist = inp.history
    initial = hist[0].observation if hist else inp.observation
    st = track(pairs_from_steps([s.observation for s in hist], [s.action for s in hist], inp.observation),
               final_observation=initial)
    spec = parse_goal(inp.goal)
    failed = bool(hist) and is_failure(inp.observation)
    if spec is None:
        return ParsedState(subgoal=f"work towards: {inp.goal}", location=st.location, holding=st.holding,
                           last_action_failed=failed)
    o = spec.obj
    held = entity_type(st.holding) == o
    # A put counts only if it satisfies the goal: right receptacle, and transformed first when required
    # (a dirty apple in the fridge is just an apple somewhere, still to be taken and cleaned).
    valid = {obj for obj, rec in st.placed if entity_type(obj) == o and entity_type(rec) == spec.recep
             and (not spec.transform or st.transforms.get(obj) == spec.transform)}
    placed = len(valid)
    seen_o = sorted(x for x in st.seen if entity_type(x) == o and x not in valid)
    done: list[bool] = []
    if spec.kind == "look_at":
        lamp_seen = any(entity_type(x) in ("desklamp", "floorlamp") for x in st.seen) or st.lamp_on
        done = [bool(seen_o) or held, held, lamp_seen or st.lamp_on, st.lamp_on]
    else:
        for r in range(spec.count):
            put_r = placed > r
            active = placed == r  # the round in progress
            transformed = held and st.transforms.get(st.holding) == spec.transform
            round_done = [put_r or (active and (held or bool(seen_o))), put_r or (active and held)]
            if spec.transform:
                round_done.append(put_r or (active and transformed))
            round_done.append(put_r)
            done += round_done
    chain = subgoals(spec)
    completed = tuple(g for g, d in zip(chain, done) if d)
    current = next((g for g, d in zip(chain, done) if not d), "the task is complete")
    entities = [x for x in (st.holding, *seen_o, *(st.seen[x] for x in seen_o)) if x]
    needs = []
    if not held and not seen_o:
        needs.append(f"where is a {o}?")
    if spec.kind == "look_at" and not (st.lamp_on or any(entity_type(x) in ("desklamp", "floorlamp") for x in st.seen)):
        needs.append("where is the desklamp?")
    return ParsedState(subgoal=current, completed=completed, entities=tuple(dict.fromkeys(entities)),
                       information_needs=tuple(needs), location=st.location, holding=st.holding,
                       last_action_failed=failed)


def _goal_items(goal: str, observation: str) -> list[CandidateItem]:
    text = goal.split("Your task is to:")[-1].strip()
    items = [CandidateItem(bank="goal", focal=f"Task goal: {text}", source="task")]
    spec = parse_goal(goal)
    if spec and spec.transform:
        items.append(CandidateItem(
            bank="constraint", entities=(spec.obj, spec.tool or ""),
            focal=f"The {spec.obj} must be {_PAST[spec.transform]} with the {spec.tool} before it goes in/on the "
                  f"{spec.recep}.", source="task"))
    if spec and spec.count == 2:
        items.append(CandidateItem(bank="constraint", entities=(spec.obj, spec.recep or ""),
                                   focal=f"Two {spec.obj}s must end up in/on the {spec.recep}; one is not enough.",
                                   source="task"))
    if spec and spec.kind == "look_at":
        items.append(CandidateItem(bank="constraint", entities=(spec.obj, "desklamp"),
                                   focal=f"Hold the {spec.obj} and turn on a desklamp to look at it.",
                                   source="task"))
    room = _ROOM.search(observation.lower())
    if room:
        receps = re.findall(r"[a-z]+ \d+", room.group(1))
        items.append(CandidateItem(bank="reference", entities=tuple(receps), source="observation",
                                   focal="The room has: " + ", ".join(receps) + "."))
    return items


def write_candidates(inp: WriterInput) -> CandidateWrites:
    """Atomic candidate items from the newest evidence (see module docstring)."""
    items: list[CandidateItem] = []
    if inp.step == 0 or inp.previous_action is None:
        items += _goal_items(inp.goal, inp.observation)
    if inp.previous_action:
        a = parse_action(inp.previous_action)
        outcome = " ".join(inp.observation.split()[:60]).rstrip(".") or "(no observation)"
        ok = not is_failure(inp.observation)
        ents = tuple(x for x in (a.x, a.y) if x)
        items.append(CandidateItem(bank="episodic", entities=ents, source="action",
                                   focal=f"Step {max(inp.step - 1, 0)}: '{a.text}' -> {outcome}."))
        if not ok:
            items.append(CandidateItem(bank="constraint", entities=ents, source="action",
                                       focal=f"'{a.text}' does nothing in this situation; do not repeat it unchanged."))
    if not is_failure(inp.observation):
        for obj, rec in sightings(inp.observation):
            items.append(CandidateItem(bank="reference", focal=f"{obj} is in/on {rec}.",
                                       entities=(obj, rec), source="observation"))
        for rec, state in _OPEN_STATE.findall(inp.observation.lower()):
            items.append(CandidateItem(bank="reference", focal=f"{rec} is {state}.",
                                       entities=(rec,), source="observation"))
    if inp.state is not None:
        s = inp.state
        items.append(CandidateItem(
            bank="task_state", op="revise", source="state",
            entities=tuple(x for x in (s.location, s.holding) if x),
            focal=f"At {s.location or 'the start'}, holding {s.holding or 'nothing'}; next: {s.subgoal}."))
    return CandidateWrites(items=tuple(items))
