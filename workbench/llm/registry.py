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
from workbench.registry import Registry

__all__ = ["BACKENDS", "register_backend", "get_backend", "list_backends"]

#: LLM backends by name: ``factory(**kwargs) -> Backend``.
BACKENDS: Registry[Callable[..., Backend]] = Registry("backend", error=LLMConfigError)


def register_backend(name: str, factory: Callable[..., Backend], *, replace: bool = False, doc: str = "") -> None:
    """Register ``factory(**kwargs) -> Backend`` under ``name``."""
    BACKENDS.register(name, factory, replace=replace, doc=doc)


def list_backends() -> list[str]:
    return sorted(BACKENDS.names())


def get_backend(name: str, *, cache_dir: str | os.PathLike | None = None, **kwargs: Any) -> Backend:
    """Build the backend registered as ``name``.

    Args:
        name: ``openai``, ``llama-server``, ``local``, ``offline-alfworld``, ``scripted`` or any registered name.
        cache_dir: when given, wrap the backend in a :class:`~workbench.llm.cache.CachedBackend` there.
        **kwargs: passed to the factory (e.g. ``base_url``, ``model``, ``api_key_env`` for ``openai``).

    Raises:
        LLMConfigError: unknown name (the message lists the registered ones) or bad arguments.
    """
    factory = BACKENDS.get(name)  # LLMConfigError naming every backend when unknown
    try:
        backend = factory(**kwargs)
    except TypeError as e:
        raise LLMConfigError(f"backend '{name}': {e}") from None
    return CachedBackend(backend, cache_dir) if cache_dir is not None else backend


def _openai(**kwargs: Any) -> Backend:
    # lazy: a backend's client (HTTP, an in-process model) loads only when that backend is asked for
    from workbench.llm.openai_client import OpenAIBackend, OpenAIConfig

    return OpenAIBackend(OpenAIConfig(**kwargs))


def _local(lm: Any = None, model: str | None = None, **kwargs: Any) -> Backend:
    # lazy: a backend's client (HTTP, an in-process model) loads only when that backend is asked for
    from workbench.llm.local import LocalBackend

    constrain = kwargs.pop("constrain", True)
    if isinstance(constrain, str):  # from a KEY=VALUE backend argument
        from workbench.llm.server import _flag

        constrain = _flag(constrain)
    if lm is not None or "hf_model" in kwargs:
        return LocalBackend(lm, model_name=model, constrain=constrain, **kwargs)
    if model is None:
        raise LLMConfigError("backend 'local' needs lm=<loaded model> or model=<name for load_model>")
    backend = LocalBackend.from_name(model, **kwargs)
    backend.constrain = bool(constrain)
    return backend



def _llama_server(**kwargs: Any) -> Backend:
    # lazy: a backend's client (HTTP, an in-process model) loads only when that backend is asked for
    from workbench.llm.server import served_backend

    return served_backend(**kwargs)


def _offline_alfworld(**kwargs: Any) -> Backend:
    # lazy: a backend's client (HTTP, an in-process model) loads only when that backend is asked for
    from workbench.llm.offline import OfflineALFWorldBackend

    return OfflineALFWorldBackend(**kwargs)


def _offline_scienceworld(**kwargs: Any) -> Backend:
    # lazy: a backend's client (HTTP, an in-process model) loads only when that backend is asked for
    from workbench.llm.offline import OfflineScienceWorldBackend

    return OfflineScienceWorldBackend(**kwargs)


def _scripted(**kwargs: Any) -> Backend:
    # lazy: a backend's client (HTTP, an in-process model) loads only when that backend is asked for
    from workbench.llm.scripted import ScriptedBackend

    return ScriptedBackend(**kwargs)


# The default backend of every method's LLM stages: the deterministic offline ALFWorld algorithms, named so in tables.
OFFLINE_BACKEND = "offline-alfworld"

register_backend("openai", _openai, doc="any OpenAI-compatible endpoint (llama.cpp's server, vLLM, ...)")
register_backend("local", _local, doc="an in-process white-box model")
register_backend("llama-server", _llama_server,
                 doc="a llama.cpp server on the packaged SmolLM2 (or model=<.gguf>), started and stopped by this process")
register_backend("offline-alfworld", _offline_alfworld, doc="deterministic offline ALFWorld algorithms (no model)")
register_backend("offline-scienceworld", _offline_scienceworld,
                 doc="deterministic offline algorithms of AGMR's refinement on ScienceWorld (no model)")
register_backend("scripted", _scripted, doc="scripted replies, for tests")
