"""Run one notebook with papermill in a child process, and restart it when the render has stalled.

Why: papermill can wait for ever on a reply its kernel has already sent or lost (nteract/papermill#711, #125;
met here at notebook 04's explorer cell). Then neither papermill, nor its kernel, nor any worker
they started uses CPU, and nothing is written -- the render sits until someone notices. Every run, sweep and
refinement a notebook drives resumes from its folder, so the cure is cheap: kill the render and start it again.

What counts as a stall: for ``stall_s`` seconds, no poll found the whole process tree (papermill, its kernel, the
sweep workers under it) using more than ``BUSY_SHARE`` of one core. A cell that
computes, or waits on workers that compute, is never a stall; a cell that waits on something outside the tree (a
remote LLM endpoint, an external Ray cluster) for longer than ``stall_s`` is -- raise ``stall_s`` (or pass 0 to
turn the watchdog off) for such notebooks.

What a kill leaves: the output notebook papermill wrote last (papermill writes it after each cell, so it is whole)
and the notebook's log; every run folder stays as its crash-consistency contract says. Nothing else to clean.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = ["NotebookError", "NotebookStalled", "RenderResult", "run_notebook", "BUSY_SHARE"]

BUSY_SHARE = 0.05  # a poll in which the tree used more of one core than this is activity; idle kernels use ~0.2 %
POLL_S = 2.0


class NotebookError(RuntimeError):
    """A notebook's cell raised (or papermill failed); the message ends with the tail of its log."""


class NotebookStalled(NotebookError):
    """The render stalled on every try."""


@dataclass(frozen=True)
class RenderResult:
    """One notebook's render: wall seconds over all tries, how many stalled renders were restarted, and the CPU
    seconds its whole process tree used (papermill, the kernel, every worker they started): unlike the wall time,
    that barely grows when other jobs share the machine, so ``cpu_s`` / cores bounds what the render needs idle."""

    wall_s: float
    restarts: int
    cpu_s: float = 0.0


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _cpu(procs: list[psutil.Process]) -> dict[int, float]:
    out = {}
    for p in procs:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def _kill_tree(proc: psutil.Process) -> None:
    procs = _tree(proc)
    for p in reversed(procs):  # leaves first, so no worker is orphaned to init mid-write of a stranger's file
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=10)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)


def _tail(log: Path, n: int = 40) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(lines[-n:])


def _children_cpu() -> float:
    """CPU seconds of this process's descendants that have ended and been waited for (each by its parent)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _render_once(cmd: list[str], log: Path, stall_s: float) -> tuple[int | None, float, float]:
    """Run ``cmd`` to its end (exit status) or until it stalls (None); also the seconds it ran and the CPU seconds
    its process tree used: the larger of what the ended, waited-for processes add to this process's children
    usage (exact) and the sum of each process's last sample (every POLL_S; catches a process orphaned before its
    end, misses its last seconds)."""
    t0 = time.perf_counter()
    cpu0 = _children_cpu()
    peak: dict[int, float] = {}
    with open(log, "a") as fh:
        fh.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(cmd)}\n")
        fh.flush()
        child = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    proc = psutil.Process(child.pid)
    seen: dict[int, float] = {}  # CPU seconds of each process of the tree at the last poll
    quiet_since = time.monotonic()
    try:
        while child.poll() is None:
            time.sleep(POLL_S)
            now = _cpu(_tree(proc))
            used = sum(c - seen.get(pid, 0.0) for pid, c in now.items() if c > seen.get(pid, 0.0))
            seen = now
            for pid, c in now.items():
                peak[pid] = max(peak.get(pid, 0.0), c)
            if used > BUSY_SHARE * POLL_S:  # something in the tree computes (a cell, a worker, a save)
                quiet_since = time.monotonic()
            elif stall_s and time.monotonic() - quiet_since >= stall_s:
                with open(log, "a") as fh:
                    fh.write(f"\n=== watchdog: under {BUSY_SHARE:.0%} of a core for "
                             f"{time.monotonic() - quiet_since:.0f} s: stalled, killing the render\n")
                _kill_tree(proc)
                child.wait()
                return None, time.perf_counter() - t0, max(_children_cpu() - cpu0, sum(peak.values()))
    except BaseException:
        _kill_tree(proc)
        child.wait()
        raise
    return child.returncode, time.perf_counter() - t0, max(_children_cpu() - cpu0, sum(peak.values()))


def run_notebook(src: Path, output: Path, parameters: dict, cwd: Path, log: Path, stall_s: float = 1200.0,
                 retries: int = 1) -> RenderResult:
    """Render ``src`` into ``output`` with ``parameters``; restart a stalled render up to ``retries`` times.

    Args:
        src: the notebook.
        output: the executed copy (papermill rewrites it after every cell).
        parameters: injected into the cell tagged ``parameters``.
        cwd: the kernel's working directory.
        log: papermill's and the watchdog's output, appended per try.
        stall_s: seconds of an idle process tree with no finished cell that count as a stall; 0 turns the
            watchdog off.
        retries: how many stalled renders are restarted before :class:`NotebookStalled`.

    Raises:
        NotebookError: a cell raised; the message names the notebook and ends with the log's tail (the
            traceback papermill printed).
        NotebookStalled: every try stalled.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        json.dump(parameters, fh)  # JSON is YAML: papermill reads it with -f
        params_file = Path(fh.name)
    cmd = [sys.executable, "-m", "papermill", str(src), str(output), "-f", str(params_file), "--cwd", str(cwd),
           "--no-progress-bar", "--log-output"]
    wall, cpu, restarts = 0.0, 0.0, 0
    try:
        while True:
            code, took, used = _render_once(cmd, log, stall_s)
            wall, cpu = wall + took, cpu + used
            if code == 0:
                return RenderResult(wall_s=round(wall, 1), restarts=restarts, cpu_s=round(cpu, 1))
            if code is not None:
                raise NotebookError(f"{src.name}: the render failed (exit {code}); the executed copy with the "
                                    f"failing cell is {output}, the whole log {log}. Its end:\n{_tail(log)}")
            if restarts >= retries:
                raise NotebookStalled(
                    f"{src.name}: the render stalled {restarts + 1} times (no CPU in papermill, its kernel or "
                    f"their workers for {stall_s:.0f} s and no cell finished; nteract/papermill#711). Every run "
                    f"resumes, so running the same command again only repeats the rendering; a notebook that "
                    f"waits on a remote endpoint longer than that needs a larger --stall-minutes (0: off). "
                    f"Log: {log}")
            restarts += 1
    finally:
        params_file.unlink(missing_ok=True)
