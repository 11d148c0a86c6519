"""One registry shape for every pluggable kind: models, memory policies and their variants, LLM backends and
stages, retrievers.

    Registry("memory policy", providers=("workbench.methods",))
        .register("arbiter", factory, options=ArbiterOptions)   # the providing package registers on import
        .get("arbiter")          # a miss imports the providers once, then asks again
        .create("arbiter", budget=750)   # options validated by the entry's pydantic model, then factory(**opts)

Why providers are module *names*: the layer that owns a registry sits below the layers that fill it (the agents
layer owns the memory-policy registry; ``workbench.methods`` registers MemArbiter into it). Naming the provider
as a string and importing it only on a miss keeps every import pointing down (the import-linter contract in
``pyproject.toml``) while ``get_policy("arbiter")`` still works in a process that never imported the methods.
This module imports nothing of the package, so registering never creates a cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["Registry", "Entry"]

T = TypeVar("T")
_MISSING = object()


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered thing, the pydantic model of the options it takes (None: it takes none it validates) and a
    one-line description for listings."""

    name: str
    value: T
    options: Any = None  # a pydantic BaseModel subclass
    doc: str = ""


class Registry(Generic[T]):
    """Entries by name, in registration order; a name is registered once unless ``replace=True``.

    Args:
        what: how errors and listings name an entry ("memory policy", "MemArbiter variant", ...).
        providers: modules imported (once, in order) when a name is missing, so that they register theirs.
        error: the exception type of an unknown name or invalid options (a ``ValueError`` subclass).
    """

    def __init__(self, what: str, providers: Sequence[str] = (), error: type[Exception] = ValueError) -> None:
        self.what = what
        self.providers = tuple(providers)
        self.error = error
        self._entries: dict[str, Entry[T]] = {}
        self._loaded = not self.providers

    def register(self, name: str, value: T, *, options: Any = None, doc: str = "", replace: bool = False) -> T:
        """Register ``value`` under ``name``; returns ``value`` (so it can decorate a factory)."""
        if name in self._entries and not replace:
            raise self.error(f"{self.what} '{name}' is already registered (pass replace=True to override)")
        self._entries[name] = Entry(name, value, options, doc)
        return value

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for module in self.providers:
            importlib.import_module(module)

    def entry(self, name: str) -> Entry[T]:
        """The entry of ``name``; a miss loads the providers, then names every registered entry."""
        if name not in self._entries:
            self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise self.error(f"unknown {self.what} '{name}' (known: {', '.join(self.names())})") from None

    def get(self, name: str, default: Any = _MISSING) -> T:
        """The value of ``name``; ``default`` when given and there is none (else the error naming every entry)."""
        if default is not _MISSING and name not in self:
            return default
        return self.entry(name).value

    # Mapping access, so a test can swap one entry for the length of a test (``monkeypatch.setitem``).
    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __setitem__(self, name: str, value: T) -> None:
        old = self._entries.get(name)
        self.register(name, value, options=old.options if old else None, doc=old.doc if old else "", replace=True)

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def names(self) -> list[str]:
        """Every registered name (providers loaded first), in registration order."""
        self._load()
        return list(self._entries)

    def validate(self, name: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``options`` checked by the entry's options model: unknown fields, wrong types and out-of-range values
        are an error naming the entry and the field; defaults are filled in. An entry without a model takes no
        options."""
        entry = self.entry(name)
        options = dict(options or {})
        if entry.options is None:
            if options:
                raise self.error(f"{self.what} '{name}' takes no options (got: {', '.join(options)})")
            return {}
        try:
            return entry.options.model_validate(options).model_dump()
        except Exception as e:  # pydantic.ValidationError, without importing pydantic here
            errors = getattr(e, "errors", None)
            if callable(errors):
                parts = [f"{'.'.join(map(str, err['loc'])) or '(options)'}: {err['msg']}" for err in errors()]
                raise self.error(f"{self.what} '{name}' options: {'; '.join(parts)} "
                                 f"(it takes: {', '.join(entry.options.model_fields) or 'none'})") from None
            raise

    def create(self, name: str, /, **options: Any) -> Any:
        """``factory(**validated options)`` of entry ``name``."""
        return self.get(name)(**self.validate(name, options))
