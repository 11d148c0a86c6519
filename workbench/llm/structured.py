"""Ask a backend for typed output: parse, validate, one bounded repair retry, then a typed error.

The repair retry shows the model its own reply and the validation problem in words and asks once more.
One retry is the budget: small models rarely fix a reply on the third try, and an unbounded loop would make
a run's cost unpredictable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from workbench.llm.errors import LLMOutputError, ToolCallError
from workbench.llm.parsing import (
    parse_json_as,
    parse_text_tool_calls,
    validate_tool_calls,
)
from workbench.llm.protocol import (
    Backend,
    ChatResult,
    Message,
    ToolCall,
    ToolSpec,
    as_messages,
)
from workbench.llm.tools import format_text_tool_call, tool_calls_from_json

__all__ = ["Parsed", "chat_json", "chat_tools", "MAX_REPAIRS"]

M = TypeVar("M")
S = TypeVar("S", bound=BaseModel)

MAX_REPAIRS = 1


@dataclass(frozen=True)
class Parsed(Generic[M]):
    """A validated value plus the raw results it came from.

    Attributes:
        value: the validated output (a pydantic model, or a list of validated tool calls).
        results: every ChatResult of this exchange, the failed one first when a repair happened.
        repaired: True when the first reply was invalid and the repair retry produced ``value``.
    """

    value: M
    results: tuple[ChatResult, ...]
    problems: tuple[str, ...] = ()  # why each reply before the last could not be used (the repair turn's reason)

    @property
    def repaired(self) -> bool:
        return len(self.results) > 1


def _envelope_calls(text: str, required: bool = False) -> list[ToolCall]:
    """Calls of a reply in the JSON shape constrained decoding writes (``{"tool_calls": [...]}``); a reply that starts
    that shape but does not finish it (cut by ``max_tokens``) is an error, never "no call". ``required`` (the backend
    asked for that shape): any other reply, prose included, is an error too."""
    body = (text or "").strip()
    if not body.startswith("{"):
        if required:
            raise ToolCallError("tool_calls", 'expected one JSON object {"tool_calls": [...]} (an empty list for no '
                                "call), got text", [text])
        return []
    calls = tool_calls_from_json(body)
    if calls is None:
        if required or '"tool_calls"' in body:
            raise ToolCallError("tool_calls", 'expected one complete JSON object {"tool_calls": [{"name": ..., '
                                '"arguments": {...}}]}; the reply is another object, or incomplete or malformed JSON',
                                [text])
        return []
    return calls


def _cut(res: ChatResult, reason: str) -> str:
    """The reason a reply failed, saying first when it ran out of ``max_tokens`` (then what the parser made of the
    rest -- often an inner object of the unfinished reply -- is a symptom, not the cause)."""
    if res.finish_reason == "length":
        n = res.usage.get("completion_tokens")
        return f"the reply was cut at max_tokens{f' ({n} tokens)' if n else ''} before it was complete; {reason}"
    return reason


def _reply_text(res: ChatResult) -> str:
    """The reply as the model should see it again in the repair turn (tool calls in text form)."""
    calls = "".join(format_text_tool_call(c.name, c.arguments) for c in res.tool_calls)
    return (res.text or "") + calls


def _repair_turn(messages: list[Message], res: ChatResult, reason: str, ask: str) -> list[Message]:
    return [
        *messages,
        Message(role="assistant", content=_reply_text(res)),
        Message(role="user", content=f"Your previous reply could not be used: {reason}.\n{ask}"),
    ]


def chat_json(
    backend: Backend,
    messages: Sequence[Message | Mapping[str, Any]],
    schema: type[S],
    *,
    stage: str | None = None,
    repair: bool = True,
    context: Mapping[str, Any] | None = None,
    **params: Any,
) -> Parsed[S]:
    """Chat and return one ``schema`` object extracted from the reply.

    Args:
        backend: any :class:`~workbench.llm.protocol.Backend`.
        messages: the conversation.
        schema: pydantic model the reply must validate against.
        stage: name used in errors (defaults to the schema name).
        repair: allow the one repair retry.
        context: structured payload for offline backends (see :mod:`.stages`).
        **params: ``temperature``, ``max_tokens``, ``seed`` forwarded to ``backend.chat``.

    Raises:
        LLMOutputError: both replies were unusable; ``raw`` holds them.
        LLMTransportError: the backend could not be reached.
    """
    stage = stage or schema.__name__
    msgs = as_messages(messages)
    results: list[ChatResult] = []
    problems: list[str] = []
    ask = (
        "Reply with only one JSON object that matches this JSON schema, no prose:\n"
        + json.dumps(schema.model_json_schema(), sort_keys=True)
    )
    for _attempt in range(1 + (MAX_REPAIRS if repair else 0)):
        res = backend.chat(msgs, schema=schema, context=context, **params)
        results.append(res)
        try:
            return Parsed(parse_json_as(res.text, schema, stage=stage), tuple(results), tuple(problems))
        except LLMOutputError as e:
            reason = _cut(res, e.reason)
            problems.append(reason)
        msgs = _repair_turn(msgs, res, reason, ask)
    raise LLMOutputError(stage, reason, [_reply_text(r) for r in results])


def chat_tools(
    backend: Backend,
    messages: Sequence[Message | Mapping[str, Any]],
    tools: Sequence[ToolSpec],
    *,
    stage: str = "tool_calls",
    repair: bool = True,
    context: Mapping[str, Any] | None = None,
    **params: Any,
) -> Parsed[list[ToolCall]]:
    """Chat and return the validated tool calls (native, or parsed from the text form).

    A reply with no tool call is a valid empty list: for the proactive agent that means "bank unchanged".

    Raises:
        ToolCallError: both replies had unknown tools, bad arguments or broken ``<tool_call>`` blocks.
        LLMTransportError: the backend could not be reached.
    """
    msgs = as_messages(messages)
    results: list[ChatResult] = []
    problems: list[str] = []
    json_tools = getattr(backend, "tool_reply", None) == "json"
    ask = (
        f"Call only these tools: {', '.join(t.name for t in tools)}, with arguments matching their schemas, "
        + ('as one JSON object {"tool_calls": [{"name": ..., "arguments": {...}}]}.' if json_tools else
           "using <tool_call><function=NAME><parameter=P>value</parameter></function></tool_call> blocks.")
    )
    for _attempt in range(1 + (MAX_REPAIRS if repair else 0)):
        res = backend.chat(msgs, tools=tools, context=context, **params)
        results.append(res)
        try:
            calls = list(res.tool_calls) or _envelope_calls(res.text, json_tools) or parse_text_tool_calls(res.text,
                                                                                                           tools)
            return Parsed(validate_tool_calls(calls, tools, stage=stage), tuple(results), tuple(problems))
        except LLMOutputError as e:
            reason = _cut(res, e.reason)
            problems.append(reason)
        msgs = _repair_turn(msgs, res, reason, ask)
    raise ToolCallError(stage, reason, [_reply_text(r) for r in results])
