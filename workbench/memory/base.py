"""MemoryBase: a versioned on-disk store of MemoryEntry records, with atomic commits, history and rollback.

A store is a folder::

    entries.jsonl   the current version of every entry, in insertion order (rewritten atomically)
    history.jsonl   every version ever stored: {entry_id, version, entry, reason, timestamp} (append-only)

A commit appends the new version to the history first, then atomically replaces entries.jsonl (temp file +
fsync + rename). A crash at any point leaves the previous state readable: a torn history line is skipped, and a
history record newer than its entry's version in entries.jsonl (the commit never finished) is ignored on load
and dropped at the next write. Versions of one entry only grow: a rollback stores the old content as a new
version, so the history reads as a log of what the store held, in order.

One process writes a store at a time; readers in other processes see whole files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from workbench.memory.trajectory import (
    MemoryEntry,
    Trajectory,
    TrajectoryFormatError,
    _describe,
    atomic_write_text,
    read_jsonl,
    read_text_utf8,
)

__all__ = ["MemoryBase", "HistoryRecord", "StaleEntryError", "ENTRIES_FILE", "HISTORY_FILE", "entry_diff"]

ENTRIES_FILE = "entries.jsonl"
HISTORY_FILE = "history.jsonl"


class StaleEntryError(ValueError):
    """A commit was based on an older version than the store holds (someone committed in between)."""


class HistoryRecord(BaseModel):
    """One stored version of one entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entry_id: str
    version: int
    entry: MemoryEntry
    reason: str = ""
    timestamp: str = ""
    provenance: dict = Field(default_factory=dict)  # who made this version and on what evidence (AGMR: task,
    # branch, pattern, C column, diff, verification runs); empty for plain adds

    @field_validator("entry")
    @classmethod
    def _consistent(cls, entry: MemoryEntry, info: ValidationInfo) -> MemoryEntry:
        said = (info.data.get("entry_id"), info.data.get("version"))
        if (entry.entry_id, entry.version) != said:
            raise ValueError(
                f"holds ({entry.entry_id!r}, version {entry.version}) but the record says ({said[0]!r}, version "
                f"{said[1]}); they must match"
            )
        return entry


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class MemoryBase:
    """A versioned store of memory entries in the folder ``root`` (created if missing).

    Args:
        root: the store folder.

    Raises:
        TrajectoryFormatError: a store file is malformed; the message names the file, record and field.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.entries_path = self.root / ENTRIES_FILE
        self.history_path = self.root / HISTORY_FILE
        self.revision = 0  # bumped by every write; retrievers rebuild their index when it changes
        self._entries: dict[str, MemoryEntry] = {}
        self._history: list[HistoryRecord] = []
        self._history_clean = True  # the history file holds exactly self._history, newline-terminated
        self._load()

    # -- reading --------------------------------------------------------------------------------------------

    def _load(self) -> None:
        if self.entries_path.exists():
            for i, e in enumerate(read_jsonl(self.entries_path, MemoryEntry), start=1):
                if e.entry_id in self._entries:
                    raise TrajectoryFormatError(
                        f"{self.entries_path}: record {i}: field 'entry_id': duplicate id {e.entry_id!r}; keep one "
                        "record per entry (older versions belong in history.jsonl)"
                    )
                self._entries[e.entry_id] = e
        if not self.history_path.exists():
            return
        text = read_text_utf8(self.history_path)
        lines = text.split("\n")
        self._history_clean = text == "" or text.endswith("\n")
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                if i == len(lines):  # unterminated last line: a write killed mid-append
                    continue
                raise TrajectoryFormatError(f"{self.history_path}: record {i}: not valid JSON ({e.msg})") from e
            try:
                rec = HistoryRecord.model_validate(obj)
            except ValidationError as e:
                raise TrajectoryFormatError(f"{self.history_path}: record {i}: {_describe(e)}") from e
            current = self._entries.get(rec.entry_id)
            if current is None or rec.version > current.version:
                self._history_clean = False  # left by a commit that never reached entries.jsonl
                continue
            self._history.append(rec)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._entries

    def __iter__(self) -> Iterator[MemoryEntry]:
        return iter(list(self._entries.values()))

    def __repr__(self) -> str:
        return f"MemoryBase({str(self.root)!r}, {len(self)} entries)"

    def entries(self, task_type: str | None = None) -> list[MemoryEntry]:
        """Current entries in insertion order, optionally only those of one task type."""
        return [e for e in self._entries.values() if task_type is None or e.task_type == task_type]

    def get(self, entry_id: str) -> MemoryEntry:
        """The current version of an entry.

        Raises:
            KeyError: no such entry (the message names the store).
        """
        try:
            return self._entries[entry_id]
        except KeyError:
            raise KeyError(f"{self.root}: no entry {entry_id!r} ({len(self)} entries; add() creates one)") from None

    def history(self, entry_id: str) -> list[HistoryRecord]:
        """Every stored version of an entry, oldest first (the last is the current one)."""
        self.get(entry_id)
        return [r for r in self._history if r.entry_id == entry_id]

    def original(self, entry_id: str) -> MemoryEntry:
        """The first stored version of an entry (what it was before any commit)."""
        records = self.history(entry_id)
        return records[0].entry if records else self.get(entry_id)

    def at_version(self, entry_id: str, version: int) -> MemoryEntry:
        """The entry as stored at ``version``.

        Raises:
            KeyError: no such entry or version; the message lists the versions there are.
        """
        current = self.get(entry_id)
        records = self.history(entry_id)
        for r in records:
            if r.version == version:
                return r.entry
        if current.version == version:
            return current
        known = sorted({r.version for r in records} | {current.version})
        raise KeyError(f"{self.root}: entry {entry_id!r} has no version {version} (versions: {known})")

    # -- writing --------------------------------------------------------------------------------------------

    def _write(self, entries: dict[str, MemoryEntry], records: list[HistoryRecord]) -> None:
        """Persist ``entries`` as the new current state and ``records`` as new history, crash-safely."""
        was_clean, self._history_clean = self._history_clean, False
        # History first: if the entries write never happens, these records are newer than their entries and
        # are ignored on load, so the store reads as it was.
        if was_clean:
            with self.history_path.open("a", encoding="utf-8") as fh:
                fh.write("".join(r.model_dump_json() + "\n" for r in records))
                fh.flush()
                os.fsync(fh.fileno())
        else:
            atomic_write_text(self.history_path, "".join(r.model_dump_json() + "\n" for r in self._history + records))
        atomic_write_text(self.entries_path, "".join(e.model_dump_json() + "\n" for e in entries.values()))
        self._entries = entries
        self._history.extend(records)
        self._history_clean = True
        self.revision += 1

    def _next_version(self, entry_id: str) -> int:
        return max([r.version for r in self.history(entry_id)] + [self.get(entry_id).version]) + 1

    def add_many(self, entries: Iterable[MemoryEntry], reason: str = "add") -> list[MemoryEntry]:
        """Add new entries (kept at their own ``version``, normally 0) in one write.

        Raises:
            ValueError: an entry id is already in the store or repeated in ``entries``.
        """
        new = dict(self._entries)
        added = []
        for e in entries:
            if e.entry_id in new:
                raise ValueError(f"{self.root}: entry {e.entry_id!r} already exists; use commit() to change it")
            new[e.entry_id] = e
            added.append(e)
        if added:
            ts = _now()
            self._write(new, [HistoryRecord(entry_id=e.entry_id, version=e.version, entry=e, reason=reason,
                                            timestamp=ts) for e in added])
        return added

    def add(self, entry: MemoryEntry, reason: str = "add") -> MemoryEntry:
        """Add one new entry (see :meth:`add_many`)."""
        return self.add_many([entry], reason)[0]

    def commit(self, entry: MemoryEntry, reason: str, provenance: dict | None = None) -> MemoryEntry:
        """Store a changed entry as its next version.

        Args:
            entry: the changed entry, a copy of the *current* version (same ``entry_id`` and ``version``).
            reason: why it changed (kept in the history).
            provenance: JSON-able evidence behind the change, kept with the version in the history.

        Returns:
            The stored entry, with its version bumped.

        Raises:
            KeyError: no entry with this id (use :meth:`add`).
            StaleEntryError: ``entry`` was derived from an older version than the current one.
        """
        current = self.get(entry.entry_id)
        if entry.version != current.version:
            raise StaleEntryError(
                f"{self.root}: entry {entry.entry_id!r}: the change is based on version {entry.version} but the store "
                f"holds version {current.version}; get() the current entry, re-apply the change and commit again"
            )
        stored = entry.model_copy(update={"version": self._next_version(entry.entry_id)})
        self._write({**self._entries, stored.entry_id: stored},
                    [HistoryRecord(entry_id=stored.entry_id, version=stored.version, entry=stored, reason=reason,
                                   timestamp=_now(), provenance=dict(provenance or {}))])
        return stored

    def rollback(self, entry_id: str, version: int, reason: str | None = None,
                 provenance: dict | None = None) -> MemoryEntry:
        """Make the content of ``version`` current again, stored as a new version (history stays a log).

        Returns:
            The current entry: unchanged if ``version`` is already current, else a new version whose content
            equals ``at_version(entry_id, version)``.
        """
        current = self.get(entry_id)
        target = self.at_version(entry_id, version)
        if version == current.version:
            return current
        stored = target.model_copy(update={"version": self._next_version(entry_id)})
        self._write({**self._entries, entry_id: stored},
                    [HistoryRecord(entry_id=entry_id, version=stored.version, entry=stored,
                                   reason=reason or f"rollback to version {version}", timestamp=_now(),
                                   provenance={"rollback_to": version, **(provenance or {})})])
        return stored

    def clone(self, dest: str | os.PathLike) -> "MemoryBase":
        """A copy of this store (current entries and the whole history) in the new folder ``dest``.

        Raises:
            FileExistsError: ``dest`` already holds a store (a copy never overwrites one).
        """
        dest = Path(dest)
        if (dest / ENTRIES_FILE).exists() or (dest / HISTORY_FILE).exists():
            raise FileExistsError(f"{dest}: already holds a memory base; clone into an empty folder")
        dest.mkdir(parents=True, exist_ok=True)
        # History first, then entries: a kill in between leaves history records newer than no entry, which
        # load ignores, so the copy reads as empty and is made again.
        atomic_write_text(dest / HISTORY_FILE, "".join(r.model_dump_json() + "\n" for r in self._history))
        atomic_write_text(dest / ENTRIES_FILE, "".join(e.model_dump_json() + "\n" for e in self._entries.values()))
        return MemoryBase(dest)

    def digest(self) -> str:
        """A content hash of the current entries (ids, versions and text): which base a run evaluated."""
        import hashlib

        h = hashlib.sha1()
        for e in self._entries.values():
            h.update(e.model_dump_json().encode())
        return h.hexdigest()[:12]

    def commits(self) -> list[HistoryRecord]:
        """Every version after an entry's first, oldest first (commits and rollbacks)."""
        first: set[str] = set()
        out = []
        for r in self._history:
            if r.entry_id in first:
                out.append(r)
            first.add(r.entry_id)
        return out

    def build_from_trajectories(
        self,
        trajs: Iterable[Trajectory],
        *,
        reason: str = "build from trajectories",
        duplicates: Literal["error", "skip", "suffix"] = "error",
    ) -> list[MemoryEntry]:
        """Add one entry per *successful* trajectory (entry id = task id), in one write.

        Args:
            trajs: trajectories; failed ones are skipped.
            reason: history reason.
            duplicates: what to do when a task id is already an entry id (in the store or earlier in
                ``trajs``): "error", "skip" the trajectory, or "suffix" the id as ``<task_id>#2``, ``#3``...

        Returns:
            The entries added.
        """
        taken = set(self._entries)
        new: list[MemoryEntry] = []
        for traj in trajs:
            if not traj.success:
                continue
            entry_id = traj.task_id
            if entry_id in taken:
                if duplicates == "skip":
                    continue
                if duplicates == "error":
                    raise ValueError(f"{self.root}: an entry for task {entry_id!r} already exists; pass "
                                     "duplicates='skip' or 'suffix', or build into a fresh folder")
                n = 2
                while f"{traj.task_id}#{n}" in taken:
                    n += 1
                entry_id = f"{traj.task_id}#{n}"
            taken.add(entry_id)
            new.append(MemoryEntry.from_trajectory(traj, entry_id=entry_id))
        return self.add_many(new, reason)


def entry_diff(old: MemoryEntry, new: MemoryEntry, *, context: int = 1, labels: tuple[str, str] | None = None) -> str:
    """A unified diff of two versions of an entry: one line per segment part (``action: ...``), a ``[segment]``
    line before each segment, so a deleted segment shows as its lines removed, not as every later one renamed."""
    import difflib

    def lines(e: MemoryEntry) -> list[str]:
        out = [f"goal: {e.goal}"]
        for seg in e.segments:
            out.append("[segment]")
            out += [f"{role}: {text}" for role, text in seg.parts()]
        return out

    a, b = labels or (f"{old.entry_id}@v{old.version}", f"{new.entry_id}@v{new.version}")
    return "\n".join(difflib.unified_diff(lines(old), lines(new), a, b, n=context, lineterm=""))
