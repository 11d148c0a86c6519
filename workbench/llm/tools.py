"""Tool definitions: the proactive memory agent's four bank-editing tools, and the text-form tool protocol.

The proactive agent may change its bank only through these calls (paper 002, phase 1), so their argument
models are strict. Models that lack native tool calling are shown :func:`text_tool_instructions` and answer
in the ``<tool_call><function=...>`` text form, parsed by :func:`workbench.llm.parsing.parse_text_tool_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from workbench.llm.protocol import ToolSpec

__all__ = ["text_tool_instructions", "format_text_tool_call"]


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
