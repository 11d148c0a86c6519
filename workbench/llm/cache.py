"""On-disk response cache: a rerun of the same stage calls makes zero backend calls and gets identical replies.

One JSON file per response, named by the SHA-256 of the request material: backend name, model, messages,
tools, schema, sampling parameters, the backend's own output-affecting settings (``cache_identity``), and
the structured context only for backends that read it (``uses_context``). Never the API key, and
deliberately not the base URL either: the same model served on another port or host must hit the same
entries. Files are written atomically, so a killed run leaves either the old entry or the new one, never
half of one; an unreadable entry is treated as a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from workbench.llm.protocol import Backend, ChatResult, Message, ToolSpec, as_messages
from workbench.memory.trajectory import atomic_write_text

__all__ = ["ResponseCache", "CachedBackend", "request_material", "CACHE_FORMAT"]

CACHE_FORMAT = 1  # bump when the material layout changes, so old entries stop matching


def request_material(
    backend: Backend,
    messages: Sequence[Message],
    *,
    tools: Sequence[ToolSpec] | None,
    schema: type[BaseModel] | None,
    temperature: float,
    max_tokens: int,
    seed: int | None,
    context: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Everything that determines a reply, as a JSON-able dict (the cache key is its hash)."""
    identity = getattr(backend, "cache_identity", None)
    return {
        "format": CACHE_FORMAT,
        "backend": backend.name,
        "model": backend.model,
        "backend_settings": identity() if callable(identity) else {},
        "messages": [m.model_dump(mode="json") for m in messages],
        "tools": [t.to_openai() for t in tools] if tools else None,
        "schema": schema.model_json_schema() if schema is not None else None,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "seed": seed,
        # Only a backend that computes from the payload gets it in the key: for a model the rendered
        # messages are the whole input, and run metadata inside a payload must not defeat the cache.
        "context": context if getattr(backend, "uses_context", False) else None,
    }


class ResponseCache:
    """A folder of cached ChatResults with hit/miss counters.

    Args:
        root: cache folder (created on first write).
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()
        self._counts = {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0}

    @staticmethod
    def key(material: Mapping[str, Any]) -> str:
        canonical = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def get(self, key: str) -> ChatResult | None:
        """The cached result for ``key``, or None (a miss). Counts the hit or miss."""
        p = self.path(key)
        try:
            result = ChatResult.model_validate(json.loads(p.read_text(encoding="utf-8"))["result"])
        except FileNotFoundError:
            self._count("misses")
            return None
        except (json.JSONDecodeError, KeyError, TypeError, ValidationError, UnicodeDecodeError):
            self._count("corrupt")  # torn or hand-edited entry: recompute and overwrite
            self._count("misses")
            return None
        self._count("hits")
        return result

    def put(self, key: str, material: Mapping[str, Any], result: ChatResult) -> None:
        """Store ``result``; the material is kept beside it so an entry can be audited by eye."""
        stored = result.model_copy(update={"cached": False}).model_dump(mode="json")
        record = {"key": key, "request": material, "result": stored}
        atomic_write_text(self.path(key), json.dumps(record, ensure_ascii=False, indent=1, default=str))
        self._count("writes")

    def stats(self) -> dict[str, int]:
        """Counters since this object was created: hits, misses, writes, corrupt (entries ignored)."""
        with self._lock:
            return dict(self._counts)

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/*.json")) if self.root.exists() else 0


class CachedBackend:
    """Wrap any backend with a :class:`ResponseCache`; itself a Backend with the same name and model.

    Cache hits come back with ``cached=True``; everything else in the result is what was stored.
    """

    def __init__(self, backend: Backend, cache: ResponseCache | str | os.PathLike) -> None:
        self.inner = backend
        self.cache = cache if isinstance(cache, ResponseCache) else ResponseCache(cache)
        self.name = backend.name
        self.model = backend.model
        self.uses_context = bool(getattr(backend, "uses_context", False))

    @property
    def mode(self) -> str:
        """The wrapped backend's reply shaping (see :mod:`workbench.llm.ledger`)."""
        inner = getattr(self.inner, "mode", None)
        return str(inner) if inner is not None else ("algorithm" if self.uses_context else "prompt")

    @property
    def tool_reply(self) -> str | None:
        return getattr(self.inner, "tool_reply", None)

    def close(self) -> None:
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            closer()

    def cache_identity(self) -> dict[str, Any]:
        identity = getattr(self.inner, "cache_identity", None)
        return identity() if callable(identity) else {}

    def stats(self) -> dict[str, int]:
        """The cache counters, ready to be recorded in a run's metadata."""
        return self.cache.stats()

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
        """Serve from the cache, or call the wrapped backend and store its reply."""
        msgs = as_messages(messages)
        params = dict(tools=tools, schema=schema, temperature=temperature, max_tokens=max_tokens, seed=seed,
                      context=context)
        material = request_material(self.inner, msgs, **params)
        key = self.cache.key(material)
        hit = self.cache.get(key)
        if hit is not None:
            return hit.model_copy(update={"cached": True})
        result = self.inner.chat(msgs, **params)
        self.cache.put(key, material, result)
        return result
