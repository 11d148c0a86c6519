"""The backend option every method with LLM stages takes: a registered backend name and its ``KEY=VALUE``
arguments, validated here and turned into a :class:`~workbench.llm.protocol.Backend` by :func:`backend_of`."""

from __future__ import annotations

from pydantic import field_validator

from workbench.agents.policy import PolicyOptions
from workbench.llm.protocol import Backend
from workbench.llm.registry import OFFLINE_BACKEND, get_backend, list_backends

__all__ = ["BackendOptions", "backend_of"]


class BackendOptions(PolicyOptions):
    """``backend``: the LLM backend of the method's stages (the deterministic offline algorithms by default, named
    so in every table); ``backend_args``: its ``KEY=VALUE`` arguments (``base_url=...``, ``model=...``)."""

    backend: str = OFFLINE_BACKEND
    backend_args: tuple[str, ...] = ()

    @field_validator("backend")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in list_backends():
            raise ValueError(f"backend '{v}': expected one of {', '.join(list_backends())}")
        return v

    @field_validator("backend_args")
    @classmethod
    def _pairs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for kv in v:
            if "=" not in kv:
                raise ValueError(f"backend argument '{kv}': expected KEY=VALUE")
        return tuple(v)


def backend_of(backend: str, backend_args: tuple[str, ...] = ()) -> Backend:
    """The backend object of validated :class:`BackendOptions` fields."""
    return get_backend(backend, **dict(kv.split("=", 1) for kv in backend_args))
