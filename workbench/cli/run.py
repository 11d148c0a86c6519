"""``workbench run``: one agent, one memory policy, a slice of a split's tasks; writes a resumable run folder."""

from __future__ import annotations

import argparse
import sys

from workbench.agents.policy import list_policies
from workbench.cli._options import (
    EPISODE_TASKS,
    add_backend,
    add_decode,
    add_dtype,
    add_executor,
    add_model,
    add_out,
    add_progress,
    add_retriever,
    add_tasks,
    print_summary,
)
from workbench.envs.normalize import TASK_TYPE_PREFIXES
from workbench.eval.adoption import adopt
from workbench.eval.config import RunConfig
from workbench.eval.run import run
from workbench.locks import folder_lock
from workbench.methods.arbiter.variants import ABLATIONS
from workbench.methods.proactive.triggers import EVENTS

__all__ = ["add_parser", "cmd_run", "run_config"]

DECODE_HELP = ("how the agent acts: score, the admissible command of highest likelihood (ALFWorld's default) | "
               "generate: write Thought/Action, mapped to an admissible command | generate-verbatim: write it and "
               "execute it as written (an invalid command is answered 'Nothing happens.', as in the papers) | "
               "constrained: write it token by token along the admissible commands, a beam of 16 (ScienceWorld's "
               "default: its valid actions run to a thousand a step)")


def run_config(a: argparse.Namespace) -> RunConfig:
    """The run ``workbench run``'s options describe, with the benchmark's defaults where an option is not given
    (ScienceWorld: split test@10, the constrained decode, its own step limits, no teacher forcing)."""
    return RunConfig(
        out=a.out, env=a.env, split=a.split,
        tasks=a.tasks, memory=a.memory, model=a.model, retriever=a.retriever,
        max_steps=a.max_steps,
        task_types=tuple(a.task_types or ()),
        teacher_forcing=False if a.no_teacher_forcing else None,  # None: the benchmark's (ScienceWorld: off)
        decode=a.decode, dtype=a.dtype,
        teacher_forcing_tasks=a.teacher_forcing_tasks, budget=a.budget, ablation=a.ablation,
        backend=a.backend, backend_args=tuple(a.backend_arg or ()), interval=a.interval,
        triggers=tuple(a.trigger or ()), record_admissible=a.record_admissible, memory_base=a.memory_base,
        window=a.window,
    )


def cmd_run(a: argparse.Namespace) -> int:
    """Play (or resume) the run ``a`` describes and print its summary as one JSON line.

    Args:
        a: the parsed ``workbench run`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    cfg = run_config(a)
    with folder_lock(cfg.out):  # a second `run` on this folder refuses at once, naming this process
        if a.adopt_from:
            ids, by_memory = adopt(cfg, a.adopt_from)
            print(f"{len(ids)} episodes adopted from {a.adopt_from}" + (" (the same memory)" if by_memory else ""),
                  file=sys.stderr)
        # the bar is the driver's, as for a sweep: one tick per episode or teacher-forced task, on stderr
        metrics = run(cfg, resume=a.resume or bool(a.adopt_from), progress=a.progress, workers=a.workers,
                      ray_address=a.ray_address)
    print_summary(metrics)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench run``."""
    r = sub.add_parser("run", help="run an agent on a benchmark split; writes trajectories/metrics/config")
    r.add_argument("--env", default="alfworld", help="the benchmark: alfworld (default) | scienceworld (ETO's "
                   "protocol: the easy simplifications, step limits per task type; scienceworld:none plays it "
                   "without simplifications)")
    r.add_argument("--split", help="the split: valid_unseen (ALFWorld's default), valid_seen, valid_train | "
                   "ScienceWorld: test@10 (its default: the first 10 test variations of each type, ETO's test set), "
                   "train, dev, test, or any of them capped per type (dev@5)")
    add_tasks(r, EPISODE_TASKS, "the tasks whose episodes are played",
              "; none: no episodes (teacher forcing only, of --teacher-forcing-tasks)")
    r.add_argument("--task-types", nargs="*", metavar="TYPE",
                   help="only tasks of these types: ALFWorld's " + " ".join(dict.fromkeys(TASK_TYPE_PREFIXES.values()))
                   + "; ScienceWorld's 30 (boil, melt, find-animal ...: `workbench list task-types --env scienceworld`)")
    policies = list_policies()
    r.add_argument("--memory", default="traj", choices=policies, metavar="POLICY",
                   help=f"the memory policy (`workbench list memory`): {' | '.join(policies)}; other_type "
                   "(another task type's trajectory) and random_same (a random same-type one) are the memory "
                   "controls (default: traj)")
    r.add_argument("--budget", type=int, help="memory block budget in o200k tokens (arbiter, flat-*; default 500)")
    r.add_argument("--ablation", choices=ABLATIONS, help="a MemArbiter ablation")
    add_backend(r, help="LLM backend of a method's memory stages: the arbiter's state parser and writer, the "
                "proactive memory agent, AWM's induction, DC-RS's curator (default offline-alfworld: the "
                "deterministic ALFWorld algorithms)")
    r.add_argument("--record-admissible", action="store_true",
                   help="keep each step's admissible commands in the records (on-policy training data)")
    r.add_argument("--interval", type=int, help="the proactive memory agent runs every K steps (default 1)")
    r.add_argument("--trigger", action="append", choices=EVENTS,
                   help="an extra trigger of the memory agent (repeatable)")
    r.add_argument("--window", type=int, help="how many recent steps the proactive memory agent reads (default 8, "
                   "the authors' public configuration; the committed paper-scale runs used 10)")
    add_model(r)
    add_retriever(r)
    r.add_argument("--memory-base", metavar="DIR", help="the memory base icl / traj / awm / dc-rs read (e.g. one "
                   "`workbench refine` wrote); default: the valid_train expert trajectories")
    r.add_argument("--adopt-from", metavar="RUN_DIR", help="take the episodes RUN_DIR already played with the same "
                   "parameters (teacher forcing and the slice aside) instead of playing them; over another memory "
                   "base, those whose memory is the same at every step (e.g. Traj's, for a refined base); then "
                   "play the rest (implies --resume)")
    r.add_argument("--max-steps", type=int, help="the step limit (ALFWorld: 50; ScienceWorld: its limit per task "
                   "type, which this caps)")
    add_out(r, "the run (config.json, trajectories.jsonl, teacher_forced.json, metrics.json)")
    r.add_argument("--resume", action="store_true", help="continue a killed run: skips finished episodes")
    r.add_argument("--no-teacher-forcing", action="store_true",
                   help="play the episodes only (ScienceWorld runs never teacher-force: it would score a thousand "
                        "valid actions at every expert step)")
    r.add_argument("--teacher-forcing-tasks", metavar="SLICE",
                   help="teacher-force this slice instead of --tasks (default: --tasks)")
    add_decode(r, DECODE_HELP, default=None)
    add_dtype(r)
    add_executor(r)
    add_progress(r)
    r.set_defaults(fn=cmd_run)
