"""The one Protocol every benchmark implements, and the task record it is driven by."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["Task", "StepResult", "Environment", "DataRootError", "SimulatorDiedError"]


class DataRootError(FileNotFoundError):
    """The benchmark's data folder is missing or malformed; the message names the env var that sets it."""


class SimulatorDiedError(RuntimeError):
    """A benchmark's simulator process stopped answering mid-episode (ScienceWorld's JVM killed, out of memory);
    the episode is lost, the environment's next ``reset`` starts a fresh simulator (the worker replays it once)."""


@dataclass(frozen=True)
class Task:
    """One playable game.

    Attributes:
        task_id: stable id, ``<split>/<task folder>/<trial>`` -- unique across splits.
        split: ``valid_unseen``, ``valid_seen``, ``valid_train`` ...
        task_type: short type (``pick``, ``look``, ``clean``, ``heat``, ``cool``, ``pick_two``).
        path: absolute path of the game file.
        index: position within its split's sorted list (what ``--tasks 0:20`` slices).
        benchmark: the benchmark it belongs to (``workbench.envs.benchmarks``): what a method's LLM stages call the
            agent's world (``workbench.llm.templates.vocabulary``).
    """

    task_id: str
    split: str
    task_type: str
    path: str
    index: int = 0
    benchmark: str = "alfworld"
    meta: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class StepResult:
    observation: str
    reward: float
    done: bool
    won: bool
    admissible_commands: tuple[str, ...]


@runtime_checkable
class Environment(Protocol):
    """A text benchmark episode driver: one task at a time."""

    name: str
    max_steps: int

    def tasks(self, split: str, task_types: list[str] | None = None) -> list[Task]: ...

    def reset(self, task: Task) -> StepResult:
        """Start ``task``; the observation holds the room description and the goal."""
        ...

    def step(self, action: str) -> StepResult: ...

    def goal(self) -> str:
        """The current task's goal sentence (``put a clean apple in fridge.``)."""
        ...

    def expert_plan(self, task: Task) -> list[str]:
        """A plan that solves ``task`` (used for expert trajectories and teacher forcing)."""
        ...
