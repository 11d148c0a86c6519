"""``workbench refine``: AGMR's Algorithm 1 on a copy of a memory base (execute, reflect, refine with C, verify
by re-execution, commit or roll back); resumable."""

from __future__ import annotations

import argparse
import json

from workbench.cli._options import (
    ALL_TASKS,
    add_backend,
    add_device,
    add_dtype,
    add_heads,
    add_model,
    add_out,
    add_retriever,
    add_tasks,
    heads_or_top_k,
    parse_heads,
)
from workbench.llm.registry import OFFLINE_BACKEND
from workbench.methods.agmr import refine
from workbench.methods.agmr.refine_config import VARIANTS, RefineConfig

__all__ = ["add_parser", "cmd_refine"]


def cmd_refine(a: argparse.Namespace) -> int:
    """Refine (or resume refining) into ``a.base_out`` and print the refinement's statistics.

    Args:
        a: the parsed ``workbench refine`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    heads: tuple = ()  # none given: the model's committed retrieval heads
    if a.heads is not None or a.scores:  # a bare --heads is an error (parse_heads), not the committed heads
        heads = tuple(tuple(h) for h in heads_or_top_k(parse_heads(a), a, a.model))
    cfg = RefineConfig(split=a.split, tasks=a.tasks, model=a.model, dtype=a.dtype, heads=heads, backend=a.backend,
                       backend_args=tuple(a.backend_arg or ()), variant=a.variant, max_attempts=a.max_attempts,
                       reward_gain=a.reward_gain, weak_rule=a.weak_rule, retriever=a.retriever,
                       max_steps=a.max_steps, source=a.base, reflector_sees_plan=a.reflector_sees_plan, env=a.env,
                       task_types=tuple(a.task_types or ()))
    stats = refine(cfg, a.base_out, adopt_from=a.adopt_executions_from)
    print(json.dumps({k: v for k, v in stats.items() if k not in ("config", "source")} | {"base": a.base_out}))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench refine``."""
    rf = sub.add_parser("refine", help="AGMR: refine a copy of a memory base on a split's tasks (Algorithm 1: "
                        "execute, reflect, refine with C, verify by re-execution, commit or roll back); resumes")
    rf.add_argument("--env", default="alfworld", help="the benchmark: alfworld (default) | scienceworld (needs an "
                    "LLM --backend; refines on dev@2 by default, never on test)")
    rf.add_argument("--split", help="the refinement split (ALFWorld: valid_seen; ScienceWorld: dev@2, or train@N)")
    add_tasks(rf, ALL_TASKS, "the tasks to refine on")
    rf.add_argument("--task-types", nargs="*", metavar="TYPE", help="only the split's tasks of these types (before "
                    "--tasks slices them): `workbench list task-types --env ENV`")
    add_out(rf, "the refined base (a copy; created, or resumed)", "--base-out")
    rf.add_argument("--base", metavar="DIR", help="the base to refine (default: valid_train expert trajectories)")
    add_backend(rf, default=OFFLINE_BACKEND, help="LLM backend of the reflector and refiner (offline-alfworld, the "
                "default: the deterministic algorithms)")
    rf.add_argument("--reflector-sees-plan", action="store_true",
                    help="show the reflector the refinement task's expert plan (the offline reflector then localises "
                    "the error with the plan-tracking oracle); default: the paper's reflector, which sees the memory "
                    "and the trajectory only. Recorded in the base's config and every commit's provenance")
    rf.add_argument("--adopt-executions-from", metavar="DIR",
                    help="another refinement's --base-out (same agent, dtype, heads, split, step limit, played on the "
                    "same kind of device): an episode with the same task and memory is adopted from it instead of "
                    "played (marked adopted_from); the result is the same, only faster")
    rf.add_argument("--variant", default="agmr", choices=VARIANTS,
                    help="agmr | no-agr (the reflector edits directly, no C) (default: agmr)")
    rf.add_argument("--max-attempts", type=int, default=3, help="K, failure-branch attempts")
    rf.add_argument("--reward-gain", type=float, default=0.3,
                    help="also accept a failure edit whose reward rises this much")
    rf.add_argument("--weak-rule", help="relative | global_capped | global (appendix E.2; default: the paper's for the "
                    "benchmark, relative for ALFWorld, global_capped for ScienceWorld)")
    add_model(rf)
    add_dtype(rf)
    add_device(rf)
    add_heads(rf, "retrieval heads", neither=" (neither --scores nor --heads: its committed retrieval heads)")
    add_retriever(rf)
    rf.add_argument("--max-steps", type=int, help="the step limit (ALFWorld: 50; ScienceWorld: its limits per type)")
    rf.set_defaults(fn=cmd_refine)
