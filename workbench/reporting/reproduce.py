"""``make reproduce``: run every report notebook with papermill into the reports folder."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tqdm.auto import tqdm

from workbench.locks import folder_lock
from workbench.memory.trajectory import atomic_write_text
from workbench.provenance import versions
from workbench.reporting.profiles import PROFILES, notebook_parameters
from workbench.reporting.watchdog import run_notebook

__all__ = ["reproduce", "NOTEBOOKS_DIR"]

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def machine() -> dict:
    """What the wall times were measured on (CPU count, thread settings the kernels inherit)."""
    import os
    import platform

    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}


def reproduce(profile: str = "default", reports: str = "reports", notebooks: list[str] | None = None,
              runs: str = "runs", dtype: str | None = None, stall_minutes: float = 20.0, retries: int = 1) -> dict:
    """Execute the report notebooks of ``profile`` (all of them, or those named) and record wall times.

    The executed copies land in ``reports/notebooks/`` so a reader sees the outputs without running.
    ``dtype``: run every notebook's model in this dtype (default: the notebooks' own, float32); its runs get
    folders of their own (``runs/<profile>-<dtype>``), and every table says the dtype.

    Each notebook renders in a child papermill process under a watchdog (:mod:`workbench.reporting.watchdog`):
    a render whose processes use no CPU for ``stall_minutes`` (papermill's lost-reply hang) is killed and
    started again, up to ``retries`` times -- every run resumes, so only the rendering repeats. Its log is
    ``<runs_dir>/reproduce.<notebook>.log``.

    ``reports/reproduce.json`` keeps, per notebook, what rendered it last (``notebooks``: profile, dtype, wall
    time, git commit, when), so reports rendered by several invocations -- the default profile, then one
    notebook at paper scale -- say which is which; its top-level ``profile`` / ``dtype`` / ``versions`` /
    ``machine`` are the last invocation's.
    """
    with folder_lock(reports, f"workbench reproduce --profile {profile} --out {reports}"):
        return _reproduce(profile, reports, notebooks, runs, dtype, stall_minutes, retries)


def _reproduce(profile: str, reports: str, notebooks: list[str] | None, runs: str, dtype: str | None,
               stall_minutes: float, retries: int) -> dict:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile '{profile}' (known: {', '.join(PROFILES)})")
    names = notebooks or sorted(PROFILES[profile])
    out_dir = Path(reports) / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    timings, finished, restarts, cpu = {}, {}, {}, {}
    for name in tqdm(names, desc=f"reproduce [{profile}]"):
        src = NOTEBOOKS_DIR / f"{name}.ipynb"
        if not src.exists():
            raise FileNotFoundError(f"{src}: no such notebook (known: {', '.join(sorted(PROFILES[profile]))})")
        params = notebook_parameters(profile, name, str(Path(reports).resolve()), str(Path(runs).resolve()))
        if dtype is not None:
            params.update(dtype=dtype, runs_dir=f"{params['runs_dir']}-{dtype}")
        done = run_notebook(src, out_dir / src.name, params, cwd=NOTEBOOKS_DIR,
                            log=Path(params["runs_dir"]) / f"reproduce.{name}.log", stall_s=60 * stall_minutes,
                            retries=retries)
        timings[name], restarts[name], cpu[name] = done.wall_s, done.restarts, done.cpu_s
        finished[name] = time.strftime("%Y-%m-%dT%H:%M:%S")
    path = Path(reports) / "reproduce.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    now = versions()
    rendered = {name: {"profile": profile, "dtype": dtype or "float32", "wall_s": wall, "cpu_s": cpu[name],
                       "stalled_restarts": restarts[name], "git_commit": now.get("git_commit"), "finished": finished[name]}
                for name, wall in timings.items()}
    old.update({"profile": profile, "dtype": dtype or "float32", "wall_s": {**old.get("wall_s", {}), **timings},
                "notebooks": {**old.get("notebooks", {}), **rendered}, "versions": now, "machine": machine()})
    atomic_write_text(path, json.dumps(old, indent=1) + "\n")
    return timings
