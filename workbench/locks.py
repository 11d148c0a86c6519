"""Folder locks: one writer per output folder.

``run``, ``sweep``, ``refine``, ``merge-runs``, ``memory`` writes and notebook renders hold a lock on the folder they
write (an OS lock through ``filelock`` on ``FOLDER/.workbench.lock``), so a second process refuses at once instead
of appending to the same files::

    with folder_lock(out, "workbench run --resume"):
        ...

The holder's PID, command and start time sit beside the lock (``.workbench.lock.json``) and are named in the
refusal. The OS releases the lock of a process that dies (even by SIGKILL); the next taker finds the holder file
its predecessor never removed and says that it took over a stale lock. In one process the lock is re-entrant (a
sweep locks each run folder that ``drive`` locks again). A folder the lock created and nothing else wrote into is
removed again on release: a command refused by its checks leaves nothing behind.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from workbench.files import atomic_write_text

__all__ = ["FolderBusyError", "folder_lock", "folder_locks", "LOCK_FILE", "HOLDER_FILE", "holder"]

log = logging.getLogger("workbench.locks")

LOCK_FILE = ".workbench.lock"
HOLDER_FILE = ".workbench.lock.json"

_held: dict[tuple[int, Path], int] = {}  # (thread, folder) -> depth: re-entry in one thread (another thread is refused)
_guard = threading.Lock()


class FolderBusyError(RuntimeError):
    """Another live process holds the folder's lock; the message names its PID and command."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder(folder: str | os.PathLike) -> dict | None:
    """What the folder's holder file says (``pid``, ``command``, ``host``, ``since``), or None (no file, or one
    that is not such a record: its holder is unknown)."""
    try:
        d = json.loads((Path(folder) / HOLDER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or isinstance(d.get("pid"), bool) or not isinstance(d.get("pid"), int) or d["pid"] < 1:
        return None
    return {"pid": d["pid"], **{k: str(d.get(k, "?")) for k in ("command", "host", "since")}}


def _command() -> str:
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return " ".join(["workbench" if name in ("workbench", "__main__.py") else name, *sys.argv[1:]])


@contextmanager
def folder_lock(folder: str | os.PathLike, command: str | None = None, wait: float = 0) -> Iterator[Path]:
    """Hold ``folder``'s lock (the folder is created if missing) for the ``with`` block.

    Args:
        folder: the output folder.
        command: what holds it, for the refusal's message (default: this process's command line).
        wait: seconds to wait for another holder to finish (0: refuse at once).

    Raises:
        FolderBusyError: a live process holds it.
    """
    folder = Path(folder).resolve()
    key = (threading.get_ident(), folder)
    with _guard:
        reentered = key in _held
        if reentered:
            _held[key] += 1
    if reentered:
        try:
            yield folder
        finally:
            with _guard:
                _held[key] -= 1
        return
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / LOCK_FILE, timeout=wait, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        h = holder(folder) or {}
        who = (f"PID {h.get('pid')} ({h.get('command', '?')}, on {h.get('host', '?')} since {h.get('since', '?')})"
               if h else "another process")
        raise FolderBusyError(f"{folder}: in use by {who}; wait for it to finish or stop it, then run again "
                              "(a resumable command continues where it stopped)") from None
    try:
        old = holder(folder)
        if old and old["pid"] != os.getpid():
            if old["host"] == socket.gethostname() and _alive(old["pid"]):
                # its lock file was removed under it (by hand, or a cleanup race): it still writes here
                lock.release()
                raise FolderBusyError(f"{folder}: in use by PID {old['pid']} ({old['command']}, since {old['since']}; "
                                      f"its lock file {LOCK_FILE} was removed while it ran); wait for it to finish "
                                      "or stop it, then run again")
            log.warning("%s: took over a stale lock of dead PID %s (%s, since %s)", folder, old["pid"],
                        old["command"], old["since"])
        atomic_write_text(folder / HOLDER_FILE, json.dumps(
            {"pid": os.getpid(), "command": command or _command(), "host": socket.gethostname(),
             "since": time.strftime("%Y-%m-%dT%H:%M:%S")}))
        with _guard:
            _held[key] = 1
        try:
            yield folder
        finally:
            with _guard:
                del _held[key]
            (folder / HOLDER_FILE).unlink(missing_ok=True)
            # a command that wrote nothing leaves no folder behind; removed while the lock is still held, so a
            # process waiting on this lock file finds it unlinked (filelock then retries on a new one, or refuses)
            if created and {p.name for p in folder.iterdir()} <= {LOCK_FILE}:
                (folder / LOCK_FILE).unlink(missing_ok=True)
                try:
                    folder.rmdir()
                except OSError:
                    pass
    finally:
        if lock.is_locked:
            lock.release()


@contextmanager
def folder_locks(folders, command: str | None = None) -> Iterator[list[Path]]:
    """Hold several folders' locks (in a fixed order, so two processes cannot deadlock); all or none."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        held = [stack.enter_context(folder_lock(f, command)) for f in sorted({Path(f).resolve() for f in folders})]
        yield held
