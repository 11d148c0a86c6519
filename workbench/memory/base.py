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
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
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

from workbench.files import (
    FormatError,
    Torn,
    atomic_write_text,
    describe,
    iter_jsonl,
    present,
    read_jsonl_models,
)
from workbench.memory.trajectory import MAX_VERSION, Id, MemoryEntry, Trajectory

log = logging.getLogger("workbench.memory")

__all__ = ["MemoryBase", "HistoryRecord", "StaleEntryError", "ENTRIES_FILE", "HISTORY_FILE", "entry_diff", "Problem",
           "MemoryBaseIntegrityError", "StoreState", "read_store", "repair_store"]

ENTRIES_FILE = "entries.jsonl"
HISTORY_FILE = "history.jsonl"
ABORTED_FILE = "history.aborted.jsonl"  # the records of writes a kill stopped before entries.jsonl (set aside)
HEADER_KEY = "memory_base"  # entries.jsonl's first line: {"memory_base": {"format": 2, "history_records": N}}


class StaleEntryError(ValueError):
    """A commit was based on an older version than the store holds (someone committed in between)."""


class HistoryRecord(BaseModel):
    """One stored version of one entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entry_id: Id
    version: int = Field(ge=0, le=MAX_VERSION)
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


@dataclass(frozen=True)
class Problem:
    """One integrity problem of a memory base.

    Attributes:
        file: ``entries.jsonl`` or ``history.jsonl``.
        line: its 1-based line (None: the file as a whole).
        entry_id: the entry concerned.
        problem: what is wrong.
        fix: how to repair it.
        repairable: ``workbench memory check --repair`` repairs it (by adding what is missing, nothing else).
    """

    file: str
    line: int | None
    entry_id: str
    problem: str
    fix: str
    repairable: bool = False

    def __str__(self) -> str:
        at = f"{self.file}" + (f" line {self.line}" if self.line else "")
        return f"{at}: entry {self.entry_id!r}: {self.problem} ({'--repair adds it' if self.repairable else self.fix})"


class MemoryBaseIntegrityError(FormatError):
    """A memory base's entries and history disagree; the message lists the problems and how to repair them."""

    def __init__(self, root: Path, problems: list[Problem]):
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3
                                                              else "")
        fix = (f"run `workbench memory check {root}` to list every problem" +
               (", and `--repair` to add what is missing (it only ever adds records)"
                if any(p.repairable for p in problems) else ""))
        super().__init__(root, f"{len(problems)} integrity problem{'s' * (len(problems) != 1)}: {shown}", fix=fix)


@dataclass
class StoreState:
    """What :func:`read_store` found in a memory base folder.

    Attributes:
        entries: the current entries, in file order.
        history: ``(line, record)`` of every history record but the pending ones.
        pending: ``(line, record)`` of a write that never reached ``entries.jsonl`` (a kill between the history
            append and the entries rename): ignored, and dropped at the next write.
        torn: the torn last line of ``history.jsonl`` (a killed append), skipped.
        problems: integrity problems (an empty list: the base is sound).
    """

    entries: dict[str, MemoryEntry] = field(default_factory=dict)
    history: list[tuple[int, HistoryRecord]] = field(default_factory=list)
    pending: list[tuple[int, HistoryRecord]] = field(default_factory=list)
    torn: list[Torn] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    leftovers: list[Path] = field(default_factory=list)


class StoreHeader(BaseModel):
    """The first line of ``entries.jsonl``: how many history records the write that made it had committed. Written
    in the same atomic rename as the entries, so the records after that many are, exactly, those of a write that
    never reached ``entries.jsonl`` (a kill between the history append and the rename)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format: Literal[2] = 2
    history_records: int = Field(ge=0)


def _entries_text(entries: Iterable[MemoryEntry], history_records: int) -> str:
    header = json.dumps({HEADER_KEY: StoreHeader(history_records=history_records).model_dump()})
    return header + "\n" + "".join(e.model_dump_json() + "\n" for e in entries)


def _set_aside(root: Path, pending: list[HistoryRecord]) -> None:
    """Keep an unfinished write's records in ``history.aborted.jsonl`` before a write drops them from the history."""
    if pending:
        path = root / ABORTED_FILE
        with path.open("a", encoding="utf-8") as fh:
            fh.write("".join(r.model_dump_json() + "\n" for r in pending))
            fh.flush()
            os.fsync(fh.fileno())
        log.warning("%s: %d record(s) of a write that never reached %s set aside in %s", root, len(pending),
                    ENTRIES_FILE, ABORTED_FILE)


def _leftovers(root: Path) -> list[Path]:
    """Temporary files of atomic writes a kill stopped before their rename (never read; the next write removes them)."""
    return sorted(p for name in (ENTRIES_FILE, HISTORY_FILE) for p in root.glob(f".{name}.*.tmp")) if root.is_dir() \
        else []


def read_store(root: str | os.PathLike) -> StoreState:
    """Read a memory base folder strictly and check its integrity, without changing it.

    Malformed lines raise :class:`FormatError` (naming file, line and field); a torn last line of the history is
    the only thing tolerated. Integrity problems are returned in ``problems``: a history record of an entry that
    ``entries.jsonl`` lacks, versions of one entry out of order or repeated, an entry without a record of its
    current version (its build record, when it has none), a current entry whose text differs from its record.
    """
    root = Path(root)
    entries_path, history_path = root / ENTRIES_FILE, root / HISTORY_FILE
    st = StoreState(leftovers=_leftovers(root))
    lines: dict[str, int] = {}
    header: StoreHeader | None = None
    if present(entries_path):
        for i, obj in iter_jsonl(entries_path, torn_ok=False, what="memory base entries file"):
            if i == 1 and isinstance(obj, dict) and set(obj) == {HEADER_KEY}:
                try:
                    header = StoreHeader.model_validate_json(json.dumps(obj[HEADER_KEY]), strict=True)
                except ValidationError as err:
                    raise FormatError(entries_path, f"the store header: {describe(err)}", where="line 1") from None
                continue
            if not isinstance(obj, dict):
                raise FormatError(entries_path, f"a JSON {type(obj).__name__}, where a MemoryEntry object belongs",
                                  where=f"line {i}")
            try:
                e = MemoryEntry.model_validate_json(json.dumps(obj), strict=True)
            except ValidationError as err:
                raise FormatError(entries_path, describe(err), where=f"line {i}") from None
            if e.entry_id in st.entries:
                raise FormatError(entries_path, f"field 'entry_id': duplicate id {e.entry_id!r} (also line "
                                  f"{lines[e.entry_id]})", where=f"line {i}",
                                  fix="keep one record per entry (older versions belong in history.jsonl)")
            st.entries[e.entry_id] = e
            lines[e.entry_id] = i
    if not present(history_path):
        st.problems += [Problem(ENTRIES_FILE, lines[e], e, "has no build record in history.jsonl (the file is missing)",
                                "", True) for e in st.entries]
        return st
    records = read_jsonl_models(history_path, HistoryRecord, torn_ok=True, torn=st.torn, what="memory base history")
    # entries.jsonl's header says how many records its write had committed: those after are an unfinished write
    # (a base without the header, written before it existed or by hand, has none: every record counts)
    committed = len(records) if header is None else header.history_records
    if committed > len(records):
        st.problems.append(Problem(HISTORY_FILE, None, "*", f"holds {len(records)} records, but entries.jsonl was "
                                   f"written after {committed} (records were lost: the file was cut or replaced)",
                                   "restore history.jsonl from a copy (the lost versions cannot be made again)"))
    st.history, st.pending = records[:committed], records[committed:]
    if st.pending:
        log.warning("%s: lines %d-%d: %d history record(s) of a write that never reached %s (a kill mid-commit) "
                    "are ignored; the next write sets them aside in %s", history_path, st.pending[0][0],
                    st.pending[-1][0], len(st.pending), ENTRIES_FILE, ABORTED_FILE)
    seen: dict[tuple[str, int], int] = {}
    last: dict[str, tuple[int, HistoryRecord]] = {}
    for i, r in st.history:
        if r.entry_id not in st.entries:
            st.problems.append(Problem(HISTORY_FILE, i, r.entry_id, f"a record (version {r.version}) of an entry "
                                       f"{ENTRIES_FILE} lacks", "", True))
        if (key := (r.entry_id, r.version)) in seen:
            same = "an identical copy" if r == dict(st.history)[seen[key]] else "a different record"
            st.problems.append(Problem(HISTORY_FILE, i, r.entry_id, f"version {r.version} again ({same} of line "
                                       f"{seen[key]})", f"remove line {i} (keep the record of line {seen[key]})"))
            continue
        seen[key] = i
        if (prev := last.get(r.entry_id)) and r.version < prev[1].version:
            st.problems.append(Problem(HISTORY_FILE, i, r.entry_id, f"version {r.version} after version "
                                       f"{prev[1].version} (line {prev[0]}): versions of an entry only grow",
                                       "restore history.jsonl from a copy, or move the line to its place"))
            continue
        last[r.entry_id] = (i, r)
    for eid, e in st.entries.items():
        if eid not in last:
            st.problems.append(Problem(ENTRIES_FILE, lines[eid], eid, "has no build record in history.jsonl", "", True))
            continue
        i, r = last[eid]
        if r.version < e.version:
            st.problems.append(Problem(ENTRIES_FILE, lines[eid], eid, f"its version {e.version} has no record in "
                                       f"history.jsonl (the last there is version {r.version}, line {i})", "", True))
        elif r.version > e.version:
            st.problems.append(Problem(HISTORY_FILE, i, eid, f"version {r.version} is newer than {ENTRIES_FILE}'s "
                                       f"version {e.version} (line {lines[eid]})",
                                       f"`workbench memory rollback {root} {eid} {e.version}` is not it: restore "
                                       f"{ENTRIES_FILE} line {lines[eid]} to version {r.version} from the record"))
        elif r.entry != e:
            st.problems.append(Problem(ENTRIES_FILE, lines[eid], eid, f"differs from its version {e.version} in "
                                       f"history.jsonl (line {i}): edited by hand?",
                                       "restore one of the two from the other (the history is the log)"))
    return st


def repair_store(root: str | os.PathLike) -> list[str]:
    """Repair what ``read_store`` finds repairable, only ever by adding: an entry's missing build (or current)
    record is appended to the history; an entry that ``entries.jsonl`` lacks but the history holds is restored at
    its last version. Crash-safe as a commit is (history first, then entries by rename).

    Returns:
        One line per thing added (empty: nothing to repair).

    Raises:
        MemoryBaseIntegrityError: problems remain that adding cannot repair (duplicates, versions out of order,
            contradicting records); nothing is written.
    """
    root = Path(root)
    st = read_store(root)
    if bad := [p for p in st.problems if not p.repairable]:
        raise MemoryBaseIntegrityError(root, bad)
    if not st.problems:
        return []
    ts = _now()
    entries = dict(st.entries)
    done: list[str] = []
    last: dict[str, HistoryRecord] = {}
    for _, r in st.history:
        last[r.entry_id] = r
    for eid, r in last.items():
        if eid not in entries:
            entries[eid] = r.entry
            done.append(f"restored entry {eid!r} to {ENTRIES_FILE} at its last version {r.version} (from history)")
    # the restored entries go back where their first record puts them
    first = {}
    for pos, (_, r) in enumerate(st.history):
        first.setdefault(r.entry_id, pos)
    order = sorted(entries, key=lambda k: (first.get(k, len(st.history)), list(entries).index(k)))
    if any(eid not in st.entries for eid in entries):
        entries = {k: entries[k] for k in order}
    new = []
    for eid, e in entries.items():
        if eid not in last or last[eid].version < e.version:
            new.append(HistoryRecord(entry_id=eid, version=e.version, entry=e, timestamp=ts,
                                     reason=("build record restored by `workbench memory check --repair`"
                                             if eid not in last else
                                             "current version's record restored by `workbench memory check --repair`")))
            done.append(f"added {HISTORY_FILE} record of {eid!r} version {e.version}")
    history_path = root / HISTORY_FILE
    kept = [r for _, r in st.history]
    if new or st.torn or st.pending:
        _set_aside(root, [r for _, r in st.pending])  # nothing is dropped: an unfinished write is kept apart
        atomic_write_text(history_path, "".join(r.model_dump_json() + "\n" for r in kept + new))
    atomic_write_text(root / ENTRIES_FILE, _entries_text(entries.values(), len(kept) + len(new)))
    return done


class MemoryBase:
    """A versioned store of memory entries in the folder ``root`` (created if missing).

    Args:
        root: the store folder.

    Raises:
        FormatError: a store file is malformed (the message names the file, line and field).
        MemoryBaseIntegrityError: the entries and the history disagree (see :func:`read_store`).
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise FormatError(self.root, "is a file, where a memory base folder belongs",
                              fix="pass the folder holding entries.jsonl and history.jsonl")
        self.root.mkdir(parents=True, exist_ok=True)
        self.entries_path = self.root / ENTRIES_FILE
        self.history_path = self.root / HISTORY_FILE
        self.revision = 0  # bumped by every write; retrievers rebuild their index when it changes
        self._entries: dict[str, MemoryEntry] = {}
        self._history: list[HistoryRecord] = []
        self._history_clean = True  # the history file holds exactly self._history, newline-terminated
        self._pending: list[HistoryRecord] = []  # an unfinished write's records (set aside at the next write)
        self._load()

    # -- reading --------------------------------------------------------------------------------------------

    def _load(self) -> None:
        state = read_store(self.root)
        if state.problems:
            raise MemoryBaseIntegrityError(self.root, state.problems)
        self._entries = dict(state.entries)
        self._history = [r for _, r in state.history]
        self._pending = [r for _, r in state.pending]
        # a torn tail or an unfinished write's records: the next write rewrites the history without them
        self._history_clean = not state.torn and not state.pending

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
        # History first: if the entries rename never happens, entries.jsonl's header still counts the records
        # before these, so the store reads as it was (and these are set aside at the next write).
        if not was_clean:
            _set_aside(self.root, self._pending)
            self._pending = []
        for tmp in _leftovers(self.root):  # one writer at a time: these are a killed write's, not a live one's
            tmp.unlink(missing_ok=True)
        if was_clean:
            with self.history_path.open("a", encoding="utf-8") as fh:
                fh.write("".join(r.model_dump_json() + "\n" for r in records))
                fh.flush()
                os.fsync(fh.fileno())
        else:
            atomic_write_text(self.history_path, "".join(r.model_dump_json() + "\n" for r in self._history + records))
        atomic_write_text(self.entries_path, _entries_text(entries.values(), len(self._history) + len(records)))
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
        # made whole in a temporary folder beside it, then renamed into place: a kill leaves no half copy (into
        # a folder that holds other things, e.g. a refinement's record, the two files move in, entries last)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.clone-"))
        try:
            atomic_write_text(tmp / HISTORY_FILE, "".join(r.model_dump_json() + "\n" for r in self._history))
            atomic_write_text(tmp / ENTRIES_FILE, _entries_text(self._entries.values(), len(self._history)))
            if not dest.exists() or not any(dest.iterdir()):
                os.replace(tmp, dest)  # onto an empty folder or none
            else:
                os.replace(tmp / HISTORY_FILE, dest / HISTORY_FILE)
                os.replace(tmp / ENTRIES_FILE, dest / ENTRIES_FILE)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
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
