"""``workbench memory log|diff|rollback|stats|check DIR``: read, revert and check a memory base (e.g. one ``refine``
wrote)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.locks import folder_lock
from workbench.memory import MemoryBase, entry_diff
from workbench.memory.base import read_store, repair_store
from workbench.methods.agmr.refine_folder import refine_stats

__all__ = ["add_parser", "cmd_memory"]

ACTIONS = ("log", "diff", "rollback", "stats", "check")


def _require_store(folder: str) -> None:
    # MemoryBase(folder) would create an empty base there: a typo must not leave one behind
    if not (Path(folder) / "entries.jsonl").exists():
        raise FileNotFoundError(f"{folder}: no memory base there (no entries.jsonl)")


def _open_store(folder: str) -> MemoryBase:
    _require_store(folder)
    return MemoryBase(folder)


def _check(folder: str, repair: bool) -> int:
    """``memory check``: every problem, one per line; with ``--repair`` add what is missing first."""
    _require_store(folder)
    if repair:
        with folder_lock(folder, f"workbench memory check --repair {folder}"):
            for line in repair_store(folder):
                print(f"repaired: {line}")
    st = read_store(folder)
    for t in st.torn:
        print(f"note: history.jsonl line {t.line}: a torn last line ({t.n_bytes} bytes, a killed append); the next "
              "write cuts it")
    if st.pending:
        print(f"note: history.jsonl lines {st.pending[0][0]}-{st.pending[-1][0]}: a write that never reached "
              "entries.jsonl (a kill mid-commit); ignored, and the next write sets it aside in history.aborted.jsonl")
    for tmp in st.leftovers:
        print(f"note: {tmp.name}: the temporary file of a write a kill stopped before its rename (never read); the "
              "next write removes it")
    for p in st.problems:
        print(f"problem: {p}")
    n_rep = sum(p.repairable for p in st.problems)
    print(json.dumps({"base": folder, "entries": len(st.entries), "history_records": len(st.history),
                      "problems": len(st.problems), "repairable": n_rep}))
    if st.problems:
        hint = f" (`workbench memory check {folder} --repair` adds the missing records)" if n_rep else ""
        raise ValueError(f"{folder}: {len(st.problems)} integrity problem(s){hint}")
    return 0


def _entry_of(store: MemoryBase, entry_id: str):
    try:
        return store.get(entry_id)
    except KeyError as e:
        raise ValueError(str(e).strip("'\"")) from None


def _log(store: MemoryBase, entry: str | None) -> None:
    if entry:
        _entry_of(store, entry)  # an unknown id is an error, not an empty log
    for r in store.commits():
        if entry and r.entry_id != entry:
            continue
        p = r.provenance
        print(json.dumps({"entry": r.entry_id, "version": r.version, "reason": r.reason, "time": r.timestamp,
                          "task": p.get("refinement_task"), "branch": p.get("branch"),
                          "pattern": p.get("pattern"), "rule_pattern": p.get("rule_pattern"),
                          "verification": p.get("verification"), "rollback_to": p.get("rollback_to")}))


def _previous(store: MemoryBase, entry: str, version: int) -> int:
    """The version before ``version`` (itself when there is none)."""
    return max([r.version for r in store.history(entry) if r.version < version], default=version)


def cmd_memory(a: argparse.Namespace) -> int:
    """Run ``a.action`` on the base in ``a.base``.

    Args:
        a: the parsed ``workbench memory`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    if a.action == "check":
        return _check(a.base, a.repair)
    if a.repair:
        raise ValueError("--repair goes with `memory check`")
    store = _open_store(a.base)
    if a.action == "stats":
        print(json.dumps(refine_stats(a.base), indent=1))
        return 0
    if a.action == "log":
        _log(store, a.entry)
        return 0
    if not a.entry:
        raise ValueError(f"memory {a.action}: name the entry (workbench memory {a.action} DIR ENTRY_ID; "
                         "`workbench memory log DIR` lists the refined ones)")
    current = _entry_of(store, a.entry)
    if a.action == "diff":
        new_v = current.version if a.to is None else a.to
        old_v = a.from_ if a.from_ is not None else _previous(store, a.entry, new_v)
        try:
            old, new = store.at_version(a.entry, old_v), store.at_version(a.entry, new_v)
        except KeyError as e:
            raise ValueError(str(e).strip("'\"")) from None
        print(entry_diff(old, new) or f"{a.entry}: versions {old_v} and {new_v} are the same")
        return 0
    to = a.to if a.to is not None else _previous(store, a.entry, current.version)
    with folder_lock(a.base, f"workbench memory rollback {a.base} {a.entry}"):
        store = _open_store(a.base)  # again, under the lock: what another writer committed meanwhile counts
        try:
            stored = store.rollback(a.entry, to, reason=f"rollback to version {to} (workbench memory rollback)")
        except KeyError as e:
            raise ValueError(str(e).strip("'\"")) from None
    print(json.dumps({"entry": a.entry, "rolled_back_to": to, "version": stored.version}))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench memory``."""
    mb = sub.add_parser("memory", help="read, revert and check a memory base: log (commits with provenance), diff, "
                        "rollback, stats (a refinement's statistics), check (integrity; --repair)")
    mb.add_argument("action", choices=ACTIONS)
    mb.add_argument("base", metavar="DIR")
    mb.add_argument("entry", nargs="?", help="entry id (diff, rollback; log: only this entry)")
    mb.add_argument("--from", dest="from_", type=int, help="diff: the older version (default: the one before --to)")
    mb.add_argument("--to", type=int, help="diff: the newer version (default current); rollback: the version to "
                    "restore (default: the one before the current)")
    mb.add_argument("--repair", action="store_true", help="check: add what is missing (an entry's build record, "
                    "an entry the history holds but entries.jsonl lost); it never removes a record")
    mb.set_defaults(fn=cmd_memory)
