"""``workbench llm-stages``: the methods' LLM stages measured on a model -- recorded stage inputs replayed with and
without schema constraints (``replay``), and the failure-pattern judge against the rule (``judge``); resumable JSONL
records, and the tables of both plus the stage calls of refinements and runs played with a model (``table``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.cli._options import add_backend
from workbench.files import present
from workbench.llm.registry import get_backend
from workbench.memory.trajectory import append_jsonl, cut_torn_tail, iter_jsonl_dicts
from workbench.studies.llm_stages import latest

__all__ = ["add_parser", "cmd_replay", "cmd_judge", "cmd_table"]

#: Backends with a ``constrain`` argument (schema-constrained decoding on or off).
CONSTRAINABLE = ("llama-server", "local")


def _backend(a: argparse.Namespace, extra: tuple[str, ...] = ()):
    args = dict(kv.split("=", 1) for kv in (*(a.backend_arg or ()), *extra))
    return get_backend(a.backend, **args)


def _done(path: Path, key: tuple[str, ...]) -> set[tuple]:
    """The keys already answered (a failed call, the server gone, is asked again)."""
    if not present(path):
        return set()
    cut_torn_tail(path)
    return {tuple(d.get(k) for k in key) for d in latest(iter_jsonl_dicts(path), key) if d.get("fate") != "failed"}


def cmd_replay(a: argparse.Namespace) -> int:
    """Replay recorded stage inputs on the backend, constrained and (``--unconstrained-too``) not; append records."""
    from workbench.studies.llm_stages import replay, replay_payloads, reply_table

    payloads = replay_payloads(a.refinement, a.arbiter_run, a.proactive_run, per_stage=a.per_stage)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if a.backend in CONSTRAINABLE:
        labels = [("constrained", ("constrain=true",))] + ([("unconstrained", ("constrain=false",))]
                                                            if a.unconstrained_too else [])
    elif a.unconstrained_too:
        raise ValueError(f"--unconstrained-too: backend '{a.backend}' has no constrain switch (only "
                         f"{', '.join(CONSTRAINABLE)}); for an OpenAI server pass --backend-arg response_format=none")
    else:
        labels = [(a.backend, ())]
    for label, extra in labels:
        done = _done(out, ("label", "stage", "source"))
        todo = [p for p in payloads if (label, p.stage, p.source) not in done]
        if not todo:
            continue
        backend = _backend(a, extra)
        try:
            replay(backend, todo, on_call=lambda r, lb=label: append_jsonl(out, {"label": lb, **r}))
        finally:
            getattr(backend, "close", lambda: None)()
    rows = latest(iter_jsonl_dicts(out), ("label", "stage", "source"))
    print(reply_table(rows, by=("label", "stage")).to_string())
    return 0


def cmd_judge(a: argparse.Namespace) -> int:
    """Label every failure-branch diagnosis of a refinement with the pattern judge; print its agreement with the rule."""
    from workbench.studies.llm_stages import agreement, judge, judge_payloads

    items = judge_payloads(a.refinement, first_only=a.first_only)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = _done(out, ("source",))
    todo = [it for it in items if (it[0],) not in done]
    if todo:
        backend = _backend(a)
        try:
            judge(backend, todo, on_call=lambda r: append_jsonl(out, r))
        finally:
            getattr(backend, "close", lambda: None)()
    print(json.dumps(agreement(latest(iter_jsonl_dicts(out), ("source",))), indent=1))
    return 0


def cmd_table(a: argparse.Namespace) -> int:
    """Print (or write, ``--out``) the reply table of stage calls: replay records, refinements and runs."""
    from workbench.studies.llm_stages import refinement_calls, reply_table, run_calls

    rows: list[dict] = []
    for f in a.replay or ():
        rows += [{**d, "source_of": "replay"} for d in latest(iter_jsonl_dicts(Path(f)), ("label", "stage", "source"))]
    for d in a.refinement or ():
        rows += [{**c, "label": "run", "source_of": str(d)} for c in refinement_calls(d)]
    for d in a.run or ():
        rows += [{**c, "label": "run", "source_of": str(d)} for c in run_calls(d)]
    table = reply_table(rows, by=("label", "stage"))
    text = table.to_string() if not a.out else None
    if a.out:
        from workbench.reporting.save import frame_markdown

        Path(a.out).write_text(frame_markdown(table) + "\n")
        text = f"wrote {a.out} ({len(rows)} calls)"
    print(text)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench llm-stages``."""
    p = sub.add_parser("llm-stages", help="the methods' LLM stages on a model: replay recorded inputs with and without "
                       "schema constraints, judge failure patterns against the rule, tabulate replies' fates")
    s = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    r = s.add_parser("replay", help="send recorded stage inputs (from a refinement and runs) to a backend")
    r.add_argument("--refinement", metavar="DIR", help="an AGMR refinement folder (reflector, refiner, judge inputs)")
    r.add_argument("--arbiter-run", metavar="DIR", help="an arbiter run folder (state-parser inputs)")
    r.add_argument("--proactive-run", metavar="DIR", help="a proactive run folder (step-0 memory-agent inputs)")
    r.add_argument("--per-stage", type=int, default=10, help="inputs per stage (default 10)")
    r.add_argument("--unconstrained-too", action="store_true",
                   help="replay again with the backend's constrain=false (llama-server, local)")
    r.add_argument("--out", required=True, metavar="FILE.jsonl", help="the records (appended; resumes)")
    add_backend(r, default="llama-server", help="the backend (default llama-server: the packaged SmolLM2 served "
                "by llama.cpp, started and stopped here)")
    r.set_defaults(fn=cmd_replay)
    j = s.add_parser("judge", help="the pattern_judge stage on every failure diagnosis of a refinement, vs the rule")
    j.add_argument("--refinement", required=True, metavar="DIR")
    j.add_argument("--first-only", action="store_true", help="each failure task's first diagnosis only (m*'s run)")
    j.add_argument("--out", required=True, metavar="FILE.jsonl", help="the labels (appended; resumes)")
    add_backend(j, default="llama-server", help="the judge's backend (default llama-server)")
    j.set_defaults(fn=cmd_judge)
    t = s.add_parser("table", help="the reply table of recorded stage calls")
    t.add_argument("--replay", nargs="*", metavar="FILE.jsonl", help="replay records")
    t.add_argument("--refinement", nargs="*", metavar="DIR", help="refinement folders played with a model")
    t.add_argument("--run", nargs="*", metavar="DIR", help="run folders played with a model")
    t.add_argument("--out", metavar="FILE.md", help="write the table as Markdown")
    t.set_defaults(fn=cmd_table)
