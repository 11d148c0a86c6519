"""Typed outputs of every LLM stage (what a model must return, validated before any method sees it).

Segment and step indices are 0-based and refer to the lists exactly as the prompt enumerated them. Schemas
forbid unknown fields so a model that invents a key is told so in the repair retry instead of having the key
silently dropped.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "RetrievalAnalysis",
    "FailureReflection",
    "RedundantSegment",
    "SuccessReflection",
    "Pattern",
    "PATTERNS",
    "SegmentEdit",
    "Refinement",
    "DirectEdit",
    "Workflow",
    "CheatsheetEntry",
    "Cheatsheet",
    "MAX_CHEATSHEET",
    "Bank",
    "BANKS",
    "CandidateItem",
    "CandidateWrites",
    "ParsedState",
    "Intervention",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- AGMR ---------------------------------------------------------------------------------------------------
class RetrievalAnalysis(_Out):
    """Retrieval analyzer (AGMR appendix C.1): why memory turned a failure into a success.

    ``key_step`` indexes the successful (memory-augmented) trajectory; ``key_segment`` indexes the memory;
    ``key_context`` is the memory snippet that supports the key step (becomes the retrieval supervision).
    """

    failure_reason: str
    key_step: int = Field(ge=0)
    key_action: str
    key_segment: int = Field(ge=0)
    key_context: str = Field(min_length=1)


class FailureReflection(_Out):
    """Semantic reflector, failure branch: the earliest critical error and the memory that should fix it."""

    critical_step: int = Field(ge=0)
    wrong_action: str
    correct_action: str = Field(min_length=1)
    supporting_segment: int = Field(ge=0)
    reason: str = ""


class RedundantSegment(_Out):
    index: int = Field(ge=0)
    reason: str = ""


class SuccessReflection(_Out):
    """Semantic reflector, success branch: memory segments the successful run did not need."""

    # Required, not defaulted: a bare ``{}`` from a confused model must not read as "nothing redundant".
    redundant_segments: tuple[RedundantSegment, ...]

    @model_validator(mode="after")
    def _unique(self) -> SuccessReflection:
        idx = [r.index for r in self.redundant_segments]
        if len(idx) != len(set(idx)):
            raise ValueError("redundant_segments lists the same index twice")
        return self


Pattern = Literal["attended_but_wrong", "missed_relevant", "distracted_by_irrelevant", "low_utilization_redundancy"]
PATTERNS: tuple[str, ...] = Pattern.__args__  # type: ignore[attr-defined]


class SegmentEdit(_Out):
    """One edit of the memory.

    ``index`` always refers to the ORIGINAL segment list. ``insert`` puts a new segment before ``index``
    (``index == len(segments)`` appends). ``text`` is the new segment in the prompt's layout
    (``Observation: ...`` / ``Thought: ...`` / ``Action: ...`` lines); ``delete`` carries no text.
    """

    index: int = Field(ge=0)
    op: Literal["replace", "insert", "delete"]
    text: str | None = None

    @model_validator(mode="after")
    def _text_matches_op(self) -> SegmentEdit:
        if self.op == "delete" and self.text:
            raise ValueError("a delete edit must not carry text")
        if self.op != "delete" and not (self.text or "").strip():
            raise ValueError(f"a {self.op} edit needs non-empty text")
        return self


class Refinement(_Out):
    """Attention-guided refiner: the diagnosed utilization pattern and the segment edits it implies."""

    pattern: Pattern
    target_segment: int | None = Field(default=None, ge=0)
    distractor_segments: tuple[int, ...] = ()
    edits: tuple[SegmentEdit, ...] = ()
    rationale: str = ""


class DirectEdit(_Out):
    """The reflector's own edits, without utilization (AGMR Table 2's "w/o AGR")."""

    edits: tuple[SegmentEdit, ...]  # required: a bare {} must not read as "no edit needed"
    rationale: str = ""


class Workflow(_Out):
    """AWM (offline workflow memory): one task type's reusable workflow.

    ``steps`` are ALFWorld commands with placeholders: ``{obj}`` the task's object, ``{target}`` its target
    receptacle (or lamp), ``{place}`` wherever the object is found; ``{obj}`` and ``{target}`` are filled from each
    task's goal when shown, ``{place}`` stays as ``a place``.
    """

    steps: tuple[str, ...] = Field(min_length=1)
    rationale: str = ""


MAX_CHEATSHEET = 60  # insights a Dynamic Cheatsheet keeps (the curator forgets the least useful beyond this)


class CheatsheetEntry(_Out):
    """One insight of a Dynamic Cheatsheet (DC-RS): ``topic`` names what it is about (a task type's procedure,
    where an object type is found, ...), ``insight`` is the sentence the action agent reads, ``uses`` how many
    retrieved trajectories have supported it so far (carried from one cheatsheet to the next)."""

    topic: str = Field(min_length=1, max_length=80)
    insight: str = Field(min_length=1, max_length=300)
    uses: int = Field(default=1, ge=1)


class Cheatsheet(_Out):
    """DC-RS (Dynamic Cheatsheet, retrieval & synthesis): the curator's memory after one task, the insights most
    useful for that task first; at most :data:`MAX_CHEATSHEET` entries, one per topic."""

    entries: tuple[CheatsheetEntry, ...] = Field(default=(), max_length=MAX_CHEATSHEET)
    rationale: str = ""

    @model_validator(mode="after")
    def _one_per_topic(self) -> "Cheatsheet":
        topics = [e.topic for e in self.entries]
        if len(set(topics)) != len(topics):
            dup = sorted({t for t in topics if topics.count(t) > 1})
            raise ValueError(f"cheatsheet topics must be unique; repeated: {', '.join(dup)}")
        return self


# -- MemArbiter ---------------------------------------------------------------------------------------------
Bank = Literal["goal", "task_state", "constraint", "episodic", "reference"]
BANKS: tuple[str, ...] = Bank.__args__  # type: ignore[attr-defined]


class CandidateItem(_Out):
    """One atomic memory item proposed for one bank.

    ``focal`` is the item's content (its full rendering). ``ambient`` is optional and not shown: MemArbiter renders
    the ambient band with its own deterministic bank templates (``workbench.methods.arbiter.ambient``), so every
    backend's items read the same there; a writer that proposes one is not refused for it.
    """

    bank: Bank
    focal: str = Field(min_length=1)
    ambient: str = ""
    entities: tuple[str, ...] = ()
    op: Literal["add", "revise"] = "add"
    source: str = ""


class CandidateWrites(_Out):
    """MemArbiter candidate writer: the atomic items extracted from the latest evidence."""

    items: tuple[CandidateItem, ...]  # required for the same reason as redundant_segments


class ParsedState(_Out):
    """MemArbiter state parser: the decision variables of the current step."""

    subgoal: str = Field(min_length=1)
    completed: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    information_needs: tuple[str, ...] = ()
    location: str | None = None
    holding: str | None = None
    last_action_failed: bool = False


# -- Proactive memory agent ---------------------------------------------------------------------------------
class Intervention(_Out):
    """Phase 2: a reminder for the next action-agent call, or an explicit ``null`` to stay silent."""

    reminder: str | None

    @model_validator(mode="after")
    def _no_blank_reminder(self) -> Intervention:
        if self.reminder is not None and not self.reminder.strip():
            raise ValueError("reminder must be null (stay silent) or non-empty text")
        return self
