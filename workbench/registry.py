"""A named registry: the one shape behind every "variants are entries, never flags" table (MemArbiter's and the
proactive agent's variants)."""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, in registration order; a name is registered once.

    Args:
        what: how errors name an entry ("MemArbiter variant", ...).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.what} '{name}' is already registered")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"unknown {self.what} '{name}' (known: {', '.join(self._entries)})") from None

    def names(self) -> list[str]:
        return list(self._entries)
