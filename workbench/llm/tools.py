"""Tool definitions: the proactive memory agent's four bank-editing tools, and the text-form tool protocol.

The proactive agent may change its bank only through these calls (paper 002, phase 1), so their argument
models are strict. Models that lack native tool calling are shown :func:`text_tool_instructions` and answer
in the ``<tool_call><function=...>`` text form, parsed by :func:`workbench.llm.parsing.parse_text_tool_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from workbench.llm.protocol import ToolSpec

__all__ = [
    "UpdateStatusArgs",
    "SaveKnowledgeArgs",
    "SaveProceduralArgs",
    "DeleteArgs",
    "PROACTIVE_TOOLS",
    "text_tool_instructions",
    "format_text_tool_call",
]

_ENTRY_ID = r"^[A-Za-z0-9_.:\-]{1,64}$"  # short identifiers the agent can later delete by


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpdateStatusArgs(_Args):
    status: str = Field(min_length=1, description="private progress note: done, open issues, risks")


class SaveKnowledgeArgs(_Args):
    id: str = Field(pattern=_ENTRY_ID, description="short identifier, e.g. 'loc:apple_1'")
    content: str = Field(min_length=1, description="a stable fact about the task or environment")


class SaveProceduralArgs(_Args):
    id: str = Field(pattern=_ENTRY_ID, description="short identifier, e.g. 'fail:open_fridge_1'")
    content: str = Field(min_length=1, description="an attempt and its outcome")


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


def format_text_tool_call(name: str, arguments: dict) -> str:
    """Render one call in the text form (what an offline backend in text mode, or a test, prints)."""
    params = "".join(
        f"<parameter={k}>{v if isinstance(v, str) else json.dumps(v)}</parameter>" for k, v in arguments.items()
    )
    return f"<tool_call><function={name}>{params}</function></tool_call>"


def text_tool_instructions(tools: Sequence[ToolSpec]) -> str:
    """System-prompt addendum describing ``tools`` and the text form for models without native tools."""
    lines = ["You can call these tools:"]
    for t in tools:
        lines.append(f"- {t.name}: {t.description}")
        lines.append(f"  parameters (JSON schema): {json.dumps(t.parameters_schema(), sort_keys=True)}")
    lines += [
        "To call a tool, write exactly:",
        "<tool_call><function=TOOL_NAME><parameter=PARAM>value</parameter></function></tool_call>",
        "One block per call; several blocks are allowed. Write no block to make no call.",
    ]
    return "\n".join(lines)
