"""Typed errors of the LLM layer.

Callers catch one family, :class:`LLMError`, and branch on the subclass: a transport failure is worth a
retry later, an output error means the model answered but never in the required shape (after the bounded
repair), a configuration error needs a human.
"""

from __future__ import annotations

__all__ = [
    "LLMError",
    "LLMConfigError",
    "LLMTransportError",
    "LLMTimeoutError",
    "LLMOutputError",
    "ToolCallError",
    "LLMContextError",
]

_RAW_PREVIEW = 400  # enough to see what went wrong, short enough for a log line


class LLMError(RuntimeError):
    """Base of every error raised by :mod:`workbench.llm`."""


class LLMConfigError(LLMError):
    """A backend or stage was configured wrongly (unknown name, missing package, bad template)."""


class LLMTransportError(LLMError):
    """The endpoint could not be reached or kept failing after all retries.

    Attributes:
        status: the last HTTP status code, or ``None`` for connection-level failures.
        attempts: how many requests were sent.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class LLMTimeoutError(LLMTransportError):
    """A request stalled past the configured timeout (on every attempt)."""


class LLMOutputError(LLMError):
    """The model answered, but not in the required shape, even after the repair retry.

    Attributes:
        stage: the stage or schema name the output was meant for.
        reason: the last parse/validation problem, in words.
        raw: the raw replies that were tried, in order.
    """

    def __init__(self, stage: str, reason: str, raw: list[str] | tuple[str, ...] = ()) -> None:
        self.stage = stage
        self.reason = reason
        self.raw = tuple(raw)
        last = self.raw[-1] if self.raw else ""
        preview = last if len(last) <= _RAW_PREVIEW else last[:_RAW_PREVIEW] + "..."
        super().__init__(
            f"{stage}: model output is not valid after {len(self.raw)} attempt(s): {reason}. "
            f"Last reply: {preview!r}"
        )


class ToolCallError(LLMOutputError):
    """A tool call named an unknown tool, or its arguments failed the tool's schema."""


class LLMContextError(LLMOutputError, LLMConfigError):
    """The prompt (plus the reply budget) does not fit the model's context window.

    An output error for the run -- this one call gets no usable reply, its method records it and goes on, since a
    shorter input may fit next time -- and a configuration error for a person (a larger ``n_ctx``, or a shorter
    prompt)."""
