"""Typed inputs of every LLM stage: the structured payload a prompt is rendered from.

The same payload travels with the request as ``context``, so offline algorithmic backends compute their
answer from data, not from re-parsing prose (see :mod:`.stages`). Trajectories and memories are the
project's own records (:mod:`workbench.memory.trajectory`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workbench.llm.schemas import (
    Cheatsheet,
    FailureReflection,
    ParsedState,
    SuccessReflection,
)
from workbench.memory.trajectory import MemoryEntry, Step, Trajectory

__all__ = [
    "RetrievalAnalyzerInput",
    "ReflectorInput",
    "FailureRefinerInput",
    "SuccessRefinerInput",
    "DirectFailureEditInput",
    "DirectSuccessEditInput",
    "WorkflowInput",
    "CurateInput",
    "WriterInput",
    "StateParserInput",
    "BankEntry",
    "BankView",
    "ProactiveInput",
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrievalAnalyzerInput(_In):
    """A task that failed without memory and succeeded with ``memory`` (AGMR appendix C.1)."""

    memory: MemoryEntry
    failed: Trajectory
    succeeded: Trajectory


class ReflectorInput(_In):
    """The retrieved memory and the run that used it; ``expert_plan`` is this task's reference actions.

    Without an expert plan, the memory's own actions serve as the reference (right when the memory is a
    successful run of the same task, as in offline refinement of a memory base).
    """

    memory: MemoryEntry
    trajectory: Trajectory
    expert_plan: tuple[str, ...] = ()


class FailureRefinerInput(_In):
    """Failure branch: the reflection and column ``C[:, j]`` of the utilization matrix at the error step."""

    memory: MemoryEntry
    reflection: FailureReflection
    utilization: tuple[float, ...] = Field(description="one score per memory segment at the critical step")
    scale: float | None = Field(default=None, description="the entry's median peak utilization (median_k c^max_k), "
                                "the reference for 'attended'; None: the column's own maximum")

    @model_validator(mode="after")
    def _shapes(self) -> FailureRefinerInput:
        n = len(self.memory.segments)
        if len(self.utilization) != n:
            raise ValueError(f"utilization has {len(self.utilization)} scores but the memory has {n} segments")
        if not 0 <= self.reflection.supporting_segment < max(n, 1):
            raise ValueError(f"supporting_segment {self.reflection.supporting_segment} is not a segment index")
        return self


class SuccessRefinerInput(_In):
    """Success branch: redundancy candidates and the whole matrix ``C`` (rows = segments, cols = steps)."""

    memory: MemoryEntry
    reflection: SuccessReflection
    utilization: tuple[tuple[float, ...], ...]
    weak_rule: Literal["relative", "global_capped", "global"] = "relative"  # appendix E.2: ALFWorld, SciWorld, WebShop

    @model_validator(mode="after")
    def _shapes(self) -> SuccessRefinerInput:
        if len(self.utilization) != len(self.memory.segments):
            raise ValueError(f"utilization has {len(self.utilization)} rows but the memory has "
                             f"{len(self.memory.segments)} segments")
        return self


class DirectFailureEditInput(_In):
    """w/o AGR, failure branch: the reflection alone, no utilization."""

    memory: MemoryEntry
    reflection: FailureReflection

    @model_validator(mode="after")
    def _segment(self) -> DirectFailureEditInput:
        if not 0 <= self.reflection.supporting_segment < max(len(self.memory.segments), 1):
            raise ValueError(f"supporting_segment {self.reflection.supporting_segment} is not a segment index")
        return self


class DirectSuccessEditInput(_In):
    """w/o AGR, success branch: the redundancy candidates alone, no utilization."""

    memory: MemoryEntry
    reflection: SuccessReflection


class WorkflowInput(_In):
    """AWM induction: successful trajectories (memory entries) of one task type."""

    task_type: str = Field(min_length=1)
    examples: tuple[MemoryEntry, ...] = Field(min_length=1)


class CurateInput(_In):
    """DC-RS curator for one task of the stream: the cheatsheet written for the previous task, this task's goal and
    type, and the memory-base trajectories retrieved for it (most similar first)."""

    goal: str = Field(min_length=1)
    task_type: str = Field(min_length=1)
    previous: Cheatsheet = Cheatsheet()
    examples: tuple[MemoryEntry, ...] = ()


class WriterInput(_In):
    """MemArbiter candidate writer at step ``step``: the newest evidence plus the parsed state, and the active
    items (``[id] bank: content``), so a model writer can see what is stored and revise it instead of repeating it
    (the offline writer reads only the evidence)."""

    goal: str
    step: int = Field(ge=0)
    observation: str
    previous_action: str | None = None
    state: ParsedState | None = None
    memory: tuple[str, ...] = ()


class StateParserInput(_In):
    """MemArbiter state parser: the goal, the steps so far, and the observation the agent now sees."""

    goal: str
    observation: str
    history: tuple[Step, ...] = ()


class BankEntry(_In):
    """One bank entry as the memory agent sees it; ``created``: the step whose phase 1 saved it (None: unknown)."""

    id: str
    content: str
    created: int | None = Field(default=None, ge=0)


class BankView(_In):
    """The proactive agent's bank as the prompt shows it (status is private to the memory agent)."""

    status: str = ""
    knowledge: tuple[BankEntry, ...] = ()
    procedural: tuple[BankEntry, ...] = ()


class ProactiveInput(_In):
    """Both phases: goal, the recent window of steps, what the actor sees now, and the current bank."""

    goal: str
    step: int = Field(ge=0)
    window: tuple[Step, ...] = ()
    current_observation: str = ""
    bank: BankView = BankView()
