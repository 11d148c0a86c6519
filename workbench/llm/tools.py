"""Tool definitions: the proactive memory agent's four bank-editing tools, and the text-form tool protocol.

The proactive agent may change its bank only through these calls (paper 002, phase 1), so their argument
models are strict. Models that lack native tool calling are shown :func:`text_tool_instructions` and answer
in the ``<tool_call><function=...>`` text form, parsed by :func:`workbench.llm.parsing.parse_text_tool_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from workbench.llm.protocol import ToolCall, ToolSpec

__all__ = ["text_tool_instructions", "format_text_tool_call", "tool_calls_schema", "tool_calls_from_json",
           "json_tool_instructions",
           "MAX_TOOL_CALLS"]

#: Calls one JSON-shaped reply may make (ours: the offline memory agent makes at most 3 per step; a reply of more is
#: a model repeating itself, and each call costs decoding time)
MAX_TOOL_CALLS = 4


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


def tool_calls_schema(tools: Sequence[ToolSpec]) -> dict:
    """The JSON schema of a reply that is a list of calls of ``tools``: ``{"tool_calls": [{"name": ..., "arguments":
    {...}}, ...]}``, each call's ``name`` a constant and its ``arguments`` that tool's schema (an empty list: no call).

    A server that constrains decoding to a JSON schema (llama.cpp, vLLM) or the in-process grammar decoder can then
    only produce well-formed calls of known tools, whether or not the model's chat template knows tools.
    """
    calls = []
    for t in tools:
        args = t.parameters_schema()
        calls.append({"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                      "properties": {"name": {"const": t.name}, "arguments": args}})
    return {"type": "object", "additionalProperties": False, "required": ["tool_calls"],
            "properties": {"tool_calls": {"type": "array", "maxItems": MAX_TOOL_CALLS,
                                          "items": {"anyOf": calls} if len(calls) != 1 else calls[0]}}}


def tool_calls_from_json(text: str) -> list[ToolCall] | None:
    """The calls of a reply in the :func:`tool_calls_schema` shape, or None when ``text`` is not that shape (the
    caller's parser then reports what is wrong, and the repair turn shows it)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("tool_calls"), list):
        return None
    out = []
    for i, c in enumerate(data["tool_calls"]):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("arguments"), dict):
            return None
        out.append(ToolCall(name=c["name"], arguments=c["arguments"], id=f"call_{i}"))
    return out


def json_tool_instructions(tools: Sequence[ToolSpec]) -> tuple[str, dict]:
    """System-prompt addendum asking for the calls of ``tools`` as one JSON object, and that object's schema
    (:func:`tool_calls_schema`; sent as the ``response_format``, or decoded under, when the backend constrains)."""
    shape = tool_calls_schema(tools)
    text = ("You can call these tools:\n" + "\n".join(f"- {t.name}: {t.description}" for t in tools)
            + '\nReply with only one JSON object {"tool_calls": [{"name": TOOL, "arguments": {...}}]} matching this '
            "JSON schema (an empty list makes no call):\n" + json.dumps(shape, sort_keys=True))
    return text, shape
