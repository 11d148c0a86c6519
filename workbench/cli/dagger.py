"""``workbench dagger rollout|label|compare``: on-policy data for agent v2 (roll the current agent out on
valid_train under every layout, label each visited state with the expert, compare two iterations)."""

from __future__ import annotations

import argparse
import json

from workbench.cli._options import (
    MODEL_HELP,
    add_decode,
    add_dtype,
    add_executor,
    add_model,
    add_out,
)
from workbench.training.dagger import compare_iterations, label_iteration, run_rollouts

__all__ = ["add_parser", "cmd_dagger"]

STEPS = ("rollout", "label", "compare")


def cmd_dagger(a: argparse.Namespace) -> int:
    """Run one DAgger step on iteration ``a.iteration`` under ``a.root`` and print its report.

    Args:
        a: the parsed ``workbench dagger`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    if a.step == "compare":
        if a.against is None:
            raise SystemExit("workbench dagger compare: --against N names the iteration to pair with --iteration")
        print(json.dumps(compare_iterations(a.root, a.against, a.iteration), indent=1))
    elif a.step == "rollout":
        print(json.dumps(run_rollouts(a.root, a.iteration, a.model, workers=a.workers, ray_address=a.ray_address,
                                      n_games=a.games, per_layout=a.per_layout, dtype=a.dtype, decode=a.decode)))
    else:
        print(json.dumps(label_iteration(a.root, a.iteration)))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench dagger``."""
    dg = sub.add_parser("dagger", help="on-policy data for agent v2: roll the current agent out on valid_train "
                        "under every layout (rollout), then label each visited state with the expert (label)")
    dg.add_argument("step", choices=STEPS,
                    help="compare: this iteration's rollouts paired with --against's on the (layout, game) pairs "
                    "both played (McNemar, per layout, action patterns)")
    dg.add_argument("--iteration", type=int, required=True)
    dg.add_argument("--against", type=int, help="the iteration to compare with (compare)")
    add_model(dg, help=f"the agent to roll out (rollout): {MODEL_HELP}, or an iteration's adapter folder "
              "(e.g. runs/dagger/it0/adapter)")
    add_out(dg, "iterations live in OUT/it<N> (rollout writes them, label and compare read them)", "--root",
            default="runs/dagger")
    dg.add_argument("--games", type=int, help="the first N valid_train games only (default all 200)")
    dg.add_argument("--per-layout", metavar="K[,NAME=K]", help="the first K games of each layout's share of the "
                    "games (NAME=K: that layout's own K), e.g. 7,none=15 (default: every game)")
    add_dtype(dg, help="the rollouts' dtype (written into the iteration's grid.yaml)")
    add_decode(dg, help="how the rolled-out agent acts (rollout): score (among the admissible commands: no failed "
               "action) or generate-verbatim (what it writes is executed: failed actions and the expert's "
               "recovery enter the data)")
    add_executor(dg)
    dg.set_defaults(fn=cmd_dagger)
