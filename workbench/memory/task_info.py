"""What a task id and a goal say about a task: its ALFWorld game (split/task folder/trial) and its type.

ALFWorld task ids look like ``valid_train/pick_and_place_simple-Apple-None-Fridge-1/trial_T2019...`` (the
layout of ``json_2.1.1/<split>/<task folder>/<trial>/game.tw-pddl``); ETO records name the game file. The
short task types (pick, look, clean, heat, cool, pick_two) come from the task folder when there is one and
from the goal's wording otherwise (ALFWorld's goal templates are distinctive per type).

The folder-prefix table mirrors ``workbench.envs.normalize.TASK_TYPE_PREFIXES``: it is repeated here because
``workbench.envs`` imports this package (experts build Trajectories), so importing it back would be a cycle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ALFRED_TASK_TYPES",
    "TASK_TYPES",
    "GameRef",
    "parse_game_ref",
    "game_key",
    "task_type_from_id",
    "task_type_from_goal",
    "infer_task_type",
]

# ALFRED task-folder prefix -> short type (the six ALFWorld types; movable-receptacle tasks are not in ALFWorld).
ALFRED_TASK_TYPES: dict[str, str] = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick_two",
}
TASK_TYPES: tuple[str, ...] = tuple(ALFRED_TASK_TYPES.values())

_GAME_FILES = ("game.tw-pddl", "traj_data.json", "initial_state.pddl")


@dataclass(frozen=True)
class GameRef:
    """One ALFWorld game: ``split`` may be "" when the id carries only the task folder and trial."""

    split: str
    task_folder: str
    trial: str

    @property
    def task_id(self) -> str:
        """The project's task id, ``split/task_folder/trial`` (``task_folder/trial`` without a split)."""
        return "/".join(p for p in (self.split, self.task_folder, self.trial) if p)

    @property
    def task_type(self) -> str:
        return ALFRED_TASK_TYPES[self.task_folder.split("-", 1)[0]]

    @property
    def target_object(self) -> str:
        """The object the task is about, lower case as the game names it (``Apple`` in ``pick_..-Apple-None-..``)."""
        return self.task_folder.split("-")[1].lower()


def parse_game_ref(task_id_or_path: str) -> GameRef | None:
    """Find ``[split/]task_folder/trial`` in a task id or a game-file path; None if it has no ALFRED folder.

    >>> parse_game_ref("valid_train/pick_and_place_simple-Apple-None-Fridge-1/trial_T1").task_folder
    'pick_and_place_simple-Apple-None-Fridge-1'
    """
    parts = [p for p in str(task_id_or_path).replace("\\", "/").split("/") if p]
    if parts and parts[-1] in _GAME_FILES:
        parts = parts[:-1]
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].split("-", 1)[0] in ALFRED_TASK_TYPES and "-" in parts[i]:
            trial = parts[i + 1] if i + 1 < len(parts) else ""
            split = parts[i - 1] if i > 0 else ""
            return GameRef(split=split, task_folder=parts[i], trial=trial)
    return None


def game_key(task_id: str) -> str:
    """Identity of a task's game, independent of split prefixes: ``task_folder/trial``, else the id itself.

    Two ids with the same key are the same game (e.g. ``train/X/trial_1`` and ``json_2.1.1/train/X/trial_1``),
    which retrieval must never return for each other.
    """
    ref = parse_game_ref(task_id)
    if ref is None:
        return task_id
    return "/".join(p for p in (ref.task_folder, ref.trial) if p)


def task_type_from_id(task_id: str) -> str | None:
    """Short type from the ALFRED task folder inside ``task_id``; None if it has none."""
    ref = parse_game_ref(task_id)
    return ref.task_type if ref else None


# ALFWorld goal templates (alfworld/gen): one or two phrasings per type; checked in this order.
_GOAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("look", re.compile(r"^(look at .+ under the |examine .+ with the )")),
    ("pick_two", re.compile(r"^(put|find) two ")),
    ("clean", re.compile(r"\bclean\b")),
    ("heat", re.compile(r"\b(hot|heat)\b")),
    ("cool", re.compile(r"\b(cool|cold)\b")),
    ("pick", re.compile(r"^put (a|an|some) ")),
)


def task_type_from_goal(goal: str) -> str | None:
    """Short type from ALFWorld goal wording ("put a clean apple in fridge." -> "clean"); None if unknown."""
    text = " ".join(goal.lower().split())
    for task_type, pattern in _GOAL_PATTERNS:
        if pattern.search(text):
            return task_type
    return None


def infer_task_type(task_id: str, goal: str) -> str:
    """Type from the task folder in ``task_id`` if present, else from ``goal``; "" when neither says."""
    return task_type_from_id(task_id) or task_type_from_goal(goal) or ""
