"""MemoryPolicy: the seam through which every method decides what memory text enters each action prompt.

The loop calls ``begin`` once per episode, ``memory`` before every decision and ``observe`` after every
env step; it never knows which method it runs. Later methods (MemArbiter, proactive reminders) plug in
here without touching the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from workbench.envs.base import Task
from workbench.memory.trajectory import MemoryEntry, Step, Trajectory

__all__ = ["MemoryBlock", "MemoryPolicy", "replay", "replay_at", "NoMemory", "FixedICL", "RetrievedTrajectory", "FixedEntry", "OtherTypeTrajectory", "RandomSameType", "register_policy", "get_policy", "policy_options", "list_policies"]


@dataclass(frozen=True)
class MemoryBlock:
    """What a policy puts in the prompt at one step.

    Two prompt layouts exist. ``react`` (the default): the memory ``pieces`` above the task and the full history
    below it (:mod:`workbench.prompts.layout`). ``working_memory``: the block ``working_memory`` (P_t) *in place
    of* the history, between the goal and the current observation (:mod:`workbench.prompts.working_memory`).

    Attributes:
        pieces: memory pieces (kind, segment, text) for the ReAct memory block, or empty.
        reminder: an optional reminder line placed after the history (or the current observation).
        entry: the memory entry the pieces come from (for C, refinement and reports).
        meta: anything worth logging (retrieval score, ...).
        layout: ``react`` or ``working_memory``.
        working_memory: the pieces of P_t (``WMPiece``) for the working-memory layout.
        record: what the run records for this step beside the decision (items, bands, signals...); it is
            merged into the step's record in ``Trajectory.meta["steps"]``.
        reminder_label: how the reminder line is introduced ("Reminder", or "Memory bank" for passive exposure).
    """

    pieces: tuple = ()
    reminder: str | None = None
    entry: MemoryEntry | None = None
    meta: dict = field(default_factory=dict)
    layout: str = "react"
    working_memory: tuple = ()
    record: dict = field(default_factory=dict)
    reminder_label: str = "Reminder"

    def __post_init__(self) -> None:
        if self.layout not in ("react", "working_memory"):
            raise ValueError(f"MemoryBlock layout '{self.layout}': expected 'react' or 'working_memory'")


@runtime_checkable
class MemoryPolicy(Protocol):
    name: str

    def begin(self, task: Task, goal: str, room: str) -> None: ...

    def memory(self, step: int, history: list[Step]) -> MemoryBlock: ...

    def observe(self, step: Step, next_observation: str) -> None: ...


def replay(policy: MemoryPolicy, task: Task, traj: Trajectory):
    """Replay ``policy`` along a recorded episode as the agent loop fed it: ``begin``, then at each step the
    block it shows given the episode's own history, then ``observe`` of that step's outcome (the next step's
    observation; the episode's final one after the last step).

    Yields:
        ``(k, step, history, block)``; the consumer's work on a block happens before the policy observes step k,
        so counterfactuals asked of the policy then are of that state. Stopping early leaves the rest unplayed.
    """
    policy.begin(task, traj.goal, traj.initial_observation)
    final = (traj.meta or {}).get("final_observation", "")
    for k, step in enumerate(traj.steps):
        history = list(traj.steps[:k])
        yield k, step, history, policy.memory(k, history)
        policy.observe(step, traj.steps[k + 1].observation if k + 1 < traj.n_steps else final)


def replay_at(policy: MemoryPolicy, task: Task, traj: Trajectory, steps):
    """:func:`replay`, yielding only at ``steps`` (sorted or not) and stopping after the last of them."""
    wanted = set(steps)
    last = max(wanted, default=-1)
    for k, step, history, block in replay(policy, task, traj):
        if k > last:
            return
        if k in wanted:
            yield k, step, history, block


def _pieces(entry: MemoryEntry) -> tuple:
    from workbench.memory.render import render_pieces

    return tuple(render_pieces(entry))


class NoMemory:
    """ReAct without memory."""

    name = "none"

    def begin(self, task: Task, goal: str, room: str) -> None:
        pass

    def memory(self, step: int, history: list[Step]) -> MemoryBlock:
        return MemoryBlock()

    def observe(self, step: Step, next_observation: str) -> None:
        pass


class _StaticEntry:
    """A policy that shows one entry, chosen at ``begin``, for the whole episode."""

    name = "static"

    def __init__(self) -> None:
        self._block = MemoryBlock()

    def _choose(self, task: Task, goal: str) -> tuple[MemoryEntry | None, dict]:
        raise NotImplementedError

    def begin(self, task: Task, goal: str, room: str) -> None:
        entry, meta = self._choose(task, goal)
        self._block = MemoryBlock(pieces=_pieces(entry), entry=entry, meta=meta) if entry else MemoryBlock(meta=meta)

    def memory(self, step: int, history: list[Step]) -> MemoryBlock:
        return self._block

    def observe(self, step: Step, next_observation: str) -> None:
        pass


class FixedEntry(_StaticEntry):
    """One given entry at every step of every episode (AGMR executes a task with m* and re-executes it with m')."""

    name = "fixed-entry"

    def __init__(self, entry: MemoryEntry, meta: dict | None = None) -> None:
        super().__init__()
        self.entry = entry
        self._meta = {"memory_entry": entry.entry_id, "memory_version": entry.version, **(meta or {})}

    def _choose(self, task: Task, goal: str) -> tuple[MemoryEntry | None, dict]:
        return self.entry, dict(self._meta)


class FixedICL(_StaticEntry):
    """One fixed demonstration per task type (the same for every task of that type), as in ReAct's ICL.

    The demonstration of a type is the memory-base entry of that type with the smallest entry id that is
    not the task's own game, so it is fixed, reproducible and never leaks the answer.
    """

    name = "icl"

    def __init__(self, base) -> None:
        super().__init__()
        self._by_type: dict[str, list[MemoryEntry]] = {}
        for e in sorted(base.entries(), key=lambda e: e.entry_id):
            self._by_type.setdefault(e.task_type, []).append(e)

    def _choose(self, task: Task, goal: str) -> tuple[MemoryEntry | None, dict]:
        for e in self._by_type.get(task.task_type, []):
            if e.task_id != task.task_id:
                return e, {"memory_entry": e.entry_id}
        return None, {"memory_entry": None}


class RetrievedTrajectory(_StaticEntry):
    """The most similar memory-base entry (by the retriever), never the task's own game."""

    name = "traj"

    def __init__(self, retriever, same_type: bool = True) -> None:
        super().__init__()
        self.retriever = retriever
        self.same_type = same_type

    def _choose(self, task: Task, goal: str) -> tuple[MemoryEntry | None, dict]:
        hits = self.retriever.retrieve(goal, task.task_id, task.task_type if self.same_type else None, k=1)
        if not hits:
            return None, {"memory_entry": None}
        entry, score = hits[0]
        return entry, {"memory_entry": entry.entry_id, "retrieval_score": float(score)}


class OtherTypeTrajectory(_StaticEntry):
    """Memory control: the best-retrieved trajectory whose task type differs from the task's (a wrong procedure:
    an agent that reads its memory should fall below no memory with it)."""

    name = "other_type"

    def __init__(self, retriever) -> None:
        super().__init__()
        self.retriever = retriever

    def _choose(self, task: Task, goal: str) -> tuple[MemoryEntry | None, dict]:
        for entry, score in self.retriever.retrieve(goal, task.task_id, None, k=60):
            if entry.task_type != task.task_type:
                return entry, {"memory_entry": entry.entry_id, "retrieval_score": float(score)}
        return None, {"memory_entry": None}


class RandomSameType(_StaticEntry):
    """Memory control: a random (seeded per task) same-type trajectory of another game instead of the retrieved
    one (how much of Traj's gain is retrieval rather than the task type)."""

    name = "random_same"

    def __init__(self, base, seed: int = 0) -> None:
        super().__init__()
        self.base, self.seed = base, seed

    def _choose(self, task: Task, goal: str) -> tuple[MemoryEntry | None, dict]:
        import random

        from workbench.memory.task_info import game_key

        pool = [e for e in self.base.entries(task.task_type) if game_key(e.task_id) != game_key(task.task_id)]
        if not pool:
            return None, {"memory_entry": None}
        e = random.Random(f"{self.seed}|{task.task_id}").choice(pool)
        return e, {"memory_entry": e.entry_id}


_POLICIES: dict[str, type] = {"none": NoMemory, "icl": FixedICL, "traj": RetrievedTrajectory,
                              "other_type": OtherTypeTrajectory, "random_same": RandomSameType}
_OPTIONS: dict[str, tuple[str, ...]] = {"none": (), "icl": ("memory_base",), "traj": ("retriever", "memory_base"),
                                        "other_type": ("retriever", "memory_base"), "random_same": ("memory_base",)}


def register_policy(name: str, cls, options: tuple[str, ...] = ()) -> None:
    """Register a policy class or factory under ``name``.

    Args:
        options: the run options (``RunConfig`` fields such as ``budget``, ``ablation``, ``backend``) the
            factory takes as keyword arguments; a run that sets any other option for this policy is refused.
    """
    _POLICIES[name] = cls
    _OPTIONS[name] = tuple(options)


def get_policy(name: str) -> type:
    if name not in _POLICIES:
        _load_methods()
    try:
        return _POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown memory policy '{name}' (known: {', '.join(list_policies())})") from None


def policy_options(name: str) -> tuple[str, ...]:
    """The run options policy ``name`` takes."""
    get_policy(name)
    return _OPTIONS.get(name, ())


def list_policies() -> list[str]:
    _load_methods()
    return sorted(_POLICIES)


def _load_methods() -> None:
    import workbench.methods  # noqa: F401  (registers the methods' policies)
