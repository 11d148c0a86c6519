"""AGMR's LLM stages' typed inputs and outputs (retrieval analyzer, reflector, refiner, direct edit) and those of Table 1's baselines (AWM, Dynamic Cheatsheet)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from workbench.llm.stage_models import StageInput, StageOutput
from workbench.memory.trajectory import MemoryEntry, Trajectory

__all__ = ["FailurePattern", "PatternJudgement", "PatternJudgeInput", "RetrievalAnalysis", "FailureReflection", "RedundantSegment", "SuccessReflection", "Pattern", "PATTERNS", "SegmentEdit", "Refinement", "DirectEdit", "Workflow", "CheatsheetEntry", "MAX_CHEATSHEET", "Cheatsheet", "RetrievalAnalyzerInput", "ReflectorInput", "FailureRefinerInput", "SuccessRefinerInput", "DirectFailureEditInput", "DirectSuccessEditInput", "WorkflowInput", "CurateInput"]


# -- AGMR ---------------------------------------------------------------------------------------------------
# Bounds of the free-text and list fields (ours): a reply past them is refused, and a schema-constrained decoder
# cannot ramble into max_tokens. Set well above what the offline algorithms write on all 140 valid_seen tasks of
# both committed refinements (reason 245 characters, actions 36, a segment's text 494, 3 edits).
MAX_REASON_CHARS = 400
MAX_ACTION_CHARS = 200
MAX_SEGMENT_CHARS = 1000
MAX_EDITS = 8
class RetrievalAnalysis(StageOutput):
    """Retrieval analyzer (AGMR appendix C.1): why memory turned a failure into a success.

    ``key_step`` indexes the successful (memory-augmented) trajectory; ``key_segment`` indexes the memory;
    ``key_context`` is the memory snippet that supports the key step (becomes the retrieval supervision).
    """

    failure_reason: str
    key_step: int = Field(ge=0)
    key_action: str
    key_segment: int = Field(ge=0)
    key_context: str = Field(min_length=1)


class FailureReflection(StageOutput):
    """Semantic reflector, failure branch: the earliest critical error and the memory that should fix it."""

    critical_step: int = Field(ge=0)
    wrong_action: str = Field(max_length=MAX_ACTION_CHARS)
    correct_action: str = Field(min_length=1, max_length=MAX_ACTION_CHARS)
    supporting_segment: int = Field(ge=0)
    reason: str = Field("", max_length=MAX_REASON_CHARS)


class RedundantSegment(StageOutput):
    index: int = Field(ge=0)
    reason: str = Field("", max_length=MAX_REASON_CHARS)


class SuccessReflection(StageOutput):
    """Semantic reflector, success branch: memory segments the successful run did not need."""

    # Required, not defaulted: a bare ``{}`` from a confused model must not read as "nothing redundant".
    redundant_segments: tuple[RedundantSegment, ...] = Field(max_length=MAX_EDITS)

    @model_validator(mode="after")
    def _unique(self) -> SuccessReflection:
        idx = [r.index for r in self.redundant_segments]
        if len(idx) != len(set(idx)):
            raise ValueError("redundant_segments lists the same index twice")
        return self


Pattern = Literal["attended_but_wrong", "missed_relevant", "distracted_by_irrelevant", "low_utilization_redundancy"]


PATTERNS: tuple[str, ...] = Pattern.__args__  # type: ignore[attr-defined]


FailurePattern = Literal["attended_but_wrong", "missed_relevant", "distracted_by_irrelevant"]


class PatternJudgement(StageOutput):
    """The failure-pattern judge's label (stage ``pattern_judge``), to set beside the rule's."""

    pattern: FailurePattern
    rationale: str = Field(default="", max_length=600)


class PatternJudgeInput(StageInput):
    """What the rule reads, for a model to judge: the memory, the critical step, the supporting segment and the
    column ``C[:, j]`` with the entry's median peak (the rule's reference for "attended")."""

    memory: MemoryEntry
    step: int = Field(ge=0)
    correct_action: str = ""
    segment: int = Field(ge=0)
    utilization: tuple[float, ...]
    scale: float | None = None

    @model_validator(mode="after")
    def _shapes(self) -> PatternJudgeInput:
        n = len(self.memory.segments)
        if len(self.utilization) != n:
            raise ValueError(f"utilization has {len(self.utilization)} scores but the memory has {n} segments")
        if not 0 <= self.segment < max(n, 1):
            raise ValueError(f"segment {self.segment} is not a segment index")
        return self


class SegmentEdit(StageOutput):
    """One edit of the memory.

    ``index`` always refers to the ORIGINAL segment list. ``insert`` puts a new segment before ``index``
    (``index == len(segments)`` appends). ``text`` is the new segment in the prompt's layout
    (``Observation: ...`` / ``Thought: ...`` / ``Action: ...`` lines); ``delete`` carries no text.
    """

    index: int = Field(ge=0)
    op: Literal["replace", "insert", "delete"]
    text: str | None = Field(None, max_length=MAX_SEGMENT_CHARS)

    @model_validator(mode="after")
    def _text_matches_op(self) -> SegmentEdit:
        if self.op == "delete" and self.text:
            raise ValueError("a delete edit must not carry text")
        if self.op != "delete" and not (self.text or "").strip():
            raise ValueError(f"a {self.op} edit needs non-empty text")
        return self


class Refinement(StageOutput):
    """Attention-guided refiner: the diagnosed utilization pattern and the segment edits it implies."""

    pattern: Pattern
    target_segment: int | None = Field(default=None, ge=0)
    distractor_segments: tuple[int, ...] = Field((), max_length=MAX_EDITS)
    edits: tuple[SegmentEdit, ...] = Field((), max_length=MAX_EDITS)
    rationale: str = Field("", max_length=MAX_REASON_CHARS)


class DirectEdit(StageOutput):
    """The reflector's own edits, without utilization (AGMR Table 2's "w/o AGR")."""

    edits: tuple[SegmentEdit, ...] = Field(max_length=MAX_EDITS)  # required: a bare {} must not read as "no edit"
    rationale: str = Field("", max_length=MAX_REASON_CHARS)


class Workflow(StageOutput):
    """AWM (offline workflow memory): one task type's reusable workflow.

    ``steps`` are ALFWorld commands with placeholders: ``{obj}`` the task's object, ``{target}`` its target
    receptacle (or lamp), ``{place}`` wherever the object is found; ``{obj}`` and ``{target}`` are filled from each
    task's goal when shown, ``{place}`` stays as ``a place``.
    """

    steps: tuple[str, ...] = Field(min_length=1)
    rationale: str = ""


MAX_CHEATSHEET = 60  # insights a Dynamic Cheatsheet keeps (the curator forgets the least useful beyond this)


class CheatsheetEntry(StageOutput):
    """One insight of a Dynamic Cheatsheet (DC-RS): ``topic`` names what it is about (a task type's procedure,
    where an object type is found, ...), ``insight`` is the sentence the action agent reads, ``uses`` how many
    retrieved trajectories have supported it so far (carried from one cheatsheet to the next)."""

    topic: str = Field(min_length=1, max_length=80)
    insight: str = Field(min_length=1, max_length=300)
    uses: int = Field(default=1, ge=1)


class Cheatsheet(StageOutput):
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


class RetrievalAnalyzerInput(StageInput):
    """A task that failed without memory and succeeded with ``memory`` (AGMR appendix C.1)."""

    memory: MemoryEntry
    failed: Trajectory
    succeeded: Trajectory


class ReflectorInput(StageInput):
    """The retrieved memory and the run that used it; ``expert_plan`` is this task's reference actions.

    Without an expert plan, the memory's own actions serve as the reference (right when the memory is a
    successful run of the same task, as in offline refinement of a memory base).
    """

    memory: MemoryEntry
    trajectory: Trajectory
    expert_plan: tuple[str, ...] = ()


class FailureRefinerInput(StageInput):
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


class SuccessRefinerInput(StageInput):
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


class DirectFailureEditInput(StageInput):
    """w/o AGR, failure branch: the reflection alone, no utilization."""

    memory: MemoryEntry
    reflection: FailureReflection

    @model_validator(mode="after")
    def _segment(self) -> DirectFailureEditInput:
        if not 0 <= self.reflection.supporting_segment < max(len(self.memory.segments), 1):
            raise ValueError(f"supporting_segment {self.reflection.supporting_segment} is not a segment index")
        return self


class DirectSuccessEditInput(StageInput):
    """w/o AGR, success branch: the redundancy candidates alone, no utilization."""

    memory: MemoryEntry
    reflection: SuccessReflection


class WorkflowInput(StageInput):
    """AWM induction: successful trajectories (memory entries) of one task type."""

    task_type: str = Field(min_length=1)
    examples: tuple[MemoryEntry, ...] = Field(min_length=1)


class CurateInput(StageInput):
    """DC-RS curator for one task of the stream: the cheatsheet written for the previous task, this task's goal and
    type, and the memory-base trajectories retrieved for it (most similar first)."""

    goal: str = Field(min_length=1)
    task_type: str = Field(min_length=1)
    previous: Cheatsheet = Cheatsheet()
    examples: tuple[MemoryEntry, ...] = ()
