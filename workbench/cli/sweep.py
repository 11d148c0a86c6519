"""``workbench sweep GRID.yaml``: an experiment grid (configurations x tasks) as one job list over the same
workers; each configuration writes the folder ``workbench run`` would, and a sweep resumes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.cli._options import add_executor, add_out, add_progress, print_summary
from workbench.eval.sweep import load_grid, parse_overrides, run_sweep, state_path
from workbench.eval.sweep_status import format_status, sweep_status

__all__ = ["add_parser", "cmd_sweep"]


def cmd_sweep(a: argparse.Namespace) -> int:
    """Check, show (``--dry-run``, ``--status``) or play a grid; prints one JSON line per configuration.

    Args:
        a: the parsed ``workbench sweep`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2): a malformed grid file, ``--set`` value, sweep
        record or metrics file is a ValueError (GridError, FormatError) naming the file, the line or record and the
        key.
    """
    if a.dry_run and a.status:
        raise ValueError("--dry-run and --status: give one (--dry-run checks the grid, --status reads its folders)")
    grid = load_grid(a.grid, out=a.out, overrides=parse_overrides(a.set))  # GridError names the file and the key
    if a.dry_run:
        for cfg in grid.configs:
            print(json.dumps({"name": Path(cfg.out).name, **cfg.identity()}))
        return 0
    if a.status:
        print(format_status(sweep_status(grid)))
        return 0
    report = run_sweep(grid, workers=a.workers, ray_address=a.ray_address, only=a.only, adopt_from=a.adopt_from,
                       progress=a.progress)
    for cfg in grid.configs:
        m = report.metrics.get(cfg.out)
        if m is not None:
            print_summary(m, first={"name": Path(cfg.out).name}, accuracy_only=True)
    print(json.dumps({"wall_s": report.wall_s, "played": report.jobs, "replayed": report.replayed,
                      "worker_peak_rss_mib": report.workers, "sweep": str(state_path(grid))}))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench sweep``."""
    sw = sub.add_parser("sweep", help="an experiment grid (configurations x tasks) as one job list over the same "
                        "workers; each configuration writes the folder `workbench run` would; resumes")
    sw.add_argument("grid", help="GRID.yaml (see workbench.eval.sweep for the format; `workbench list grids`)")
    add_out(sw, "write into this folder instead of the grid's 'out'", required=False)
    sw.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a run field on every configuration "
                    "(over the grid's values), e.g. --set model=smollm2-135m-alfworld-v2 (repeatable; give --out too)")
    sw.add_argument("--only", nargs="+", metavar="NAME", help="play only these configurations now")
    sw.add_argument("--adopt-from", metavar="ROOT", help="copy in the episodes that ROOT/<model>/<name> already "
                    "played with the same parameters (e.g. runs/full-bfloat16/01_baselines for a grid's `none`) "
                    "instead of playing them again; recorded in each folder's config.json")
    sw.add_argument("--dry-run", action="store_true", help="check the grid and print its configurations")
    sw.add_argument("--status", action="store_true",
                    help="where each configuration stands (tasks, played, solved, complete, the live sweep playing it, "
                         "its ETA); plays nothing")
    add_executor(sw)
    add_progress(sw)
    sw.set_defaults(fn=cmd_sweep)
