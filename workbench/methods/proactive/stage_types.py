"""The proactive memory agent's LLM stages' typed inputs and outputs, and its four memory tools."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workbench.llm.protocol import ToolSpec
from workbench.llm.stage_models import StageInput, StageOutput
from workbench.memory.trajectory import Step

__all__ = ["Intervention", "BankEntry", "BankView", "ProactiveInput", "UpdateStatusArgs", "SaveKnowledgeArgs", "SaveProceduralArgs", "DeleteArgs", "PROACTIVE_TOOLS"]


# -- Proactive memory agent ---------------------------------------------------------------------------------
#: Longest status note and entry a tool call may store, and the longest reminder (ours: the offline algorithm's longest
#: entry is ~100 characters). The bank refuses longer ones; in the tools' schemas they make a longer reply invalid (the
#: repair turn, then a rejected reply) and stop a schema-constrained decoder from rambling into max_tokens.
MAX_STATUS_CHARS = 600
MAX_CONTENT_CHARS = 400
MAX_REMINDER_CHARS = 400


class Intervention(StageOutput):
    """Phase 2: a reminder for the next action-agent call, or an explicit ``null`` to stay silent."""

    reminder: str | None = Field(max_length=MAX_REMINDER_CHARS)

    @model_validator(mode="after")
    def _no_blank_reminder(self) -> Intervention:
        if self.reminder is not None and not self.reminder.strip():
            raise ValueError("reminder must be null (stay silent) or non-empty text")
        return self


class BankEntry(StageInput):
    """One bank entry as the memory agent sees it; ``created``: the step whose phase 1 saved it (None: unknown)."""

    id: str
    content: str
    created: int | None = Field(default=None, ge=0)


class BankView(StageInput):
    """The proactive agent's bank as the prompt shows it (status is private to the memory agent)."""

    status: str = ""
    knowledge: tuple[BankEntry, ...] = ()
    procedural: tuple[BankEntry, ...] = ()


class ProactiveInput(StageInput):
    """Both phases: goal, the recent window of steps, what the actor sees now, and the current bank."""

    goal: str
    step: int = Field(ge=0)
    window: tuple[Step, ...] = ()
    current_observation: str = ""
    bank: BankView = BankView()


_ENTRY_ID = r"^[A-Za-z0-9_.:\-]{1,64}$"  # short identifiers the agent can later delete by


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpdateStatusArgs(_Args):
    status: str = Field(min_length=1, max_length=MAX_STATUS_CHARS,
                        description="private progress note: done, open issues, risks")


class SaveKnowledgeArgs(_Args):
    id: str = Field(pattern=_ENTRY_ID, description="short identifier, e.g. 'loc:apple_1'")
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS,
                         description="a stable fact about the task or environment")


class SaveProceduralArgs(_Args):
    id: str = Field(pattern=_ENTRY_ID, description="short identifier, e.g. 'fail:open_fridge_1'")
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS, description="an attempt and its outcome")


class DeleteArgs(_Args):
    id: str = Field(pattern=_ENTRY_ID, description="identifier of the stale or wrong entry")


PROACTIVE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="memory_update_status",
        description="Replace your private status note (progress, open issues). Never shown to the actor.",
        args_model=UpdateStatusArgs,
    ),
    ToolSpec(
        name="memory_save_knowledge",
        description="Save or overwrite a stable fact (object location, requirement, environment rule).",
        args_model=SaveKnowledgeArgs,
    ),
    ToolSpec(
        name="memory_save_procedural",
        description="Save or overwrite an attempt and its outcome (a failed action, a step that worked).",
        args_model=SaveProceduralArgs,
    ),
    ToolSpec(
        name="memory_delete",
        description="Delete a knowledge or procedural entry that is outdated or wrong, by its id.",
        args_model=DeleteArgs,
    ),
)
