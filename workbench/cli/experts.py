"""``workbench experts``: expert trajectories of a split (planner replay or handcoded search) as one JSONL file."""

from __future__ import annotations

import argparse
import json

from workbench.cli._options import ALL_TASKS, add_out, add_tasks, out_file
from workbench.envs import expert_trajectories, load_alfworld_tasks
from workbench.envs.selection import parse_task_slice
from workbench.memory.trajectory import write_jsonl

__all__ = ["add_parser", "cmd_experts"]


def cmd_experts(a: argparse.Namespace) -> int:
    """Build the expert trajectories of ``a.split``'s ``a.tasks`` and write them to ``OUT/<kind>_<split>.jsonl``.

    Args:
        a: the parsed ``workbench experts`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    # named as the packaged sets are (assets/alfworld/handcoded_valid_train.jsonl), so --out there writes that one
    path = out_file(a.out, f"{a.kind}_{a.split}.jsonl", "experts", (".jsonl",))
    tasks = load_alfworld_tasks(a.split)
    tasks = [tasks[i] for i in parse_task_slice(a.tasks, len(tasks))]
    trajs, report = expert_trajectories(tasks, kind=a.kind, tries=a.tries)
    write_jsonl(path, trajs)
    print(json.dumps(report | {"split": a.split, "out": str(path)}))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench experts``."""
    e = sub.add_parser("experts", help="expert trajectories of a split (planner replay or handcoded search)")
    e.add_argument("--split", default="valid_train")
    add_tasks(e, ALL_TASKS, "the tasks to build trajectories of")
    e.add_argument("--kind", default="planner", help="planner | handcoded (default: planner)")
    e.add_argument("--tries", type=int, default=3, help="handcoded: seeded runs per game (default: 3)")
    add_out(e, "writes <kind>_<split>.jsonl there (a path ending in .jsonl: that file, the older form)",
            file_suffixes=(".jsonl",))
    e.set_defaults(fn=cmd_experts)
