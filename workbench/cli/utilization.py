"""``workbench utilization``: C (how much the retrieval heads attend to the memory) per task, and the
segment-masking test (Figure 3)."""

from __future__ import annotations

import argparse
import json

from workbench.cli._options import (
    add_head_experiment,
    add_out,
    heads_or_top_k,
    parse_heads,
)
from workbench.models import load_model
from workbench.studies.segment_masking_run import segment_masking

__all__ = ["add_parser", "cmd_utilization"]

# --carriers is this command's own switch (the library takes carrier_heads="all" or None), not a registry
CARRIERS = {"none": None, "all": "all"}


def cmd_utilization(a: argparse.Namespace) -> int:
    """Record C for each teacher-forced (and episode) step, mask segments, and print the summary.

    Args:
        a: the parsed ``workbench utilization`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    heads = parse_heads(a)  # a malformed head fails before the model loads
    lm = load_model(a.model, dtype=a.dtype)
    result, records = segment_masking(lm, heads_or_top_k(heads, a, lm.name), a.split, a.tasks, a.out,
                                      episode_tasks=a.episode_tasks, max_steps=a.max_steps, fraction=a.fraction,
                                      carrier_heads=CARRIERS[a.carriers])
    print(json.dumps({"model": lm.name, "n_records": len(records), "summary": result.summary(), **result.metrics(),
                      "utilization": f"{a.out}/utilization.jsonl"}))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench utilization``."""
    u = sub.add_parser("utilization", help="C per task with the retrieval heads + the segment-masking test (Figure 3)")
    add_head_experiment(u, heads_help="retrieval heads")
    u.add_argument("--fraction", type=float, default=0.2, help="the share of segments masked (default: 0.2)")
    u.add_argument("--carriers", default="none", choices=tuple(CARRIERS),
                   help="all: keep the top heads per segment and step (default: none)")
    add_out(u, "utilization.jsonl and segment_masking.json")
    u.set_defaults(fn=cmd_utilization)
