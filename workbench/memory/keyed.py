"""Results kept on disk with the key they were computed for: one shape for every cache and resume check.

    key  = {"model": ..., "dtype": ..., "tasks": ...}        what a result depends on besides the code
    canonical(key)  JSON round trip (tuples -> lists, sort order fixed, non-JSON values as str)
    digest(key)     12 hex digits of its SHA-256: a file name that differs whenever any part of the key does
    key_diff(a, b)  {field: (old, new)}: what an error says changed, so a user knows which parameter to fix

Two layouts use it. A result with the key *inside* (``{"key": ..., ...}``: ``teacher_forced.json``, the
head-masking arms) reads back through :func:`read_keyed_json`; a result with the key *beside* it (``PATH`` and
``PATH.key``: the supervision set, head scores, segment masking) through :class:`KeyedResult`. Either way a
result is written atomically (a temporary file renamed over it) and the key beside it only after the result, so
a kill at any point leaves either the previous pair or a result whose key is missing or stale: both read as not
cached, and the work is done again. Nothing half-written is ever read as a result.

A run folder's identity (``config.json``'s ``run``) and the per-task analysis caches
(:class:`workbench.eval.task_cache.TaskCache`) use the same :func:`canonical`, :func:`digest` and
:func:`key_diff`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from workbench.memory.trajectory import atomic_write_text

__all__ = ["canonical", "digest", "key_diff", "KeyMismatch", "KeyedResult", "read_keyed_json", "write_keyed_json"]


def canonical(key: Any) -> Any:
    """``key`` as it reads back from JSON (tuples become lists; values JSON cannot hold become their ``str``)."""
    return json.loads(json.dumps(key, sort_keys=True, default=str))


def digest(key: Any, n: int = 12) -> str:
    """The first ``n`` hex digits of the SHA-256 of ``key``'s canonical JSON."""
    return hashlib.sha256(json.dumps(canonical(key), sort_keys=True).encode()).hexdigest()[:n]


def key_diff(old: Mapping[str, Any], new: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, tuple]:
    """``{field: (old value, new value)}`` for every field of ``new`` whose value differs in ``old`` (a field
    ``old`` lacks reads as None), except those in ``ignore``."""
    skip = set(ignore)
    return {k: (old.get(k), v) for k, v in new.items() if k not in skip and old.get(k) != v}


class KeyMismatch(ValueError):
    """A stored result was computed for another key; the message names the file, the fields and the fix."""

    def __init__(self, path: str | os.PathLike, diff: Mapping[str, tuple], fix: str) -> None:
        self.path, self.diff = Path(path), dict(diff)
        changed = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in self.diff.items())
        super().__init__(f"{self.path}: computed for other parameters ({changed}); {fix}")


def read_keyed_json(path: str | os.PathLike, key: Any) -> dict | None:
    """The JSON record at ``path`` when its ``"key"`` field is ``key`` (canonically); None when the file is missing,
    unreadable or was computed for another key."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and record.get("key") == canonical(key) else None


def write_keyed_json(path: str | os.PathLike, key: Any, record: Mapping[str, Any], indent: int = 1) -> None:
    """``{"key": key, **record}`` written atomically to ``path``."""
    atomic_write_text(path, json.dumps({"key": key, **record}, indent=indent))


class KeyedResult:
    """A result file ``path`` and its key ``path.key`` beside it.

    Args:
        path: the result file (any format; the caller writes it, or passes its text to :meth:`write_text`).
        key: what the result depends on (JSON-serialisable).
    """

    def __init__(self, path: str | os.PathLike, key: Any) -> None:
        self.path = Path(path)
        self.key = canonical(key)
        self.key_path = self.path.with_suffix(self.path.suffix + ".key")

    def stored_key(self) -> Any | None:
        try:
            return json.loads(self.key_path.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def fresh(self) -> bool:
        """The result exists and was computed for this key."""
        return self.path.exists() and self.stored_key() == self.key

    def diff(self) -> dict[str, tuple]:
        """What differs between the stored key and this one (every field, when none is stored)."""
        stored = self.stored_key()
        if not isinstance(stored, dict) or not isinstance(self.key, dict):
            return {} if stored == self.key else {"key": (stored, self.key)}
        return key_diff(stored, self.key) | {k: (v, None) for k, v in stored.items() if k not in self.key}

    def mark(self) -> None:
        """Record the key, after the result has been written in full."""
        atomic_write_text(self.key_path, json.dumps(self.key, indent=1))

    def write_text(self, text: str) -> None:
        """Write the result atomically, then its key."""
        atomic_write_text(self.path, text)
        self.mark()
