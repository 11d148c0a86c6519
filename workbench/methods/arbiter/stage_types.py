"""MemArbiter's LLM stages' typed inputs and outputs: the state parser and the candidate writer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workbench.llm.stage_models import StageInput, StageOutput
from workbench.memory.trajectory import Step

__all__ = ["Bank", "BANKS", "CandidateItem", "CandidateWrites", "ParsedState", "WriterInput", "StateParserInput"]


# -- MemArbiter ---------------------------------------------------------------------------------------------
Bank = Literal["goal", "task_state", "constraint", "episodic", "reference"]


BANKS: tuple[str, ...] = Bank.__args__  # type: ignore[attr-defined]


class CandidateItem(StageOutput):
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


class CandidateWrites(StageOutput):
    """MemArbiter candidate writer: the atomic items extracted from the latest evidence."""

    items: tuple[CandidateItem, ...]  # required for the same reason as redundant_segments


class ParsedState(StageOutput):
    """MemArbiter state parser: the decision variables of the current step."""

    subgoal: str = Field(min_length=1)
    completed: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    information_needs: tuple[str, ...] = ()
    location: str | None = None
    holding: str | None = None
    last_action_failed: bool = False


class WriterInput(StageInput):
    """MemArbiter candidate writer at step ``step``: the newest evidence plus the parsed state, and the active
    items (``[id] bank: content``), so a model writer can see what is stored and revise it instead of repeating it
    (the offline writer reads only the evidence)."""

    goal: str
    step: int = Field(ge=0)
    observation: str
    previous_action: str | None = None
    state: ParsedState | None = None
    memory: tuple[str, ...] = ()


class StateParserInput(StageInput):
    """MemArbiter state parser: the goal, the steps so far, and the observation the agent now sees."""

    goal: str
    observation: str
    history: tuple[Step, ...] = ()
