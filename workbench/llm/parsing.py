"""Turn raw model text into typed objects: JSON extraction, schema validation, text-form tool calls.

Small and mid-size models wrap JSON in prose, in fences (sometimes nested), prepend ``<think>`` blocks, or
print tool calls as text instead of using the native API. These functions accept all of that and still
fail loudly: every failure is an :class:`~workbench.llm.errors.LLMOutputError` whose ``reason`` is short
enough to be sent back to the model in the repair retry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from workbench.llm.errors import LLMOutputError, ToolCallError
from workbench.llm.protocol import ToolCall, ToolSpec

__all__ = [
    "extract_json_candidates",
    "parse_json_as",
    "parse_text_tool_calls",
    "validate_tool_calls",
    "describe_validation_error",
]

M = TypeVar("M", bound=BaseModel)

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_TOOL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\s]+)\s*>(.*?)</function>", re.DOTALL)
_PARAM = re.compile(r"<parameter=([^>\s]+)\s*>(.*?)</parameter>", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_MAX_SCAN = 100_000  # a runaway reply is cut here
_MAX_DEAD_ENDS = 16  # unclosed openers tried before giving up on bare-span extraction


def strip_reasoning(text: str) -> str:
    """Drop ``<think>...</think>`` blocks (an unclosed one runs to the end and is dropped too)."""
    return _THINK.sub("", text or "")


def _balanced_spans(text: str) -> Iterator[str]:
    """Yield every top-level ``{...}``/``[...]`` span, respecting JSON strings and escapes."""
    i, n, dead_ends = 0, len(text), 0
    while i < n and dead_ends < _MAX_DEAD_ENDS:
        if text[i] not in "{[":
            i += 1
            continue
        depth, in_str, esc = 0, False, False
        for j in range(i, n):
            ch = text[j]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    yield text[i : j + 1]
                    i = j + 1
                    break
        else:
            # Unbalanced to the end: a stray brace in prose or a truncated object. Try the next opener,
            # a bounded number of times so a pathological reply cannot make this quadratic.
            dead_ends += 1
            i += 1


def extract_json_candidates(text: str) -> list[str]:
    """Candidate JSON texts in a reply, most likely first: fenced blocks, then bare balanced spans.

    Nested fences (a fence inside a fence) are unwrapped repeatedly so the innermost JSON is also tried.
    """
    text = strip_reasoning(text)[:_MAX_SCAN]
    out: list[str] = []
    queue = [text]
    seen: set[str] = set()
    for _ in range(8):  # bounded unwrapping of nested fences
        nxt: list[str] = []
        for chunk in queue:
            for m in _FENCE.finditer(chunk):
                body = m.group(2).strip()
                if body and body not in seen:
                    seen.add(body)
                    out.append(body)
                    nxt.append(body)
        if not nxt:
            break
        queue = nxt
    for chunk in [*out, text]:
        for span in _balanced_spans(chunk):
            if span not in seen:
                seen.add(span)
                out.append(span)
    return out


def _loads(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        # The one lenient fix worth making: trailing commas, which models emit constantly.
        return json.loads(_TRAILING_COMMA.sub(r"\1", candidate))


def describe_validation_error(err: ValidationError, limit: int = 3) -> str:
    """A short, model-readable description of the first few validation problems."""
    parts = []
    for e in err.errors()[:limit]:
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        parts.append(f"field '{loc}': {e['msg']}")
    more = err.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_json_as(text: str, schema: type[M], *, stage: str | None = None) -> M:
    """Find the first JSON object in ``text`` that validates against ``schema``.

    Raises:
        LLMOutputError: no JSON at all, or none of the candidates validates (reason names the field).
    """
    stage = stage or schema.__name__
    if not (text or "").strip():
        raise LLMOutputError(stage, "the reply is empty; expected one JSON object", [text or ""])
    reason = "no JSON object found in the reply"
    decoded_any = False
    for cand in extract_json_candidates(text):
        try:
            obj = _loads(cand)
        except (json.JSONDecodeError, RecursionError, ValueError):
            continue
        decoded_any = True
        try:
            return schema.model_validate(obj)
        except ValidationError as e:
            reason = describe_validation_error(e)
        except (RecursionError, ValueError, TypeError) as e:  # pathological nesting, odd numbers
            reason = f"invalid value ({type(e).__name__})"
    if not decoded_any and "{" in (text or ""):
        reason = "the JSON is malformed or truncated"
    raise LLMOutputError(stage, reason, [text])


def _coerce_param(value: str, prop_schema: dict[str, Any]) -> Any:
    """Text-form parameters are strings; decode JSON for parameters whose schema is not a string."""
    value = value.strip("\n")
    types = prop_schema.get("type")
    any_of = [s.get("type") for s in prop_schema.get("anyOf", []) if isinstance(s, dict)]
    if types == "string" or (any_of and set(any_of) <= {"string", "null"} and value.strip() != "null"):
        return value
    try:
        return json.loads(value)
    except (json.JSONDecodeError, RecursionError, ValueError):
        return value


def parse_text_tool_calls(text: str, tools: Sequence[ToolSpec] = ()) -> list[ToolCall]:
    """Parse tool calls a model printed as text.

    Two forms are accepted inside ``<tool_call>...</tool_call>``:
    ``<function=NAME><parameter=P>value</parameter></function>`` and a JSON object
    ``{"name": NAME, "arguments": {...}}`` (``parameters`` is accepted for ``arguments``).

    Raises:
        ToolCallError: a ``<tool_call>`` block is unclosed or its content matches neither form.
    """
    text = strip_reasoning(text)[:_MAX_SCAN]
    by_name = {t.name: t for t in tools}
    calls: list[ToolCall] = []
    for block in _TOOL_BLOCK.findall(text):
        body = block.strip()
        fn = _FUNCTION.search(body)
        if fn:
            name = fn.group(1).strip()
            props = by_name[name].parameters_schema().get("properties", {}) if name in by_name else {}
            args = {p: _coerce_param(v, props.get(p, {})) for p, v in _PARAM.findall(fn.group(2))}
            calls.append(ToolCall(name=name, arguments=args))
            continue
        try:
            obj = _loads(extract_json_candidates(body)[0]) if body else None
        except (IndexError, json.JSONDecodeError, RecursionError, ValueError):
            obj = None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise ToolCallError("tool_calls", "a <tool_call> block is neither <function=...> nor JSON "
                                "with a string 'name'", [text])
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):  # OpenAI-style arguments encoded as a JSON string
            try:
                args = json.loads(args)
            except (json.JSONDecodeError, RecursionError, ValueError):
                raise ToolCallError("tool_calls", f"arguments of '{obj['name']}' are not JSON", [text]) from None
        if not isinstance(args, dict):
            raise ToolCallError("tool_calls", f"arguments of '{obj['name']}' must be an object", [text])
        calls.append(ToolCall(name=obj["name"], arguments=args))
    if text.count("<tool_call>") > len(calls):
        raise ToolCallError("tool_calls", "a <tool_call> block is not closed (truncated reply?)", [text])
    return calls


def validate_tool_calls(calls: Sequence[ToolCall], tools: Sequence[ToolSpec], *, stage: str) -> list[ToolCall]:
    """Check each call names a known tool and its arguments pass that tool's schema.

    Returns:
        The calls with arguments normalised through the tool's pydantic model (defaults filled in).

    Raises:
        ToolCallError: unknown tool name or invalid arguments; the reason names the tool and field.
    """
    by_name = {t.name: t for t in tools}
    out = []
    for c in calls:
        spec = by_name.get(c.name)
        if spec is None:
            raise ToolCallError(stage, f"unknown tool '{c.name}'; allowed: {sorted(by_name)}", [])
        try:
            args = spec.args_model.model_validate(c.arguments)
        except ValidationError as e:
            raise ToolCallError(stage, f"tool '{c.name}': {describe_validation_error(e)}", []) from None
        out.append(ToolCall(name=c.name, arguments=args.model_dump(mode="json"), id=c.id))
    return out
