"""Backends by name: ``get_backend("openai", base_url=..., model=...)``, ``get_backend("offline-alfworld")``.

A registry instead of importing classes keeps run configs plain data (a backend name and its keyword
arguments) and never evaluates names. ``cache_dir=`` wraps any backend in the on-disk response cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from workbench.llm.cache import CachedBackend
from workbench.llm.errors import LLMConfigError
from workbench.llm.protocol import Backend

__all__ = ["register_backend", "get_backend", "list_backends"]

_FACTORIES: dict[str, Callable[..., Backend]] = {}


def register_backend(name: str, factory: Callable[..., Backend], *, replace: bool = False) -> None:
    """Register ``factory(**kwargs) -> Backend`` under ``name``."""
    if name in _FACTORIES and not replace:
        raise LLMConfigError(f"backend '{name}' is already registered (pass replace=True to override)")
    _FACTORIES[name] = factory


def list_backends() -> list[str]:
    return sorted(_FACTORIES)


def get_backend(name: str, *, cache_dir: str | os.PathLike | None = None, **kwargs: Any) -> Backend:
    """Build the backend registered as ``name``.

    Args:
        name: ``openai``, ``local``, ``offline-alfworld``, ``scripted`` or any registered name.
        cache_dir: when given, wrap the backend in a :class:`~workbench.llm.cache.CachedBackend` there.
        **kwargs: passed to the factory (e.g. ``base_url``, ``model``, ``api_key_env`` for ``openai``).

    Raises:
        LLMConfigError: unknown name (the message lists the registered ones) or bad arguments.
    """
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise LLMConfigError(f"unknown backend '{name}'; registered: {list_backends()}") from None
    try:
        backend = factory(**kwargs)
    except TypeError as e:
        raise LLMConfigError(f"backend '{name}': {e}") from None
    return CachedBackend(backend, cache_dir) if cache_dir is not None else backend


def _openai(**kwargs: Any) -> Backend:
    from workbench.llm.openai_client import OpenAIBackend, OpenAIConfig

    return OpenAIBackend(OpenAIConfig(**kwargs))


def _local(lm: Any = None, model: str | None = None, **kwargs: Any) -> Backend:
    from workbench.llm.local import LocalBackend

    if lm is not None or "hf_model" in kwargs:
        return LocalBackend(lm, model_name=model, **kwargs)
    if model is None:
        raise LLMConfigError("backend 'local' needs lm=<loaded model> or model=<name for load_model>")
    return LocalBackend.from_name(model, **kwargs)


def _offline_alfworld(**kwargs: Any) -> Backend:
    from workbench.llm.offline import OfflineALFWorldBackend

    return OfflineALFWorldBackend(**kwargs)


def _scripted(**kwargs: Any) -> Backend:
    from workbench.llm.scripted import ScriptedBackend

    return ScriptedBackend(**kwargs)


# The default backend of every method's LLM stages: the deterministic offline ALFWorld algorithms, named so in tables.
OFFLINE_BACKEND = "offline-alfworld"

register_backend("openai", _openai)
register_backend("local", _local)
register_backend("offline-alfworld", _offline_alfworld)
register_backend("scripted", _scripted)
