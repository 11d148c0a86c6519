"""MemoryPolicy: the seam through which every method decides what memory text enters each action prompt.

The loop calls ``begin`` once per episode, ``memory`` before every decision and ``observe`` after every
env step; it never knows which method it runs. Later methods (MemArbiter, proactive reminders) plug in
here without touching the loop.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from workbench.envs.base import Task
from workbench.envs.memory_base import default_memory_base
from workbench.memory.base import MemoryBase
from workbench.memory.render import render_pieces
from workbench.memory.retrieval import get_retriever
from workbench.memory.task_info import game_key
from workbench.memory.trajectory import MemoryEntry, Step, Trajectory
from workbench.registry import Registry

__all__ = ["MemoryBlock", "MemoryPolicy", "replay", "replay_at", "NoMemory", "FixedICL", "RetrievedTrajectory", "FixedEntry", "OtherTypeTrajectory", "RandomSameType", "register_policy", "get_policy", "policy_options", "predated_options", "list_policies",
           "build_policy", "POLICIES", "PolicyOptions", "MemoryBaseOptions", "RetrievedOptions"]


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
        pool = [e for e in self.base.entries(task.task_type) if game_key(e.task_id) != game_key(task.task_id)]
        if not pool:
            return None, {"memory_entry": None}
        e = random.Random(f"{self.seed}|{task.task_id}").choice(pool)
        return e, {"memory_entry": e.entry_id}


class PolicyOptions(BaseModel):
    """The options a memory policy takes, validated where it is registered (each method owns its model).

    Run configurations carry the options as plain fields (``budget``, ``interval`` ...); the runner hands the ones
    a run sets to :func:`build_policy`, which validates them with the policy's model: an option the policy does not
    take, a wrong type or an out-of-range value is an error naming the policy and the field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Options added after run folders of the policy were written, with the value those runs were played with: a
    #: folder whose identity lacks the option reads as that value (e.g. the proactive agent's window, 10 before it
    #: was an option), so ``--resume`` and adoption compare what was played, not today's default.
    PREDATES: ClassVar[dict[str, Any]] = {}


class MemoryBaseOptions(PolicyOptions):
    memory_base: str | None = None  # a memory base folder (e.g. one ``workbench refine`` wrote); None: the default


class RetrievedOptions(MemoryBaseOptions):
    retriever: str = "minilm"


def _base(memory_base: str | None):
    return MemoryBase(memory_base) if memory_base else default_memory_base()


def _icl(memory_base: str | None = None) -> FixedICL:
    return FixedICL(_base(memory_base))


def _random_same(memory_base: str | None = None) -> RandomSameType:
    return RandomSameType(_base(memory_base))


def _traj(retriever: str = "minilm", memory_base: str | None = None) -> RetrievedTrajectory:
    return RetrievedTrajectory(get_retriever(retriever, _base(memory_base)))


def _other_type(retriever: str = "minilm", memory_base: str | None = None) -> OtherTypeTrajectory:
    return OtherTypeTrajectory(get_retriever(retriever, _base(memory_base)))


#: Memory policies by name. The methods register theirs when ``workbench.methods`` is imported, which a miss does
#: (see :class:`workbench.registry.Registry`): this layer never imports the methods.
POLICIES: Registry[Callable[..., MemoryPolicy]] = Registry("memory policy", providers=("workbench.methods",))
POLICIES.register("none", NoMemory, doc="ReAct: no memory")
POLICIES.register("icl", _icl, options=MemoryBaseOptions, doc="a fixed demonstration per task type")
POLICIES.register("traj", _traj, options=RetrievedOptions, doc="the most similar expert trajectory (retrieved)")
POLICIES.register("other_type", _other_type, options=RetrievedOptions,
                  doc="control: the best-retrieved trajectory of another task type")
POLICIES.register("random_same", _random_same, options=MemoryBaseOptions,
                  doc="control: a random same-type trajectory of another game")


def register_policy(name: str, factory: Callable[..., MemoryPolicy], options: type[PolicyOptions] | None = None,
                    doc: str = "") -> None:
    """Register a policy factory under ``name``.

    Args:
        factory: called with the validated options as keyword arguments.
        options: the pydantic model of the options it takes (None: it takes none); a run that sets any other
            option for this policy is refused.
    """
    POLICIES.register(name, factory, options=options, doc=doc)


def get_policy(name: str) -> Callable[..., MemoryPolicy]:
    """The factory registered as ``name`` (a clear error naming every policy when there is none)."""
    return POLICIES.get(name)


def policy_options(name: str) -> tuple[str, ...]:
    """The names of the options policy ``name`` takes."""
    model = POLICIES.entry(name).options
    return tuple(model.model_fields) if model is not None else ()


def predated_options(name: str) -> dict[str, Any]:
    """What a run of policy ``name`` recorded before each of its later options existed was played with
    (:attr:`PolicyOptions.PREDATES`); empty for an unknown policy (its own error comes where it is built)."""
    try:
        model = POLICIES.entry(name).options
    except ValueError:
        return {}
    return dict(getattr(model, "PREDATES", {}) or {})


def list_policies() -> list[str]:
    return sorted(POLICIES.names())


def build_policy(name: str, retriever: str | None = None, **options: Any) -> MemoryPolicy:
    """A memory policy with its options validated by its own model.

    Options left at ``None`` (or empty) are not given, so the policy's defaults apply; ``retriever`` is given
    only to policies that retrieve (every run configuration names one).
    """
    given = {k: v for k, v in options.items() if v not in (None, ())}
    if retriever is not None and "retriever" in policy_options(name):
        given["retriever"] = retriever
    return POLICIES.create(name, **given)
