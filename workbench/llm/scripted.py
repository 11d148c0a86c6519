"""``scripted``: a test double that replays given replies in order (inspect_ai's mock-LLM idea).

Not an offline algorithm: it knows nothing about the task. Tests use it to feed exact (often malformed)
replies through the parsing, repair and cache paths and to inspect what was sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from workbench.llm.errors import LLMConfigError
from workbench.llm.protocol import ChatResult, Message, ToolSpec, as_messages

__all__ = ["ScriptedBackend"]


class ScriptedBackend:
    """Replies with ``replies[0]``, ``replies[1]``, ...; raises when the script runs out.

    Attributes:
        calls: every request received, as ``(messages, params)``, for assertions.
    """

    name = "scripted"

    def __init__(self, replies: Sequence[str | ChatResult], model: str = "script") -> None:
        self.replies = list(replies)
        self.model = model
        self.calls: list[tuple[list[Message], dict[str, Any]]] = []

    def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        schema: type[BaseModel] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        n = len(self.calls)
        self.calls.append((as_messages(messages), dict(tools=tools, schema=schema, temperature=temperature,
                                                       max_tokens=max_tokens, seed=seed, context=context)))
        if n >= len(self.replies):
            raise LLMConfigError(f"scripted backend: call {n + 1} but only {len(self.replies)} replies scripted")
        r = self.replies[n]
        return r if isinstance(r, ChatResult) else ChatResult(text=r, finish_reason="stop", backend=self.name,
                                                             model=self.model)
