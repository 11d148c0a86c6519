"""``workbench heads score|ablate``: retrieval heads scored on a supervision set, or masked to see what they do."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.attention import load_supervision, save_default_retrieval_heads
from workbench.attention.heads import require_registered_name
from workbench.cli._options import (
    SCORES_FILE,
    SUPERVISION_TASKS,
    add_device,
    add_dtype,
    add_head_experiment,
    add_model,
    add_out,
    add_tasks,
    heads_or_top_k,
    names_file,
    out_file,
    parse_heads,
)
from workbench.llm import LLMConfigError, get_backend
from workbench.llm.registry import list_backends
from workbench.models import load_model
from workbench.provenance import versions
from workbench.studies.head_masking_run import head_ablation
from workbench.studies.retrieval_heads import build_supervision, retrieval_heads

__all__ = ["add_parser", "cmd_heads_score", "cmd_heads_ablate"]

TEMPLATE = "template"  # the analyzer that needs no LLM: key contexts from the supervision templates


def _analyzer(a: argparse.Namespace):
    if a.analyzer == TEMPLATE:
        return TEMPLATE
    kwargs = dict(kv.split("=", 1) for kv in a.backend_arg or ())
    try:
        return get_backend(a.analyzer, **kwargs)
    except LLMConfigError as err:
        raise ValueError(f"--analyzer {a.analyzer}: {err}") from None


def _provenance(a: argparse.Namespace, n_pairs: int, sources: dict[str, int], out: Path) -> str:
    """What the committed heads file says about where its heads came from: the command that chose them."""
    what = (f"--supervision {a.supervision}" if a.supervision else
            f"--split {a.split} --tasks {a.tasks} --analyzer {a.analyzer}"
            + (f" --max-pairs {a.max_pairs}" if a.max_pairs else ""))
    return (f"`workbench heads score --model {a.model} --dtype {a.dtype} {what} --k {a.k}` (git "
            f"{versions().get('git_commit')}): the top {a.k} of every head scored on {n_pairs} "
            f"supervision pairs ({', '.join(f'{k}: {v}' for k, v in sorted(sources.items()))}); scores in {out}")


def cmd_heads_score(a: argparse.Namespace) -> int:
    """Score every head of ``a.model`` on a supervision set (built, or ``a.supervision``) and print the top ones.

    Args:
        a: the parsed ``workbench heads score`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    if a.save_default:  # refused before the model loads and the scoring runs
        require_registered_name(a.model)
    legacy = names_file(a.out, (".json",))
    out = out_file(a.out, SCORES_FILE, "heads score", (".json",))
    runs = Path(a.runs) if a.runs else (out.parent / f"{out.stem}-runs" if legacy else out.parent / "runs")
    lm = load_model(a.model, dtype=a.dtype)
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
        report["saved_default"] = str(save_default_retrieval_heads(
            lm.name, scores.top_k(a.k), _provenance(a, scores.n_pairs, sources, out), replace=a.replace))
    print(json.dumps(report))
    return 0


def cmd_heads_ablate(a: argparse.Namespace) -> int:
    """Teacher forcing (and episodes) with the top-k, or random-k, heads masked, beside unmasked baselines.

    Args:
        a: the parsed ``workbench heads ablate`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    heads = parse_heads(a)  # a malformed head fails before the model loads
    lm = load_model(a.model, dtype=a.dtype)
    result = head_ablation(lm, heads_or_top_k(heads, a, lm.name), a.split, a.tasks, a.out,
                           episode_tasks=a.episode_tasks, max_steps=a.max_steps, n_random=a.n_random, seed=a.seed,
                           baselines=tuple(a.baselines))
    print(json.dumps({"model": lm.name, "summary": result.summary(), **result.metrics()}))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench heads score`` and ``workbench heads ablate``."""
    h = sub.add_parser("heads", help="retrieval heads: score them on a supervision set, or ablate them")
    hs = h.add_subparsers(dest="heads_command", required=True)

    sc = hs.add_parser("score", help="build the retrieval supervision set of a split and score every head")
    add_model(sc)
    add_dtype(sc)
    add_device(sc)
    sc.add_argument("--split", default="valid_seen")
    add_tasks(sc, SUPERVISION_TASKS, "the tasks the supervision set is built from")
    sc.add_argument("--supervision", help="score this supervision JSONL instead of building one")
    sc.add_argument("--analyzer", default=TEMPLATE, choices=(TEMPLATE, *list_backends()),
                    help="what finds each pair's key context: template (no LLM), or an LLM backend "
                    "(`workbench list backends`) (default: template)")
    sc.add_argument("--backend-arg", action="append", metavar="KEY=VALUE",
                    help="an argument of the --analyzer backend (repeatable)")
    sc.add_argument("--max-pairs", type=int)
    sc.add_argument("--k", type=int, default=5, help="top heads to report")
    sc.add_argument("--runs", help="cache folder for teacher forcing and the supervision set (default: OUT/runs)")
    add_out(sc, f"writes {SCORES_FILE} there (a path ending in .json: that file, the older form, with its cache "
            "beside it in <stem>-runs)", file_suffixes=(".json",))
    sc.add_argument("--save-default", action="store_true",
                    help="also make the top --k the model's committed retrieval heads (assets/heads/<model>.json), "
                         "which refine, utilization and the explorers use when no heads are passed")
    sc.add_argument("--replace", action="store_true", help="with --save-default: overwrite other committed heads")
    sc.set_defaults(fn=cmd_heads_score)

    ab = hs.add_parser("ablate", help="ICL / Traj / Traj with top-k or random-k heads masked (Figure 2)")
    add_head_experiment(ab, heads_help="heads to mask")
    ab.add_argument("--n-random", type=int, default=3)
    ab.add_argument("--seed", type=int, default=0)
    ab.add_argument("--baselines", nargs="+", default=["none", "icl"], help="unmasked reference arms: none icl")
    add_out(ab, "per-arm cache and ablation.json")
    ab.set_defaults(fn=cmd_heads_ablate)
