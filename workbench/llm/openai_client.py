"""Client for any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, llama.cpp, hosted APIs).

Plain ``urllib``: no extra dependency, and the few features we need (timeouts, retries with backoff on
429/5xx, native or text-form tools, ``response_format``) are a page of code. The API key is read from an
environment variable at request time and never stored on the object, so it cannot leak into a repr, a
pickle, a cache key, a notebook or a log.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any, Literal

from pydantic import BaseModel

from workbench.llm.errors import LLMConfigError, LLMContextError, LLMTimeoutError, LLMTransportError
from workbench.llm.protocol import ChatResult, Message, ToolCall, ToolSpec
from workbench.llm.tools import json_tool_instructions, text_tool_instructions

__all__ = ["OpenAIConfig", "OpenAIBackend", "RETRY_STATUSES"]

RETRY_STATUSES = frozenset({408, 409, 425, 429})  # plus every 5xx
_BODY_PREVIEW = 300


@dataclass(frozen=True)
class OpenAIConfig:
    """Where and how to reach the endpoint.

    Attributes:
        base_url: up to and including ``/v1``, e.g. ``http://127.0.0.1:8080/v1``.
        model: model name the server expects.
        api_key_env: name of the environment variable holding the key; unset or empty means no key
            (local servers). The key itself is never a config value.
        timeout_s: per-request socket timeout; a stalled request raises after this long.
        max_retries: extra attempts after a 429/5xx/connection error/timeout.
        backoff_s: first backoff delay; doubles each retry, capped at ``backoff_max_s``.
        tool_mode: ``native`` sends ``tools``; ``text`` describes tools in the system prompt; ``json`` describes them
            there too and sends the schema of a list of their calls as the ``response_format``
            (:func:`~workbench.llm.tools.tool_calls_schema`), so a server that constrains decoding can only return
            well-formed calls of known tools (for models whose chat template has no tools); ``auto`` tries native and
            falls back to text for good if the server rejects ``tools``.
        response_format: how a schema is passed: OpenAI ``json_schema`` (vLLM, hosted APIs),
            llama.cpp-style ``json_object`` with a schema, ``none`` (prompt only), or ``auto``: try
            ``json_schema`` and switch to ``json_object`` for good if the server rejects it. The reply is
            validated either way.
        extra_body: extra request fields (e.g. ``{"top_k": 1}``), merged last.
    """

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "default"
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    tool_mode: Literal["native", "text", "json", "auto"] = "auto"
    response_format: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise LLMConfigError(f"OpenAIConfig.base_url must start with http:// or https://, got {self.base_url!r}")
        if self.timeout_s <= 0 or self.max_retries < 0:
            raise LLMConfigError("OpenAIConfig: timeout_s must be > 0 and max_retries >= 0")


class OpenAIBackend:
    """:class:`~workbench.llm.protocol.Backend` over an OpenAI-compatible server.

    ``stats`` counts HTTP requests, retries and failures, so a test or a run's metadata can show that a
    cached rerun sent zero requests.
    """

    name = "openai"

    def __init__(self, config: OpenAIConfig | None = None, *, sleep: Callable[[float], None] = time.sleep,
                 **overrides: Any) -> None:
        base = config or OpenAIConfig()
        self.config = OpenAIConfig(**{**base.__dict__, **overrides}) if overrides else base
        self.model = self.config.model
        self._sleep = sleep
        self._lock = threading.Lock()
        self._text_tools = self.config.tool_mode in ("text", "json")
        self._format = "json_schema" if self.config.response_format == "auto" else self.config.response_format
        self.stats: dict[str, int] = {"requests": 0, "retries": 0, "failures": 0}

    @property
    def tool_reply(self) -> str:
        """The shape a tool stage's reply is asked for: ``json`` (one object of calls), ``text`` or ``native``."""
        return "json" if self.config.tool_mode == "json" else ("text" if self._text_tools else "native")

    @property
    def mode(self) -> str:
        """How replies are shaped now: the ``response_format`` sent with a schema (``json_schema``,
        ``json_object`` or ``none``), and ``+tools:<mode>`` for tool stages."""
        tools = "json" if self.config.tool_mode == "json" else ("text" if self._text_tools else "native")
        return f"{self._format}+tools:{tools}"

    def __repr__(self) -> str:
        return f"OpenAIBackend(base_url={self.config.base_url!r}, model={self.model!r})"

    def cache_identity(self) -> dict[str, Any]:
        """Settings that change replies (for the cache key); no URL, never the key."""
        c = self.config
        return {"tool_mode": c.tool_mode, "response_format": c.response_format,
                "extra_body": dict(c.extra_body or {})}

    # -- request building ------------------------------------------------------------------------------
    def _body(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None,
              schema: type[BaseModel] | None, temperature: float, max_tokens: int, seed: int | None) -> dict:
        wire = [m.to_openai() for m in messages]
        body: dict[str, Any] = {"model": self.model, "temperature": temperature, "max_tokens": max_tokens}
        if seed is not None:
            body["seed"] = seed
        shape = None
        if tools and self.config.tool_mode == "json":
            addendum, shape = json_tool_instructions(tools)
            shape = shape if self._format != "none" else None  # described only: the unconstrained comparison
            if wire and wire[0]["role"] == "system":
                wire[0] = {**wire[0], "content": f"{wire[0]['content']}\n\n{addendum}"}
            else:
                wire.insert(0, {"role": "system", "content": addendum})
        elif tools and self._text_tools:
            addendum = text_tool_instructions(tools)
            if wire and wire[0]["role"] == "system":
                wire[0] = {**wire[0], "content": f"{wire[0]['content']}\n\n{addendum}"}
            else:
                wire.insert(0, {"role": "system", "content": addendum})
        elif tools:
            body["tools"] = [t.to_openai() for t in tools]
        if shape is None and schema is not None and not tools and self._format != "none":
            shape = schema.model_json_schema()
        if shape is not None:
            js, name = shape, (schema.__name__ if schema is not None and not tools else "tool_calls")
            if self._format == "json_schema":
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": js}}
            else:
                body["response_format"] = {"type": "json_object", "schema": js}
        body["messages"] = wire
        body.update(self.config.extra_body or {})
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env or "", "") if self.config.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    # -- transport -------------------------------------------------------------------------------------
    def _post(self, body: dict) -> dict:
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        data = json.dumps(body).encode()
        attempts, last_status, last_msg, timed_out = 0, None, "", False
        for attempt in range(self.config.max_retries + 1):
            attempts += 1
            delay = min(self.config.backoff_max_s, self.config.backoff_s * 2**attempt)
            with self._lock:
                self.stats["requests"] += 1
                self.stats["retries"] += attempt > 0
            req = urllib.request.Request(url, data=data, headers=self._headers(), method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.config.timeout_s) as resp:
                    raw = resp.read()
                try:
                    return json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise LLMTransportError(f"{url}: response is not JSON: {raw[:_BODY_PREVIEW]!r}",
                                            status=200, attempts=attempts) from None
            except urllib.error.HTTPError as e:
                last_status, timed_out = e.code, False
                detail = e.read()[:_BODY_PREVIEW].decode(errors="replace")
                last_msg = f"HTTP {e.code}: {detail}"
                if e.code == 400 and ("context" in detail.lower() or "exceed" in detail.lower()):
                    self._count_failure()
                    raise LLMContextError("request", f"the prompt does not fit the model's context ({detail})",
                                          ()) from None
                # llama-cpp-python answers a request-validation error with 500; retrying cannot help.
                rejected = e.code >= 500 and "validation error" in detail
                if rejected or (e.code not in RETRY_STATUSES and e.code < 500):
                    self._count_failure()
                    raise LLMTransportError(f"{url}: {last_msg}", status=e.code, attempts=attempts) from None
                retry_after = e.headers.get("Retry-After") if e.headers else None
                if retry_after and retry_after.strip().replace(".", "", 1).isdigit():
                    delay = min(self.config.backoff_max_s, max(delay, float(retry_after)))
            except (TimeoutError, urllib.error.URLError, HTTPException, ConnectionError, OSError) as e:
                reason = getattr(e, "reason", e)
                timed_out = isinstance(reason, TimeoutError) or isinstance(e, TimeoutError)
                last_status, last_msg = None, f"{type(reason).__name__}: {reason}"
            if attempt < self.config.max_retries:
                self._sleep(delay)
        self._count_failure()
        err = LLMTimeoutError if timed_out else LLMTransportError
        what = f"timed out after {self.config.timeout_s}s" if timed_out else last_msg
        raise err(f"{url}: {what} ({attempts} attempt(s))", status=last_status, attempts=attempts)

    def _count_failure(self) -> None:
        with self._lock:
            self.stats["failures"] += 1

    # -- Backend ---------------------------------------------------------------------------------------
    def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        schema: type[BaseModel] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
        context: Mapping[str, Any] | None = None,  # noqa: ARG002 -- a real model reads the prompt only
    ) -> ChatResult:
        """Send one chat completion request (see :class:`~workbench.llm.protocol.Backend`)."""
        for _ in range(3):  # at most one downgrade per feature, then the error stands
            body = self._body(messages, tools, schema, temperature, max_tokens, seed)
            try:
                return self._result(self._post(body))
            except LLMTransportError as e:
                # ``auto`` modes: a server that rejects a request feature (400/422, or a 500 naming it)
                # gets the fallback for the rest of this backend's life.
                msg, client_error = str(e), e.status in (400, 422)
                if "tools" in body and self.config.tool_mode == "auto" and (client_error or "tool" in msg):
                    self._text_tools = True
                elif "response_format" in body and self.config.response_format == "auto" \
                        and self._format == "json_schema" and (client_error or "response_format" in msg):
                    self._format = "json_object"
                else:
                    raise
        raise LLMTransportError("request features kept being rejected")  # unreachable in practice

    def _result(self, payload: dict) -> ChatResult:
        try:
            choice = payload["choices"][0]
            msg = choice.get("message") or {}
        except (KeyError, IndexError, TypeError):
            raise LLMTransportError(f"response has no choices: {str(payload)[:_BODY_PREVIEW]}") from None
        text = msg.get("content") or ""
        calls: list[ToolCall] = []
        for i, tc in enumerate(msg.get("tool_calls") or []):
            fn = (tc or {}).get("function") or {}
            args = fn.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except json.JSONDecodeError:
                    args = None
            if not isinstance(args, dict) or not isinstance(fn.get("name"), str):
                # Keep the broken call visible in text form so parsing reports it and the repair turn shows it.
                text += f'<tool_call>{{"name": {json.dumps(str(fn.get("name")))}, "arguments": ' \
                        f'{json.dumps(fn.get("arguments"))}}}</tool_call>'
                continue
            calls.append(ToolCall(name=fn["name"], arguments=args, id=tc.get("id") or f"call_{i}"))
        usage = {k: int(v) for k, v in (payload.get("usage") or {}).items() if isinstance(v, int)}
        return ChatResult(text=text, tool_calls=tuple(calls), finish_reason=choice.get("finish_reason"),
                          backend=self.name, model=str(payload.get("model") or self.model), usage=usage)

