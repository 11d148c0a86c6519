"""``workbench list models|memory|backends|grids|benchmarks|task-types``: the names the other commands accept, from the registries."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import yaml

import workbench
from workbench.agents.policy import POLICIES, list_policies, policy_options
from workbench.envs.benchmarks import BENCHMARKS, benchmark
from workbench.llm.registry import BACKENDS, list_backends
from workbench.models.registry import get_model_spec, list_models

__all__ = ["add_parser", "cmd_list", "GRIDS_DIR", "grid_files"]

# the grids ship with the repository, not the package: beside the package folder in a checkout
GRIDS_DIR = Path(workbench.__file__).resolve().parent.parent / "grids"
LISTINGS = ("models", "memory", "backends", "grids", "benchmarks", "task-types")


def grid_files(folder: Path = GRIDS_DIR) -> list[Path]:
    """The experiment grids (``*.yaml``) in ``folder``, sorted by name.

    Raises:
        FileNotFoundError: no such folder (an installed package has no grids: they live in the repository).
    """
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no grids folder (the grids live in the repository's grids/; "
                                "run from a checkout)")
    return sorted(folder.glob("*.yaml"))


def _shown(path: Path) -> str:
    """``path`` as ``workbench sweep`` would be given it from here: relative when under the working directory."""
    try:
        return os.path.relpath(path) if path.resolve().is_relative_to(Path.cwd().resolve()) else str(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def _rows(what: str, env: str = "alfworld") -> list[tuple[str, str]]:
    """(name, description) rows of one listing (``task-types``: of benchmark ``env``)."""
    if what == "benchmarks":
        return [(name, BENCHMARKS.entry(name).doc) for name in BENCHMARKS.names()]
    if what == "task-types":
        bench = benchmark(env)
        if env.partition(":")[0] == "scienceworld":
            from workbench.envs.scienceworld import ETO_TYPES, LONG_TYPES, STEP_LIMITS

            return [(t, f"{STEP_LIMITS[t]} steps" + (" (ETO's protocol)" if t in ETO_TYPES else " (ours)")
                     + ("; dropped by the AGMR paper (E.1)" if t in LONG_TYPES else "")) for t in bench.task_types]
        return [(t, "") for t in bench.task_types]
    if what == "models":
        return [(name, getattr(get_model_spec(name), "description", "")) for name in list_models()]
    if what == "memory":
        return [(name, f"{POLICIES.entry(name).doc} (options: {', '.join(policy_options(name)) or 'none'})".lstrip())
                for name in list_policies()]
    if what == "backends":
        return [(name, BACKENDS.entry(name).doc) for name in list_backends()]
    rows = []
    for path in grid_files():
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        rows.append((_shown(path), str(data.get("description") or "") if isinstance(data, dict) else ""))
    return rows


def cmd_list(a: argparse.Namespace) -> int:
    """Print one name a line (``--long``: with its description, tab-separated).

    Args:
        a: the parsed ``workbench list`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    for name, description in _rows(a.what, a.env):
        print(f"{name}\t{description}" if a.long and description else name)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench list``."""
    ls = sub.add_parser("list", help="what a command accepts: models (--model), memory (run --memory), backends "
                        "(--backend, --analyzer), grids (sweep GRID), benchmarks (run --env), task-types "
                        "(run --task-types, of --env)")
    ls.add_argument("what", choices=LISTINGS)
    ls.add_argument("--env", default="alfworld", help="the benchmark whose task types to list (default alfworld)")
    ls.add_argument("-l", "--long", action="store_true", help="with each one's description, after a tab")
    ls.set_defaults(fn=cmd_list)
