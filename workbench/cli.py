"""``workbench run | sweep | refine | memory | merge-runs | experts | reproduce | heads | utilization | dagger``: the
command line over the library."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from workbench.models.registry import DEFAULT_AGENT

__all__ = ["main"]

MODEL_HELP = (f"a registered name ({DEFAULT_AGENT}: the default agent; smollm2-135m-alfworld: agent v1, "
              "behaviour-cloned on expert states; smollm2-135m-instruct: the untrained model), a local HF folder, "
              "or an id in the HF cache")
_SUMMARY = ("n_episodes", "success_rate", "avg_steps", "memory_tokens")  # what run / merge-runs print


def _cmd_run(a: argparse.Namespace) -> int:
    from workbench.eval.runner import RunConfig, run

    cfg = RunConfig(
        out=a.out, env=a.env, split=a.split, tasks=a.tasks, memory=a.memory, model=a.model,
        retriever=a.retriever, max_steps=a.max_steps, task_types=tuple(a.task_types or ()),
        teacher_forcing=not a.no_teacher_forcing, decode=a.decode, dtype=a.dtype,
        teacher_forcing_tasks=a.teacher_forcing_tasks, budget=a.budget, ablation=a.ablation,
        backend=a.backend, backend_args=tuple(a.backend_arg or ()), interval=a.interval,
        triggers=tuple(a.trigger or ()), record_admissible=a.record_admissible, memory_base=a.memory_base,
    )
    if a.adopt_from:
        from workbench.eval.runner import adopt

        ids, by_memory = adopt(cfg, a.adopt_from)
        print(f"{len(ids)} episodes adopted from {a.adopt_from}" + (" (the same memory)" if by_memory else ""),
              file=sys.stderr)
    metrics = run(cfg, resume=a.resume or bool(a.adopt_from), workers=a.workers, ray_address=a.ray_address)
    print(json.dumps({k: metrics[k] for k in _SUMMARY} | {"teacher_forced": metrics.get("teacher_forced")}))
    return 0


def _cmd_sweep(a: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.eval.sweep import load_grid, parse_overrides, run_sweep, state_path

    grid = load_grid(a.grid, out=a.out, overrides=parse_overrides(a.set))
    if a.dry_run:
        for cfg in grid.configs:
            print(json.dumps({"name": Path(cfg.out).name, **cfg.identity()}))
        return 0
    if a.status:
        from workbench.eval.sweep_status import format_status, sweep_status

        print(format_status(sweep_status(grid)))
        return 0
    report = run_sweep(grid, workers=a.workers, ray_address=a.ray_address, only=a.only, adopt_from=a.adopt_from)
    for cfg in grid.configs:
        m = report.metrics.get(cfg.out)
        if m is not None:
            print(json.dumps({"name": Path(cfg.out).name} | {k: m[k] for k in _SUMMARY if k in m}
                             | {"teacher_forced": (m.get("teacher_forced") or {}).get("accuracy")}))
    print(json.dumps({"wall_s": report.wall_s, "played": report.jobs, "replayed": report.replayed,
                      "worker_peak_rss_mib": report.workers, "sweep": str(state_path(grid))}))
    return 0


def _cmd_merge_runs(a: argparse.Namespace) -> int:
    from workbench.eval.merge import merge_runs

    metrics = merge_runs(a.parts, a.out, tasks=a.tasks, allow_partial=a.allow_partial)
    summary = {k: metrics[k] for k in _SUMMARY if k in metrics}
    print(json.dumps(summary | {"teacher_forced": metrics.get("teacher_forced")}))
    return 0


def _cmd_experts(a: argparse.Namespace) -> int:
    from workbench.envs import expert_trajectories, load_alfworld_tasks
    from workbench.envs.selection import parse_task_slice
    from workbench.memory.trajectory import write_jsonl

    tasks = load_alfworld_tasks(a.split)
    tasks = [tasks[i] for i in parse_task_slice(a.tasks, len(tasks))]
    trajs, report = expert_trajectories(tasks, kind=a.kind, tries=a.tries)
    write_jsonl(a.out, trajs)
    print(json.dumps(report | {"split": a.split}))
    return 0


def _cmd_reproduce(a: argparse.Namespace) -> int:
    from workbench.reporting.reproduce import reproduce

    reproduce(profile=a.profile, reports=a.reports, notebooks=a.notebooks, dtype=a.dtype,
              stall_minutes=a.stall_minutes)
    return 0


def _analyzer(a: argparse.Namespace):
    if a.analyzer == "template":
        return "template"
    from workbench.llm import LLMConfigError, get_backend

    kwargs = dict(kv.split("=", 1) for kv in a.backend_arg or ())
    try:
        return get_backend(a.analyzer, **kwargs)
    except LLMConfigError as err:
        raise ValueError(f"--analyzer {a.analyzer}: {err}") from None


def _parse_heads(a: argparse.Namespace) -> list[tuple[int, int]] | None:
    """Heads of ``--heads L.H ...`` (None: take them from ``--scores``); checked before any model loads."""
    if a.heads:
        try:
            heads = [tuple(int(x) for x in h.split(".")) for h in a.heads]
        except ValueError:
            heads = []
        if any(len(h) != 2 for h in heads) or not heads:
            raise ValueError(f"--heads {' '.join(a.heads)}: write each head as LAYER.HEAD, e.g. 13.6")
        return heads
    if not a.scores:
        raise ValueError("pass --scores (a head_scores.json from `workbench heads score`) or --heads LAYER.HEAD ...")
    return None


def _heads_arg(heads: list[tuple[int, int]] | None, a: argparse.Namespace, lm) -> list[tuple[int, int]]:
    """The parsed ``--heads``, or the top ``--k`` of ``--scores`` (which must belong to ``lm``)."""
    if heads is not None:
        return heads
    from workbench.attention import HeadScores

    return HeadScores.load(a.scores, model_name=lm.name).top_k(a.k)


def _cmd_heads_score(a: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.studies.retrieval_heads import build_supervision, retrieval_heads
    from workbench.attention import load_supervision
    from workbench.models import load_model

    if a.save_default:  # refused before the model loads and the scoring runs
        from workbench.attention.heads import require_registered_name

        require_registered_name(a.model)
    lm = load_model(a.model, dtype=a.dtype)
    out = Path(a.out)
    runs = Path(a.runs) if a.runs else out.parent / f"{out.stem}-runs"
    if a.supervision:
        records = load_supervision(a.supervision)
    else:
        records = build_supervision(lm, a.split, a.tasks, runs, analyzer=_analyzer(a), max_pairs=a.max_pairs)
    scores = retrieval_heads(lm, records, runs)
    scores.save(out, top=max(a.k, 10))
    sources = {s: sum(r.source == s for r in records) for s in {r.source for r in records}}
    report = {"model": lm.name, "n_pairs": scores.n_pairs, "sources": sources, "top_heads": scores.top_k(a.k),
              "out": str(out), "supervision": str(runs / "supervision.jsonl")}
    if a.save_default:
        from workbench.attention import save_default_retrieval_heads
        from workbench.provenance import versions

        what = (f"--supervision {a.supervision}" if a.supervision else
                f"--split {a.split} --tasks {a.tasks} --analyzer {a.analyzer}"
                + (f" --max-pairs {a.max_pairs}" if a.max_pairs else ""))
        source = (f"`workbench heads score --model {a.model} --dtype {a.dtype} {what} --k {a.k}` (git "
                  f"{versions().get('git_commit')}): the top {a.k} of every head scored on {scores.n_pairs} "
                  f"supervision pairs ({', '.join(f'{k}: {v}' for k, v in sorted(sources.items()))}); scores in {out}")
        report["saved_default"] = str(save_default_retrieval_heads(lm.name, scores.top_k(a.k), source,
                                                                   replace=a.replace))
    print(json.dumps(report))
    return 0


def _cmd_heads_ablate(a: argparse.Namespace) -> int:
    from workbench.studies.head_masking_run import head_ablation
    from workbench.models import load_model

    heads = _parse_heads(a)
    lm = load_model(a.model, dtype=a.dtype)
    result = head_ablation(lm, _heads_arg(heads, a, lm), a.split, a.tasks, a.out, episode_tasks=a.episode_tasks,
                           max_steps=a.max_steps, n_random=a.n_random, seed=a.seed, baselines=tuple(a.baselines))
    print(json.dumps({"model": lm.name, "summary": result.summary(), **result.metrics()}))
    return 0


def _cmd_utilization(a: argparse.Namespace) -> int:
    from workbench.studies.segment_masking_run import segment_masking
    from workbench.models import load_model

    if a.carriers not in ("none", "all"):
        raise ValueError(f"--carriers {a.carriers}: expected none or all")
    heads = _parse_heads(a)
    lm = load_model(a.model, dtype=a.dtype)
    carriers = "all" if a.carriers == "all" else None
    result, records = segment_masking(lm, _heads_arg(heads, a, lm), a.split, a.tasks, a.out,
                                      episode_tasks=a.episode_tasks,
                                      max_steps=a.max_steps, fraction=a.fraction, carrier_heads=carriers)
    print(json.dumps({"model": lm.name, "n_records": len(records), "summary": result.summary(), **result.metrics(),
                      "utilization": f"{a.out}/utilization.jsonl"}))
    return 0


def _head_experiment_args(p: argparse.ArgumentParser, tasks: str, heads_help: str) -> None:
    """The options `heads ablate` and `utilization` share: the model, its tasks, and which heads."""
    p.add_argument("--model", default=DEFAULT_AGENT, help=MODEL_HELP)
    _dtype_arg(p)
    p.add_argument("--split", default="valid_unseen")
    p.add_argument("--tasks", default=tasks, help="teacher-forced tasks (slice)")
    p.add_argument("--episode-tasks", default="", help="episode tasks (slice; empty: teacher forcing only)")
    p.add_argument("--max-steps", type=int, default=50)
    p.add_argument("--scores", help="head_scores.json of this model")
    p.add_argument("--heads", nargs="*", help=f"{heads_help} as LAYER.HEAD (instead of the top --k of --scores)")
    p.add_argument("--k", type=int, default=5)


def _dtype_arg(p: argparse.ArgumentParser) -> None:
    from workbench.eval.runner import DTYPES

    p.add_argument("--dtype", default="float32", choices=DTYPES, help="the model's weights and activations")


def _executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, help="play episodes in N worker processes (one torch thread and one "
                   "loaded model each; a local Ray instance, started and stopped here, unless --ray-address)")
    p.add_argument("--ray-address", help="run the workers on this existing Ray cluster (HOST:PORT or auto); "
                   "with --workers N, N of them (default: one per cluster CPU)")


def _cmd_dagger(a: argparse.Namespace) -> int:
    from workbench.training.dagger import compare_iterations, label_iteration, run_rollouts

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


def _cmd_refine(a: argparse.Namespace) -> int:
    from workbench.methods.agmr import RefineConfig, refine

    heads: tuple = ()
    if a.heads or a.scores:
        parsed = _parse_heads(a)
        if parsed is None:
            from workbench.attention import HeadScores

            parsed = HeadScores.load(a.scores, model_name=a.model).top_k(a.k)
        heads = tuple(tuple(h) for h in parsed)
    cfg = RefineConfig(split=a.split, tasks=a.tasks, model=a.model, dtype=a.dtype, heads=heads, backend=a.backend,
                       backend_args=tuple(a.backend_arg or ()), variant=a.variant, max_attempts=a.max_attempts,
                       reward_gain=a.reward_gain, weak_rule=a.weak_rule, retriever=a.retriever,
                       max_steps=a.max_steps, source=a.base)
    stats = refine(cfg, a.base_out)
    print(json.dumps({k: v for k, v in stats.items() if k not in ("config", "source")} | {"base": a.base_out}))
    return 0


def _open_store(folder: str):
    from pathlib import Path

    from workbench.memory import MemoryBase

    if not (Path(folder) / "entries.jsonl").exists():
        raise FileNotFoundError(f"{folder}: no memory base there (no entries.jsonl)")
    return MemoryBase(folder)


def _entry_of(store, entry_id: str):
    try:
        return store.get(entry_id)
    except KeyError as e:
        raise ValueError(str(e).strip("'\"")) from None


def _cmd_memory(a: argparse.Namespace) -> int:
    from workbench.memory import entry_diff

    store = _open_store(a.base)
    if a.action == "stats":
        from workbench.methods.agmr import refine_stats

        print(json.dumps(refine_stats(a.base), indent=1))
        return 0
    if a.action == "log":
        if a.entry:
            _entry_of(store, a.entry)
        for r in store.commits():
            if a.entry and r.entry_id != a.entry:
                continue
            p = r.provenance
            print(json.dumps({"entry": r.entry_id, "version": r.version, "reason": r.reason, "time": r.timestamp,
                              "task": p.get("refinement_task"), "branch": p.get("branch"),
                              "pattern": p.get("pattern"), "rule_pattern": p.get("rule_pattern"),
                              "verification": p.get("verification"), "rollback_to": p.get("rollback_to")}))
        return 0
    if not a.entry:
        raise ValueError(f"memory {a.action}: name the entry (workbench memory {a.action} DIR ENTRY_ID; "
                         "`workbench memory log DIR` lists the refined ones)")
    current = _entry_of(store, a.entry)
    if a.action == "diff":
        versions = [r.version for r in store.history(a.entry)]
        new_v = current.version if a.to is None else a.to
        old_v = a.from_ if a.from_ is not None else max([v for v in versions if v < new_v], default=new_v)
        try:
            old, new = store.at_version(a.entry, old_v), store.at_version(a.entry, new_v)
        except KeyError as e:
            raise ValueError(str(e).strip("'\"")) from None
        print(entry_diff(old, new) or f"{a.entry}: versions {old_v} and {new_v} are the same")
        return 0
    versions = [r.version for r in store.history(a.entry)]
    to = a.to if a.to is not None else max([v for v in versions if v < current.version], default=current.version)
    try:
        stored = store.rollback(a.entry, to, reason=f"rollback to version {to} (workbench memory rollback)")
    except KeyError as e:
        raise ValueError(str(e).strip("'\"")) from None
    print(json.dumps({"entry": a.entry, "rolled_back_to": to, "version": stored.version}))
    return 0


def _cmd_proactive_sft(a: argparse.Namespace) -> int:
    from workbench.eval.runner import load_run
    from workbench.methods.proactive import export_sft

    trajs = [t for run in a.runs for t in load_run(run)[0]]
    print(json.dumps(export_sft(trajs, a.out) | {"out": a.out}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="workbench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run an agent on a benchmark split; writes trajectories/metrics/config")
    r.add_argument("--env", default="alfworld")
    r.add_argument("--split", default="valid_unseen")
    r.add_argument("--tasks", default="0:20", help="slice of the split's sorted tasks: 0:20, 10:, all; none: no "
                   "episodes (teacher forcing only, of --teacher-forcing-tasks)")
    r.add_argument("--task-types", nargs="*", help="pick look clean heat cool pick_two")
    r.add_argument("--memory", default="traj",
                   help="none | icl | traj | arbiter | flat-recency | flat-retrieval | proactive | proactive-passive | "
                   "proactive-always | proactive-advisor | proactive-retrieval | awm | dc-rs; the memory controls "
                   "other_type (another task type's trajectory) | random_same (a random same-type one)")
    r.add_argument("--budget", type=int, help="memory block budget in o200k tokens (arbiter, flat-*; default 500)")
    r.add_argument("--ablation", help="a MemArbiter ablation: no-banks | no-signals | no-gate")
    r.add_argument("--backend", help="LLM backend of a method's memory stages: the arbiter's state parser and "
                   "writer, the proactive memory agent, AWM's induction, DC-RS's curator (default offline-alfworld: the deterministic ALFWorld "
                   "algorithms; openai; local)")
    r.add_argument("--record-admissible", action="store_true",
                   help="keep each step's admissible commands in the records (on-policy training data)")
    r.add_argument("--interval", type=int, help="the proactive memory agent runs every K steps (default 1)")
    r.add_argument("--trigger", action="append", metavar="EVENT",
                   help="an extra trigger of the memory agent: failed | repeated | new-location (repeatable)")
    r.add_argument("--backend-arg", action="append", metavar="KEY=VALUE",
                   help="an argument of --backend, e.g. base_url=http://127.0.0.1:8080/v1 (repeatable)")
    r.add_argument("--model", default=DEFAULT_AGENT, help=MODEL_HELP)
    r.add_argument("--retriever", default="minilm", help="minilm | bm25")
    r.add_argument("--memory-base", metavar="DIR", help="the memory base icl / traj / awm / dc-rs read (e.g. one `workbench "
                   "refine` wrote); default: the valid_train expert trajectories")
    r.add_argument("--adopt-from", metavar="RUN_DIR", help="take the episodes RUN_DIR already played with the same "
                   "parameters (teacher forcing and the slice aside) instead of playing them; over another memory "
                   "base, those whose memory is the same at every step (e.g. Traj's, for a refined base); then "
                   "play the rest (implies --resume)")
    r.add_argument("--max-steps", type=int, default=50)
    r.add_argument("--out", required=True)
    r.add_argument("--resume", action="store_true", help="continue a killed run: skips finished episodes")
    r.add_argument("--no-teacher-forcing", action="store_true")
    r.add_argument("--teacher-forcing-tasks", metavar="SLICE", help="teacher-force this slice instead of --tasks")
    from workbench.agents.loop import DECODES

    r.add_argument("--decode", default="score", choices=DECODES,
                   help="score: the admissible command of highest likelihood (default) | generate: write "
                        "Thought/Action, mapped to an admissible command | generate-verbatim: write it and execute "
                        "it as written (an invalid command is answered 'Nothing happens.', as in the papers)")
    _dtype_arg(r)
    _executor_args(r)
    r.set_defaults(fn=_cmd_run)

    sw = sub.add_parser("sweep", help="an experiment grid (configurations x tasks) as one job list over the same "
                        "workers; each configuration writes the folder `workbench run` would; resumes")
    sw.add_argument("grid", help="GRID.yaml (see workbench.eval.sweep for the format)")
    sw.add_argument("--out", help="write into this folder instead of the grid's 'out'")
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
    _executor_args(sw)
    sw.set_defaults(fn=_cmd_sweep)

    rf = sub.add_parser("refine", help="AGMR: refine a copy of a memory base on a split's tasks (Algorithm 1: "
                        "execute, reflect, refine with C, verify by re-execution, commit or roll back); resumes")
    rf.add_argument("--split", default="valid_seen")
    rf.add_argument("--tasks", default="all", help="slice of the split's sorted tasks: 0:20, all")
    rf.add_argument("--base-out", required=True, metavar="DIR", help="the refined base (a copy; created, or resumed)")
    rf.add_argument("--base", metavar="DIR", help="the base to refine (default: valid_train expert trajectories)")
    rf.add_argument("--backend", default="offline-alfworld", help="LLM backend of the reflector and refiner "
                    "(offline-alfworld: the deterministic algorithms, which read the task's expert plan; openai; local)")
    rf.add_argument("--backend-arg", action="append", metavar="KEY=VALUE", help="an argument of --backend")
    rf.add_argument("--variant", default="agmr", help="agmr | no-agr (the reflector edits directly, no C)")
    rf.add_argument("--max-attempts", type=int, default=3, help="K, failure-branch attempts")
    rf.add_argument("--reward-gain", type=float, default=0.3, help="also accept a failure edit whose reward rises this much")
    rf.add_argument("--weak-rule", default="relative", help="relative | global_capped | global (appendix E.2)")
    rf.add_argument("--model", default=DEFAULT_AGENT, help=MODEL_HELP)
    _dtype_arg(rf)
    rf.add_argument("--scores", help="head_scores.json of this model (default: its committed retrieval heads)")
    rf.add_argument("--heads", nargs="*", help="retrieval heads as LAYER.HEAD")
    rf.add_argument("--k", type=int, default=5)
    rf.add_argument("--retriever", default="minilm")
    rf.add_argument("--max-steps", type=int, default=50)
    rf.set_defaults(fn=_cmd_refine)

    mb = sub.add_parser("memory", help="read and revert a memory base: log (commits with provenance), diff, "
                        "rollback, stats (a refinement's statistics)")
    mb.add_argument("action", choices=("log", "diff", "rollback", "stats"))
    mb.add_argument("base", metavar="DIR")
    mb.add_argument("entry", nargs="?", help="entry id (diff, rollback; log: only this entry)")
    mb.add_argument("--from", dest="from_", type=int, help="diff: the older version (default: the one before --to)")
    mb.add_argument("--to", type=int, help="diff: the newer version (default current); rollback: the version to "
                    "restore (default: the one before the current)")
    mb.set_defaults(fn=_cmd_memory)

    ps = sub.add_parser("proactive-sft", help="the proactive memory agent's records of run folders as a chat SFT set "
                        "(prompts, tool calls, reminder or null) for TRL's SFTTrainer")
    ps.add_argument("runs", nargs="+", help="run folders played with --memory proactive*")
    ps.add_argument("--out", required=True, help="JSONL file to write")
    ps.set_defaults(fn=_cmd_proactive_sft)

    dg = sub.add_parser("dagger", help="on-policy data for agent v2: roll the current agent out on valid_train "
                        "under every layout (rollout), then label each visited state with the expert (label)")
    dg.add_argument("step", choices=("rollout", "label", "compare"),
                    help="compare: this iteration's rollouts paired with --against's on the (layout, game) pairs "
                    "both played (McNemar, per layout, action patterns)")
    dg.add_argument("--iteration", type=int, required=True)
    dg.add_argument("--against", type=int, help="the iteration to compare with (compare)")
    dg.add_argument("--model", default=DEFAULT_AGENT, help="the agent to roll out (rollout)")
    dg.add_argument("--root", default="runs/dagger", help="iterations live in ROOT/it<N>")
    dg.add_argument("--games", type=int, help="the first N valid_train games only (default all 200)")
    dg.add_argument("--per-layout", metavar="K[,NAME=K]", help="the first K games of each layout's share of the "
                    "games (NAME=K: that layout's own K), e.g. 7,none=15 (default: every game)")
    _dtype_arg(dg)  # the rollouts' dtype (written into the iteration's grid.yaml)
    dg.add_argument("--decode", default="score", choices=DECODES, help="how the rolled-out agent acts (rollout): "
                    "score (among the admissible commands: no failed action) or generate-verbatim (what it writes "
                    "is executed: failed actions and the expert's recovery enter the data)")
    _executor_args(dg)
    dg.set_defaults(fn=_cmd_dagger)

    m = sub.add_parser("merge-runs", help="merge runs of disjoint task slices (same configuration) into one run, "
                         "teacher_forced.json too")
    m.add_argument("parts", nargs="+", help="run folders, e.g. runs/even runs/odd (played with --tasks 0:134:2, 1:134:2)")
    m.add_argument("--tasks", default="all", help="the slice their union covers")
    m.add_argument("--out", required=True)
    m.add_argument("--allow-partial", action="store_true", help="merge even if some tasks have no episode yet")
    m.set_defaults(fn=_cmd_merge_runs)

    e = sub.add_parser("experts", help="expert trajectories of a split (planner replay or handcoded search)")
    e.add_argument("--split", default="valid_train")
    e.add_argument("--tasks", default="all")
    e.add_argument("--kind", default="planner", help="planner | handcoded")
    e.add_argument("--tries", type=int, default=3)
    e.add_argument("--out", required=True)
    e.set_defaults(fn=_cmd_experts)

    rp = sub.add_parser("reproduce", help="run the report notebooks with papermill into reports/")
    rp.add_argument("--profile", default="default", help="default (56 min on 2 idle cores) | full | smoke")
    rp.add_argument("--reports", default="reports")
    rp.add_argument("--notebooks", nargs="*")
    rp.add_argument("--dtype", choices=("float32", "bfloat16"), help="every notebook's model dtype (default: float32)")
    rp.add_argument("--stall-minutes", type=float, default=20.0,
                    help="restart a render whose papermill, kernel and workers used no CPU this long (papermill's "
                         "lost-reply hang; every run resumes); 0: never (default: 20)")
    rp.set_defaults(fn=_cmd_reproduce)

    h = sub.add_parser("heads", help="retrieval heads: score them on a supervision set, or ablate them")
    hs = h.add_subparsers(dest="heads_command", required=True)
    sc = hs.add_parser("score", help="build the retrieval supervision set of a split and score every head")
    sc.add_argument("--model", default=DEFAULT_AGENT, help=MODEL_HELP)
    _dtype_arg(sc)
    sc.add_argument("--split", default="valid_seen")
    sc.add_argument("--tasks", default="0:40", help="slice of the split's sorted tasks: 0:40, all")
    sc.add_argument("--supervision", help="score this supervision JSONL instead of building one")
    sc.add_argument("--analyzer", default="template",
                    help="template | an LLM backend name (offline-alfworld, openai, ...)")
    sc.add_argument("--backend-arg", action="append", help="KEY=VALUE for the analyzer backend (repeatable)")
    sc.add_argument("--max-pairs", type=int)
    sc.add_argument("--k", type=int, default=5, help="top heads to report")
    sc.add_argument("--runs", help="cache folder for teacher forcing and the supervision set (default: beside --out)")
    sc.add_argument("--out", required=True, help="head scores JSON")
    sc.add_argument("--save-default", action="store_true",
                    help="also make the top --k the model's committed retrieval heads (assets/heads/<model>.json), "
                         "which refine, utilization and the explorers use when no heads are passed")
    sc.add_argument("--replace", action="store_true", help="with --save-default: overwrite other committed heads")
    sc.set_defaults(fn=_cmd_heads_score)

    ab = hs.add_parser("ablate", help="ICL / Traj / Traj with top-k or random-k heads masked (Figure 2)")
    _head_experiment_args(ab, tasks="0:20", heads_help="heads to mask")
    ab.add_argument("--n-random", type=int, default=3)
    ab.add_argument("--seed", type=int, default=0)
    ab.add_argument("--baselines", nargs="+", default=["none", "icl"], help="unmasked reference arms: none icl")
    ab.add_argument("--out", required=True, help="folder (per-arm cache, ablation.json)")
    ab.set_defaults(fn=_cmd_heads_ablate)

    u = sub.add_parser("utilization", help="C per task with the retrieval heads + the segment-masking test (Figure 3)")
    _head_experiment_args(u, tasks="0:10", heads_help="retrieval heads")
    u.add_argument("--fraction", type=float, default=0.2)
    u.add_argument("--carriers", default="none", help="none | all: keep the top heads per segment and step")
    u.add_argument("--out", required=True, help="folder (utilization.jsonl, segment_masking.json)")
    u.set_defaults(fn=_cmd_utilization)
    return p


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """The CLI. SIGTERM stops a command as Ctrl-C does (its ``finally`` blocks run: Ray workers shut down, a sweep
    records that it was interrupted; every batch resumes), and so does SIGINT even when a script started the
    command in the background (a non-interactive shell starts background jobs with SIGINT ignored, so a plain
    ``kill -INT`` would do nothing)."""
    from workbench.eval.executor import JobError
    from workbench.eval.sweep_status import ConcurrentSweepError

    args = build_parser().parse_args(argv)
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {signal.SIGTERM: signal.signal(signal.SIGTERM, _stop)}
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return args.fn(args)
    except (ValueError, FileNotFoundError, FileExistsError, JobError, ConcurrentSweepError) as e:
        print(f"workbench {args.command}: error: {e}", file=sys.stderr)
        return 2
    finally:
        for sig, old in handlers.items():
            signal.signal(sig, old)


if __name__ == "__main__":
    sys.exit(main())
