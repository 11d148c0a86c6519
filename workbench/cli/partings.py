"""``workbench partings``: where a memory method's episodes part from ReAct's, each parting state re-scored under
one edit (``workbench.studies.parting_rescore``)."""

from __future__ import annotations

import argparse
import json

from workbench.agents.edits import ClearMemory, RemoveReminder
from workbench.cli._options import add_device
from workbench.studies.parting_rescore import parting_rescores, partings

__all__ = ["add_parser", "cmd_partings", "EDITS"]

#: the edits a parting state can be re-scored under, by the name ``--edit`` takes
EDITS = {"clear-memory": ClearMemory, "remove-reminder": RemoveReminder}


def cmd_partings(a: argparse.Namespace) -> int:
    """List the partings (no ``--out``) or re-score them into ``--out`` (resumable); prints the rows as JSON lines.

    Args:
        a: the parsed ``workbench partings`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    if a.out is None:
        if a.edit is not None:
            raise ValueError("--edit re-scores the partings: give --out FILE.json to keep them in")
        rows = partings(a.method_run, a.reference_run)
        if a.task:
            unknown = sorted(set(a.task) - {r["task"] for r in rows})
            if unknown:
                raise ValueError(f"--task {', '.join(unknown)}: not a parting of {a.method_run} from "
                                 f"{a.reference_run} (its partings: {', '.join(r['task'] for r in rows) or 'none'})")
            rows = [r for r in rows if r["task"] in a.task]
    else:
        rows = parting_rescores(a.method_run, a.reference_run, edits=[EDITS[a.edit or "clear-memory"]()],
                                tasks=a.task or None, out=a.out)
    for row in rows:
        print(json.dumps(row))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench partings``."""
    p = sub.add_parser("partings", help="where a memory method's episodes part from ReAct's, re-scored under an edit",
                       description="The tasks on which a memory method's run and ReAct's (same model, dtype and "
                       "benchmark) start alike and first act differently; with --out, each parting state replayed "
                       "live and scored over all its candidates as played and under --edit (resumable: a task "
                       "already in --out is kept).")
    p.add_argument("method_run", help="the memory method's run folder (e.g. .../arbiter)")
    p.add_argument("reference_run", help="ReAct's run folder on the same tasks (memory none)")
    p.add_argument("--edit", default=None, choices=tuple(EDITS),
                   help="with --out: clear-memory (ReAct's layout, the history shown; the default) or remove-reminder "
                   "(no reminder line)")
    p.add_argument("--task", action="append", default=[], metavar="TASK_ID", help="this task only (repeatable)")
    p.add_argument("--out", default=None, metavar="FILE.json", help="re-score into this JSON file, not a folder "
                   "(resumable; without --out: list the partings only, steps 1-based)")
    add_device(p)
    p.set_defaults(fn=cmd_partings)
