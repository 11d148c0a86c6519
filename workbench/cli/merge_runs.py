"""``workbench merge-runs``: runs of disjoint task slices (the same configuration) merged into one run folder."""

from __future__ import annotations

import argparse

from workbench.cli._options import ALL_TASKS, add_out, add_tasks, print_summary
from workbench.eval.merge import merge_runs

__all__ = ["add_parser", "cmd_merge_runs"]


def cmd_merge_runs(a: argparse.Namespace) -> int:
    """Merge ``a.parts`` into ``a.out`` (episodes and teacher forcing) and print the merged summary.

    Args:
        a: the parsed ``workbench merge-runs`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    print_summary(merge_runs(a.parts, a.out, tasks=a.tasks, allow_partial=a.allow_partial))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench merge-runs``."""
    m = sub.add_parser("merge-runs", help="merge runs of disjoint task slices (same configuration) into one run, "
                       "teacher_forced.json too")
    m.add_argument("parts", nargs="+", metavar="RUN_DIR",
                   help="run folders, e.g. runs/even runs/odd (played with --tasks 0:134:2, 1:134:2)")
    add_tasks(m, ALL_TASKS, "the slice their union covers")
    add_out(m, "the merged run")
    m.add_argument("--allow-partial", action="store_true", help="merge even if some tasks have no episode yet")
    m.set_defaults(fn=cmd_merge_runs)
