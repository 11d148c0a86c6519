"""``make reproduce``: run every report notebook with papermill into the profile's reports set."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from tqdm.auto import tqdm

from workbench.locks import folder_lock
from workbench.memory.trajectory import atomic_write_text
from workbench.provenance import versions
from workbench.reporting.profiles import PROFILES, notebook_parameters
from workbench.reporting.save import write_home_index, write_set_index
from workbench.reporting.watchdog import run_notebook

__all__ = ["declared_parameters", "reproduce", "report_set", "NOTEBOOKS_DIR", "REPO"]

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
REPO = NOTEBOOKS_DIR.parent


def machine() -> dict:
    """What the wall times were measured on (CPU count, thread settings the kernels inherit)."""
    import platform

    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}


def report_set(profile: str, dtype: str | None = None) -> str:
    """The name of a profile's reports set (and of its runs folder): ``full``, or ``full-bfloat16`` where every
    notebook's dtype was forced."""
    return profile if dtype is None else f"{profile}-{dtype}"


def _relative(path: Path, start: Path) -> str:
    return os.path.relpath(Path(path).resolve(), start.resolve())


def _strip_machine_paths(notebook: Path) -> None:
    """Make the paths a rendered notebook shows relative to the repository (and the home folder ``~``), so the
    committed notebooks do not embed the machine that rendered them."""
    data = json.loads(notebook.read_text())
    pm = data.get("metadata", {}).get("papermill", {}) if isinstance(data, dict) else {}
    for key in ("input_path", "output_path"):  # papermill records where it read and wrote
        if isinstance(pm.get(key), str):
            path = Path(pm[key]).resolve()
            pm[key] = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"

    home = str(Path.home())
    pairs = [(str(REPO), "")] + ([(home, "~/")] if home not in ("/", "") else [])
    for prefix, below in pairs:
        escaped = re.escape(json.dumps(prefix)[1:-1])
        text = re.sub(escaped + "/", below, text)  # a path below it: relative to the repository (or ~/)
        # the folder itself, not a sibling that shares its prefix (/work/main-old)
        text = re.sub(escaped + r"(?=[\s\"'`:;,)\]]|$)", below.rstrip("/") or ".", text)
    atomic_write_text(notebook, text)


def _read_record(path: Path) -> dict:
    """A set's ``reproduce.json`` (``{"notebooks": {name: record}}``), checked.

    Raises:
        ValueError: it is not that; the message names the file and how to mend it.
    """
    if not path.exists():
        return {"notebooks": {}}
    fix = "restore it from git (`git checkout -- FILE`) or delete it (the next render writes it again)"
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); {fix}") from None
    if not isinstance(data, dict) or not isinstance(data.get("notebooks", {}), dict) or not all(
            isinstance(r, dict) for r in data.get("notebooks", {}).values()):
        raise ValueError(f"{path}: field 'notebooks' must be an object of one record per notebook; {fix}")
    return {"notebooks": data.get("notebooks", {})}


def declared_parameters(notebook: Path) -> dict:
    """The defaults of a notebook's ``parameters`` cell (plain assignments of literals)."""
    import ast

    cells = json.loads(Path(notebook).read_text())["cells"]
    out: dict = {}
    for cell in cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]  # magics
            try:
                body = ast.parse("\n".join(lines)).body
            except SyntaxError:
                return out
            for node in body:
                target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                          else node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None)
                if isinstance(target, ast.Name):
                    try:
                        out[target.id] = ast.literal_eval(node.value)
                    except ValueError:
                        pass
    return out


def reproduce(profile: str = "default", reports: str = "reports", notebooks: list[str] | None = None,
              runs: str = "runs", dtype: str | None = None, stall_minutes: float = 20.0, retries: int = 1) -> dict:
    """Execute the report notebooks of ``profile`` (all of them, or those named) into its reports set.

    The set is ``REPORTS/<profile>`` (``REPORTS/<profile>-<dtype>`` with ``dtype``), so one profile never
    overwrites another's tables, figures or notebooks: ``make reproduce`` regenerates ``reports/default/`` and
    leaves the committed paper-scale set ``reports/full-bfloat16/`` as it is. The executed copies land in
    ``<set>/notebooks/`` so a reader sees the outputs without running; the paths they show are relative to the
    repository. ``dtype``: run every notebook's model in this dtype (default: the notebooks' own, float32); its
    runs get folders of their own (``runs/<profile>-<dtype>``).

    Each notebook renders in a child papermill process under a watchdog (:mod:`workbench.reporting.watchdog`):
    a render whose processes use no CPU for ``stall_minutes`` (papermill's lost-reply hang) is killed and
    started again, up to ``retries`` times -- every run resumes, so only the rendering repeats. Its log is
    ``<runs_dir>/reproduce.<notebook>.log``.

    ``<set>/reproduce.json`` records per notebook what rendered it (profile, dtype, wall and CPU time, the
    command, package versions, git commit, machine, when); there is no set-wide profile, as a set may hold
    notebooks rendered by several invocations. ``REPORTS/index.md`` lists the sets.

    Returns:
        The wall seconds per notebook rendered.
    """
    out = Path(reports) / report_set(profile, dtype)
    with folder_lock(out, f"workbench reproduce --profile {profile} --out {reports}"):
        timings = _reproduce(profile, out, notebooks, runs, dtype, stall_minutes, retries)
    write_home_index(reports)
    return timings


def _reproduce(profile: str, out: Path, notebooks: list[str] | None, runs: str, dtype: str | None,
               stall_minutes: float, retries: int) -> dict:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile '{profile}' (known: {', '.join(PROFILES)})")
    names = notebooks or sorted(PROFILES[profile])
    (out / "notebooks").mkdir(parents=True, exist_ok=True)
    _read_record(out / "reproduce.json")  # a damaged record stops here, before any render, not after the first
    timings = {}
    for name in tqdm(names, desc=f"reproduce [{out.name}]"):
        src = NOTEBOOKS_DIR / f"{name}.ipynb"
        if not src.exists():
            raise FileNotFoundError(f"{src}: no such notebook (known: {', '.join(sorted(PROFILES[profile]))})")
        # the notebook runs in notebooks/: it is handed paths relative to there, and shows no machine's paths
        params = notebook_parameters(profile, name, _relative(out, NOTEBOOKS_DIR), _relative(Path(runs), NOTEBOOKS_DIR))
        if dtype is not None:
            params.update(dtype=dtype, runs_dir=f"{params['runs_dir']}-{dtype}")
        done = run_notebook(src, out / "notebooks" / src.name, params, cwd=NOTEBOOKS_DIR,
                            log=NOTEBOOKS_DIR / params["runs_dir"] / f"reproduce.{name}.log",
                            stall_s=60 * stall_minutes, retries=retries)
        _strip_machine_paths(out / "notebooks" / src.name)
        timings[name] = done.wall_s
        now = versions()
        command = (f"workbench reproduce --profile {profile}" + (f" --dtype {dtype}" if dtype else "")
                   + f" --notebooks {name}")
        ran_in = params.get("dtype") or declared_parameters(src).get("dtype") or "float32"  # what the notebook used
        record = {"profile": profile, "dtype": ran_in, "wall_s": done.wall_s, "cpu_s": done.cpu_s,
                  "stalled_restarts": done.restarts, "command": command, "git_commit": now.pop("git_commit", None),
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "versions": now, "machine": machine()}
        path = out / "reproduce.json"
        old = {"notebooks": {**_read_record(path)["notebooks"], name: record}}  # per notebook only
        atomic_write_text(path, json.dumps(old, indent=1) + "\n")
        write_set_index(out)
    return timings
