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

Both files are read strictly (:mod:`workbench.files`): a sweep record (written whole, atomically) that is not a
:class:`SweepRecord` -- an unknown key, a pid that is a string, a timestamp that is not one -- is a
:class:`~workbench.files.FormatError` naming the file, the invocation and the field, never skipped (a skipped
record could hide a live sweep); of a configuration's ``trajectories.jsonl`` (appended to) only a torn last line is
tolerated.
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import psutil
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
)

from workbench.eval.config import select_tasks
from workbench.files import FormatError, describe, iter_jsonl, read_json

__all__ = ["ConcurrentSweepError", "ConfigStatus", "Invocation", "SweepRecord", "this_process", "live_invocations",
           "read_sweep_record", "refuse_concurrent", "refuse_live_folders", "sweep_status", "format_status"]

_TIME = "%Y-%m-%dT%H:%M:%S"  # what time.strftime writes in a record


def _timestamp(value: str) -> str:
    try:
        time.strptime(value, _TIME)
    except ValueError:
        raise ValueError(f"{value!r} is not a time written YYYY-MM-DDTHH:MM:SS") from None
    return value


Timestamp = Annotated[str, AfterValidator(_timestamp)]
_Count = Annotated[int, Field(ge=0)]
_Name = Annotated[str, Field(min_length=1)]


class Invocation(BaseModel):
    """One invocation of a sweep, as its record keeps it (``sweep.json``'s ``invocations``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    started: Timestamp
    finished: Timestamp | None = None  # None: still playing, or killed
    configurations: list[_Name]
    workers: int | None = None  # as asked (an invocation refused for --workers 0 records it too)
    ray_address: str | None = None
    host: str | None = None  # host, pid, pid_started: the process (absent in records older than them)
    pid: Annotated[int, Field(ge=0)] | None = None
    pid_started: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    played_at_start: dict[str, _Count] = {}
    adopted: dict[str, str] = {}
    adopted_same_memory: dict[str, _Count] = {}
    error: str | None = None
    wall_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    played: dict[str, _Count] = {}
    replayed: _Count | None = None
    worker_peak_rss_mib: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = {}


class SweepRecord(BaseModel):
    """A grid's sweep record (``OUT/sweep.json`` or ``OUT/sweep.<grid stem>.json``), written by ``run_sweep``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    grid: str = ""  # the grid file it records
    description: str = ""
    out: str = ""
    configurations: dict[str, dict[str, Any]] = {}  # name -> RunConfig.identity()
    status: dict[str, dict[str, Any]] = {}  # name -> what _status says
    invocations: list[Invocation] = []
    versions: dict[str, Any] = {}


_RECORD_NAME = re.compile(r"^sweep(\.[^/]+)?\.json$")


def read_sweep_record(path: str | Path) -> SweepRecord:
    """A sweep record, strictly (see :class:`SweepRecord`).

    Raises:
        FileNotFoundError: no such file.
        FormatError: not a sweep record; the message names the file, the invocation and the field.
    """
    obj = read_json(path, "sweep record")
    fix = ("it is the sweep's own record: restore it (git), or move it aside and run the sweep again "
           "(what its folders hold stays)")
    if not isinstance(obj, dict):
        raise FormatError(path, f"holds a JSON {type(obj).__name__}, where a sweep record object belongs", fix=fix)
    invocations = obj.get("invocations", [])
    if isinstance(invocations, list):  # name the invocation a problem is in
        for i, inv in enumerate(invocations):
            try:
                Invocation.model_validate(inv, strict=True)
            except ValidationError as e:
                raise FormatError(path, describe(e), where=f"invocation {i}", fix=fix) from None
    try:
        return SweepRecord.model_validate(obj, strict=True)
    except ValidationError as e:
        raise FormatError(path, describe(e), fix=fix) from None


class ConcurrentSweepError(RuntimeError):
    """Another live sweep is playing a configuration this one would play."""


def this_process() -> dict:
    """What identifies this process among every process that ever ran (host, pid, start time)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_started": psutil.Process().create_time()}


def _alive(inv: Invocation) -> bool:
    if inv.finished is not None or inv.pid is None or inv.pid_started is None or inv.host != socket.gethostname():
        return False  # another host's sweep cannot be checked from here; see the docstring of refuse_concurrent
    try:
        return abs(psutil.Process(inv.pid).create_time() - inv.pid_started) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def live_invocations(out: str | Path) -> list[tuple[Path, dict]]:
    """(sweep record, invocation) of every sweep whose process is running now and that plays into ``out``.

    Raises:
        FormatError: a sweep record of ``out`` is malformed (it is never skipped: it could hide a live sweep).
    """
    found = []
    for path in sorted(Path(out).glob("sweep*.json")):
        if not _RECORD_NAME.match(path.name):
            continue
        record = read_sweep_record(path)
        found += [(path, inv.model_dump()) for inv in record.invocations if _alive(inv)]
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


class _Outcome(BaseModel):
    """What the status reads of an episode record: its task and whether it succeeded. The rest of the record is
    its owner's to check (``workbench.memory.trajectory.Trajectory``), so it is ignored here, not refused."""

    model_config = ConfigDict(extra="ignore")

    task_id: Annotated[StrictStr, Field(min_length=1)]
    success: StrictBool


def _outcomes(out: Path) -> dict[str, bool]:
    """Task id -> success of every episode in ``out``'s trajectories.

    Raises:
        FormatError: a line that is not an episode record (but the torn last line a kill mid-append leaves,
            which is skipped as every reader of the file skips it).
    """
    path = out / "trajectories.jsonl"
    seen: dict[str, bool] = {}
    if not path.exists() and not path.is_symlink():
        return seen
    for i, rec in iter_jsonl(path, torn_ok=True, what="trajectories file"):
        if not isinstance(rec, dict):
            raise FormatError(path, f"a JSON {type(rec).__name__}, where an episode record object belongs",
                              where=f"line {i}")
        try:
            ep = _Outcome.model_validate(rec)
        except ValidationError as e:
            raise FormatError(path, describe(e), where=f"line {i}",
                              fix="an episode record needs task_id (a string) and success (true or false)") from None
        seen[ep.task_id] = ep.success
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
        since = time.time() - time.mktime(time.strptime(inv["started"], _TIME))
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
