"""Where a sweep stands, and which sweeps are playing now.

A batch spans sessions: a sweep is killed at a session's end and started again in the next one. Two things a
user then needs, read from the folders alone:

- ``workbench sweep GRID --status``: per configuration, the episodes planned, played and solved, whether it is
  complete, how many of its tasks wait for a same-memory reference (``adopt_same_memory``) to play them first,
  which live sweep is playing it, and (from that sweep's rate since it started) when it should end.
- A second sweep must never play a configuration folder a live sweep is playing: both would play the same tasks
  and append them twice. Each invocation records its process (host, pid, the process's start time, so a reused
  pid after a reboot is not taken for it) in the grid's sweep record; :func:`refuse_concurrent` reads every sweep
  record of the out folder (two grids may share it) and refuses an overlap before anything is written.

An invocation that was killed never writes ``finished``; its process is gone, so it is not live. Records written
before invocations named their process are never live.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from workbench.eval.config import select_tasks

__all__ = ["ConcurrentSweepError", "ConfigStatus", "this_process", "live_invocations", "refuse_concurrent",
           "refuse_live_folders", "sweep_status", "format_status"]


class ConcurrentSweepError(RuntimeError):
    """Another live sweep is playing a configuration this one would play."""


def this_process() -> dict:
    """What identifies this process among every process that ever ran (host, pid, start time)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_started": psutil.Process().create_time()}


def _alive(inv: dict) -> bool:
    if inv.get("finished") is not None or "pid" not in inv or inv.get("host") != socket.gethostname():
        return False  # another host's sweep cannot be checked from here; see the docstring of refuse_concurrent
    try:
        return abs(psutil.Process(inv["pid"]).create_time() - inv["pid_started"]) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied, KeyError, TypeError):
        return False


def live_invocations(out: str | Path) -> list[tuple[Path, dict]]:
    """(sweep record, invocation) of every sweep whose process is running now and that plays into ``out``."""
    found = []
    for path in sorted(Path(out).glob("sweep*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        found += [(path, inv) for inv in record.get("invocations", []) if _alive(inv)]
    return found


def refuse_concurrent(out: str | Path, names: list[str]) -> None:
    """Raise :class:`ConcurrentSweepError` when a live sweep on this host plays one of ``names`` in ``out``.

    Only this host's processes can be seen; sweeps of one folder from two machines (a shared disk) are the
    user's to keep apart.
    """
    me = os.getpid()
    for path, inv in live_invocations(out):
        if inv["pid"] == me:
            continue
        both = sorted(set(inv.get("configurations", [])) & set(names))
        if both:
            raise ConcurrentSweepError(
                f"{path}: the sweep of pid {inv['pid']} (started {inv.get('started')}) is playing "
                f"{', '.join(both)} in {out}; a second player of the same folders (a sweep, a run, a notebook) "
                f"would play their tasks twice. Wait for it, stop it (kill {inv['pid']}; it resumes), or play "
                "other configurations (sweep --only).")


def refuse_live_folders(outs) -> None:
    """:func:`refuse_concurrent` for run folders ``outs`` (each checked against the sweep records beside it): what
    plays or adopts into a folder -- ``workbench run --resume``, a notebook's ``drive``, a sweep -- calls it
    first, so a render or a run started while a background sweep plays the same folders stops with a clear
    error instead of appending their tasks a second time."""
    by_parent: dict[Path, list[str]] = {}
    for out in outs:
        by_parent.setdefault(Path(out).parent, []).append(Path(out).name)
    for parent, names in by_parent.items():
        refuse_concurrent(parent, names)


@dataclass(frozen=True)
class ConfigStatus:
    """One configuration of a grid: tasks planned, episodes played and solved, complete (metrics written), the
    pid of a live sweep playing it, and the estimated seconds left at that sweep's rate (None: not running)."""

    name: str
    planned: int
    played: int
    solved: int
    complete: bool
    running: int | None = None
    eta_s: float | None = None
    waiting: int = 0  # tasks left for its same-memory reference to play first (adopted then, mostly)

    @property
    def left(self) -> int:
        return self.planned - self.played


def _outcomes(out: Path) -> dict[str, bool]:
    """Task id -> success of every episode in ``out``'s trajectories."""
    path = out / "trajectories.jsonl"
    seen: dict[str, bool] = {}
    for line in (path.read_text(encoding="utf-8").split("\n") if path.exists() else ()):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a blank line, or the torn tail a kill mid-append leaves (readers skip it too)
        if isinstance(rec, dict) and "task_id" in rec:
            seen[rec["task_id"]] = bool(rec.get("success"))
    return seen


def sweep_status(grid) -> list[ConfigStatus]:
    """The status of every configuration of ``grid`` (read from its folders and sweep records; plays nothing)."""
    planned = {Path(c.out).name: {t.task_id for t in select_tasks(c)} for c in grid.configs}
    outcomes = {Path(c.out).name: _outcomes(Path(c.out)) for c in grid.configs}
    refs = dict(grid.same_memory)
    by_name = {}
    for cfg in grid.configs:
        name = Path(cfg.out).name
        mine = {t: ok for t, ok in outcomes[name].items() if t in planned[name]}
        waiting = len(planned[name] - set(outcomes[name]) - set(outcomes[refs[name]])) if name in refs else 0
        by_name[name] = ConfigStatus(name, len(planned[name]), len(mine), sum(mine.values()),
                                     (Path(cfg.out) / "metrics.json").exists(), waiting=waiting)
    for _, inv in live_invocations(grid.out):
        mine = [n for n in inv.get("configurations", []) if n in by_name]
        if not mine:
            continue
        at_start = inv.get("played_at_start", {})
        since = time.time() - time.mktime(time.strptime(inv["started"], "%Y-%m-%dT%H:%M:%S"))
        # episodes played since it started: a same-memory adoption (recorded as made) is a copy, not a rate
        adopted = inv.get("adopted_same_memory", {})
        gained = sum(by_name[n].played - at_start.get(n, by_name[n].played) - adopted.get(n, 0) for n in mine)
        left = sum(by_name[n].left - by_name[n].waiting for n in mine)  # what waits is adopted, mostly
        eta = left * since / gained if gained > 0 else None
        for n in mine:
            by_name[n] = replace(by_name[n], running=inv["pid"], eta_s=eta)
    return list(by_name.values())


def format_status(rows: list[ConfigStatus]) -> str:
    """A table of ``rows`` and a total line."""
    from tabulate import tabulate

    def eta(s: float | None) -> str:
        return "" if s is None else f"{s / 3600:.1f} h"

    table = [[r.name, r.planned, r.played, r.solved, f"{r.solved / r.played:.1%}" if r.played else "",
              "yes" if r.complete else "", r.waiting or "", r.running or "", eta(r.eta_s)] for r in rows]
    left = sum(r.left for r in rows)
    running = {r.running for r in rows if r.running}
    total = (f"{sum(r.played for r in rows)} of {sum(r.planned for r in rows)} episodes played, {left} left; "
             + (f"playing now: pid {', '.join(map(str, sorted(running)))}" if running else "no sweep playing now"))
    waiting = sum(r.waiting for r in rows)
    total += (f"; {waiting} of those wait for a same-memory reference to play them first (then adopted where the "
              "memory is the same; not in the ETA)" if waiting else "")
    return tabulate(table, headers=["configuration", "tasks", "played", "solved", "success", "complete", "waiting",
                                    "sweep pid", "ETA"]) + "\n" + total
