"""ALFWorld text, read deterministically: action templates, goals, observations and a running state.

The offline backends reason with these instead of a model. ALFWorld's language is small and regular
(entities are ``word N``; a dozen action templates; a handful of observation sentences), so exact rules
cover it; anything unrecognised falls into an ``other`` template instead of being guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ParsedAction",
    "parse_action",
    "entity_type",
    "GoalSpec",
    "parse_goal",
    "sightings",
    "is_failure",
    "AlfState",
    "track",
    "NAVIGATION",
    "INTERACTION",
]

_E = r"[a-z]+ \d+"  # an ALFWorld entity: "apple 1", "countertop 2"

# Ordered: the first matching template wins ("put" accepts the three spellings ALFWorld versions use).
_TEMPLATES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx))
    for name, rx in [
        ("go to X", rf"^go to (?P<x>{_E})$"),
        ("take X from Y", rf"^take (?P<x>{_E}) from (?P<y>{_E})$"),
        ("put X in/on Y", rf"^put (?P<x>{_E}) (?:in/on|in|on) (?P<y>{_E})$"),
        ("open X", rf"^open (?P<x>{_E})$"),
        ("close X", rf"^close (?P<x>{_E})$"),
        ("clean X with Y", rf"^clean (?P<x>{_E}) with (?P<y>{_E})$"),
        ("heat X with Y", rf"^heat (?P<x>{_E}) with (?P<y>{_E})$"),
        ("cool X with Y", rf"^cool (?P<x>{_E}) with (?P<y>{_E})$"),
        ("use X", rf"^use (?P<x>{_E})$"),
        ("examine X", rf"^examine (?P<x>{_E})$"),
        ("look", r"^look$"),
        ("inventory", r"^inventory$"),
    ]
)
NAVIGATION = frozenset({"go to X", "look", "inventory", "examine X", "open X", "close X"})
INTERACTION = frozenset({"take X from Y", "put X in/on Y", "clean X with Y", "heat X with Y", "cool X with Y",
                         "use X"})


def normalize(action: str) -> str:
    """Lowercase, single spaces, no trailing period: how actions are compared."""
    return " ".join((action or "").lower().strip().rstrip(".").split())


def entity_type(entity: str | None) -> str:
    """``"apple 1" -> "apple"`` (instance numbers differ between tasks, types carry over)."""
    return re.sub(r"\s*\d+$", "", (entity or "").strip().lower())


@dataclass(frozen=True)
class ParsedAction:
    """An action split into its template and arguments (``x`` = first entity, ``y`` = second)."""

    text: str
    template: str
    x: str | None = None
    y: str | None = None

    @property
    def types(self) -> tuple[str, str]:
        return entity_type(self.x), entity_type(self.y)


def parse_action(action: str) -> ParsedAction:
    """Match ``action`` against the ALFWorld templates; unknown text gets template ``other``."""
    text = normalize(action)
    for name, rx in _TEMPLATES:
        m = rx.match(text)
        if m:
            d = m.groupdict()
            return ParsedAction(text, name, d.get("x"), d.get("y"))
    return ParsedAction(text, "other")


@dataclass(frozen=True)
class GoalSpec:
    """What an ALFWorld goal asks for. ``transform`` is clean/heat/cool; ``tool`` the receptacle it needs."""

    kind: str  # pick_and_place | clean | heat | cool | look_at | pick_two
    obj: str
    recep: str | None = None
    transform: str | None = None
    count: int = 1

    @property
    def tool(self) -> str | None:
        return {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}.get(self.transform or "") or (
            "desklamp" if self.kind == "look_at" else None)


_GOALS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rx), kind)
    for rx, kind in [
        (r"(?:put|place) two (?P<o>[a-z]+) (?:in|on|in/on) (?:the |a )?(?P<r>[a-z]+)", "pick_two"),
        (r"find two (?P<o>[a-z]+) and put them (?:in|on|in/on) (?:the |a )?(?P<r>[a-z]+)", "pick_two"),
        (r"(?:look at|examine) (?:the |a |some )?(?P<o>[a-z]+) (?:under|with) the (?:desklamp|lamp)", "look_at"),
        (r"(?P<t>clean|heat|cool) (?:the |a |some )?(?P<o>[a-z]+) and put it (?:in|on|in/on) (?:the |a )?(?P<r>[a-z]+)",
         "transform"),
        (r"put (?:a |an |some |the )?(?P<t>clean|hot|cool|cold) (?P<o>[a-z]+) "
         r"(?:in|on|in/on) (?:the |a )?(?P<r>[a-z]+)", "transform"),
        (r"put (?:a |an |some |the )?(?P<o>[a-z]+) (?:in|on|in/on) (?:the |a )?(?P<r>[a-z]+)", "pick_and_place"),
    ]
)


def parse_goal(goal: str) -> GoalSpec | None:
    """Parse an ALFWorld goal ("put a clean apple in fridge."); None if it is not one of the six types."""
    text = normalize(goal).split("your task is to:")[-1].strip()
    for rx, kind in _GOALS:
        m = rx.search(text)
        if not m:
            continue
        d = m.groupdict()
        if kind == "transform":
            t = {"hot": "heat", "cold": "cool"}.get(d["t"], d["t"])
            return GoalSpec(kind=t, obj=d["o"], recep=d["r"], transform=t)
        return GoalSpec(kind=kind, obj=d["o"], recep=d.get("r"), count=2 if kind == "pick_two" else 1)
    return None


_PLACE = re.compile(rf"\b(?:on|in) the ({_E}), you see ([^.]*)\.")
_OPENED = re.compile(rf"(?:you open the|the) ({_E})(?: is open)?\. (?:the {_E} is open\. )?in it, you see ([^.]*)\.")
_ITEM = re.compile(_E)


def sightings(observation: str) -> list[tuple[str, str]]:
    """``(object, receptacle)`` pairs an observation reveals ("On the countertop 1, you see a apple 1")."""
    text = (observation or "").lower()
    pairs: list[tuple[str, str]] = []
    for recep, items in [*_PLACE.findall(text), *_OPENED.findall(text)]:
        pairs += [(item, recep) for item in _ITEM.findall(items)]
    return list(dict.fromkeys(pairs))


def is_failure(observation: str) -> bool:
    """ALFWorld's answer to an action that did nothing."""
    return normalize(observation).startswith("nothing happens")


@dataclass
class AlfState:
    """The agent's situation after replaying a trajectory: where it is, what it holds, what it has done."""

    location: str | None = None
    holding: str | None = None
    transformed: set[str] = field(default_factory=set)  # objects cleaned/heated/cooled
    transforms: dict[str, str] = field(default_factory=dict)  # object -> its last transformation (clean/heat/cool)
    placed: list[tuple[str, str]] = field(default_factory=list)  # (object, receptacle) puts
    lamp_on: bool = False
    seen: dict[str, str] = field(default_factory=dict)  # object -> receptacle where last seen
    failed: list[str] = field(default_factory=list)  # actions answered "Nothing happens."


def track(steps: Iterable[tuple[str, str]], final_observation: str = "", state: AlfState | None = None) -> AlfState:
    """Replay ``(action, observation_after)`` pairs into an :class:`AlfState`.

    Args:
        steps: each action with the observation it produced.
        final_observation: an extra observation to read for sightings only (e.g. the initial room text).
    """
    st = state or AlfState()
    for obj, rec in sightings(final_observation):
        st.seen[obj] = rec
    for action, obs in steps:
        a = parse_action(action)
        if is_failure(obs):
            st.failed.append(a.text)
            continue
        for obj, rec in sightings(obs):
            st.seen[obj] = rec
        if a.template == "go to X":
            st.location = a.x
        elif a.template == "take X from Y":
            st.holding = a.x
            st.seen.pop(a.x or "", None)
            st.placed = [(o, r) for o, r in st.placed if o != a.x]  # taken back out: no longer placed
        elif a.template == "put X in/on Y" and a.x and a.y:
            st.placed.append((a.x, a.y))
            st.seen[a.x] = a.y
            st.holding = None
        elif a.template in ("clean X with Y", "heat X with Y", "cool X with Y") and a.x:
            st.transformed.add(a.x)
            st.transforms[a.x] = a.template.split()[0]  # a heated apple is not a cooled one
        elif a.template == "use X" and entity_type(a.x) in ("desklamp", "floorlamp"):
            st.lamp_on = True
    return st


def pairs_from_steps(observations_before: Sequence[str], actions: Sequence[str], final_observation: str = ""
                     ) -> list[tuple[str, str]]:
    """Turn "observation before action" steps into ``(action, observation_after)`` pairs.

    In our data model step k's observation precedes action k, so the result of action k is step k+1's
    observation, and the last action's result is ``final_observation``.
    """
    after = [*observations_before[1:], final_observation]
    return list(zip(actions, after))
