"""Do the causal studies give the same numbers through the re-score primitive as their hand-written loops gave?

The studies' tables are committed at paper scale in bfloat16, where a score may depend on how the KV prefix was
chunked across the forwards before it (see ``workbench.agents.rescore``, ``reuse_prefix``). So the check is not
"close": the rows of a small sample of each study, computed by two code roots on the same machine, must be equal
field by field, floats bit for bit.

    # the code before the studies went through the primitive (5aed11f: workbench/methods/*/causal|experiments.py)
    PYTHONPATH=/work/wt-base .venv/bin/python benchmarks/study_equivalence.py --out /tmp/old.json
    # this code
    PYTHONPATH=. .venv/bin/python benchmarks/study_equivalence.py --out /tmp/new.json
    .venv/bin/python benchmarks/study_equivalence.py --compare /tmp/old.json /tmp/new.json

Each run loads ``smollm2-135m-alfworld-v2`` in bfloat16 and computes, with no analysis cache (every row computed
now), on the committed paper-scale run folders (``runs/full-bfloat16``) and with the notebooks' arguments (full
profile):

* ``band_switches``: notebook 05's call (budget 500, 2 items per transition, 6 steps per task) on the first 3
  tasks of its slice (``0:134:7`` -> ``0:15:7``);
* ``first_step_ablation``: ``arbiter-500``'s first 3 episodes whose first action differs from ``none``'s;
* ``loop_episodic_switch``: ``arbiter-500``'s first 3 failed episodes with a loop, and the first after them whose
  loop state hides no Episodic item (a noop: nothing scored but the state as played);
* ``warning_pull_ablation``: ``proactive``'s first 4 episodes (of notebook 06's ``0:134:2``) with a warning
  state;
* ``reminder_attention``: notebook 06's call (variant ``proactive``, the default retrieval heads, the placebo
  control) on the first 2 tasks of its slice (``0:134:7`` -> ``0:14:7``), played for 20 steps each (the paper
  plays 50: the placebo rows are the same code either way).

It writes ``{"code": ..., "studies": {name: {"rows": [...], "seconds": ...}}}``; ``--compare`` prints, per
study, how many rows were compared and whether they are equal (exit 1 if any differ).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m-alfworld-v2"
SPLIT = "valid_unseen"


def _api() -> dict:
    """The studies and run-folder helpers of the code root on ``PYTHONPATH`` (new layout, or 5aed11f's)."""
    from workbench.agents.policy import replay_at

    try:
        from workbench.eval.config import RunConfig, policy_for, select_tasks
        from workbench.eval.run_folder import load_run
        from workbench.studies.band_switches import band_switches
        from workbench.studies.first_step_ablation import first_step_ablation
        from workbench.studies.loop_switch import loop_episodic_switch, loop_steps
        from workbench.studies.reminder_attention import reminder_attention
        from workbench.studies.warning_pull import _warned, warning_pull_ablation
    except ImportError:  # before the studies moved out of the methods
        from workbench.eval.runner import RunConfig, load_run, policy_for, select_tasks
        from workbench.methods.arbiter.causal import (
            first_step_ablation,
            loop_episodic_switch,
            loop_steps,
        )
        from workbench.methods.arbiter.experiments import band_switches
        from workbench.methods.proactive.experiments import (
            _warned,
            reminder_attention,
            warning_pull_ablation,
        )
    return dict(RunConfig=RunConfig, load_run=load_run, policy_for=policy_for, replay_at=replay_at,
                select_tasks=select_tasks, band_switches=band_switches, first_step_ablation=first_step_ablation,
                loop_episodic_switch=loop_episodic_switch, loop_steps=loop_steps, reminder_attention=reminder_attention,
                warning_pull_ablation=warning_pull_ablation, _warned=_warned)


def _config(api: dict, folder: Path, **change):
    """The RunConfig of a committed run folder (its ``config.json``), with ``change``."""
    run = json.loads((folder / "config.json").read_text())["run"]
    names = {f.name for f in dataclasses.fields(api["RunConfig"])}
    return api["RunConfig"](**{**{k: v for k, v in run.items() if k in names}, "out": str(folder), **change})


def compute(runs: Path) -> dict:
    import workbench
    from workbench.attention import default_retrieval_heads
    from workbench.models import load_model

    api = _api()
    arbiter_dir = runs / "05_arbiter" / MODEL
    proactive_dir = runs / "06_proactive" / MODEL
    lm = load_model(MODEL, dtype="bfloat16")
    out: dict = {}

    def timed(name: str, fn, **args) -> None:
        t0 = time.perf_counter()
        rows = fn()
        out[name] = {"args": args, "rows": rows, "seconds": round(time.perf_counter() - t0, 1)}
        print(f"{name}: {len(rows)} rows in {out[name]['seconds']} s", file=sys.stderr, flush=True)

    timed("band_switches", lambda: api["band_switches"](lm, SPLIT, "0:15:7", budget=500, per_transition=2,
                                                         steps_per_task=6, cache_dir=None),
          tasks="0:15:7", budget=500, per_transition=2, steps_per_task=6)

    arbiter, _, _ = api["load_run"](arbiter_dir / "arbiter-500")
    reference, _, _ = api["load_run"](arbiter_dir / "none")
    acfg = _config(api, arbiter_dir / "arbiter-500")
    react_first = {t.task_id: t.steps[0].action for t in reference if t.steps}
    differs = [t for t in arbiter if t.steps and react_first.get(t.task_id) not in (None, t.steps[0].action)][:3]
    timed("first_step_ablation", lambda: api["first_step_ablation"](lm, acfg, differs, reference, cache_dir=None),
          episodes=[t.task_id for t in differs])
    looped = [t for t in arbiter if not t.success and api["loop_steps"](t)]
    tasks = {t.task_id: t for t in api["select_tasks"](acfg)}

    def nothing_hidden(traj) -> bool:  # its loop state has no hidden Episodic item: the noop path (model-free)
        policy = api["policy_for"](acfg)
        block = next(api["replay_at"](policy, tasks[traj.task_id], traj, api["loop_steps"](traj)[:1]))[3]
        return not any(r[0] in policy.step_item_ids and r[1] == "episodic" and r[3] == "H"
                       for r in block.record["arbiter"]["items"])

    loops = looped[:3] + [next(t for t in looped[3:] if nothing_hidden(t))]
    timed("loop_episodic_switch", lambda: api["loop_episodic_switch"](lm, acfg, loops, cache_dir=None),
          episodes=[t.task_id for t in loops])

    proactive, _, _ = api["load_run"](proactive_dir / "proactive")
    pcfg = _config(api, proactive_dir / "proactive", tasks="0:134:2")
    slice_ids = {t.task_id for t in api["select_tasks"](pcfg)}
    warned = [t for t in proactive if t.task_id in slice_ids and any(
        r.get("reminder") and api["_warned"](r["reminder"], (r.get("reminder_effect") or {}).get("mentions", ()))
        for r in t.meta.get("steps", []))][:4]
    timed("warning_pull_ablation", lambda: api["warning_pull_ablation"](lm, pcfg, warned, cache_dir=None),
          episodes=[t.task_id for t in warned])

    def attention() -> list[dict]:
        summary, _ = api["reminder_attention"](lm, default_retrieval_heads(MODEL), SPLIT, "0:14:7", max_steps=20,
                                               cache_dir=None)
        return [{k: v for k, v in summary.items() if k != "rows"}, *summary["rows"]]  # the summary, then the rows

    timed("reminder_attention", attention, tasks="0:14:7", max_steps=20, variant="proactive")
    code = Path(workbench.__file__).parents[1]
    git = ["git", "-C", str(code)]
    try:
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        if subprocess.run([*git, "status", "--porcelain", "--", "workbench"], capture_output=True, text=True).stdout:
            commit += " + uncommitted changes to workbench/"
    except OSError:
        commit = ""
    return {"code": str(code), "commit": commit, "model": MODEL,
            "dtype": "bfloat16", "studies": out}


def _same(a, b, path: str, diffs: list[str]) -> None:
    if isinstance(a, float) or isinstance(b, float):
        if not (type(a) is type(b) and (a.hex() == b.hex() or (math.isnan(a) and math.isnan(b)))):
            diffs.append(f"{path}: {a!r} != {b!r}")
    elif isinstance(a, dict) and isinstance(b, dict):
        for k in dict.fromkeys([*a, *b]):
            if k not in a or k not in b:
                diffs.append(f"{path}.{k}: only in {'new' if k not in a else 'old'}")
            else:
                _same(a[k], b[k], f"{path}.{k}", diffs)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{path}: {len(a)} != {len(b)} items")
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]", diffs)
    elif type(a) is not type(b) or a != b:
        diffs.append(f"{path}: {a!r} != {b!r}")


def compare(old: dict, new: dict) -> int:
    """Print, per study, the rows compared and whether every field is equal (floats bit for bit)."""
    bad = 0
    print(f"old: {old['code']} ({old['commit']})\nnew: {new['code']} ({new['commit']})")
    for name in dict.fromkeys([*old["studies"], *new["studies"]]):
        a, b = old["studies"].get(name), new["studies"].get(name)
        if a is None or b is None:
            print(f"{name}: only in {'new' if a is None else 'old'}")
            bad += 1
            continue
        diffs: list[str] = []
        _same(a["args"], b["args"], "args", diffs)
        _same(a["rows"], b["rows"], "rows", diffs)
        n_fields = sum(len(r) for r in a["rows"] if isinstance(r, dict))
        verdict = "EQUAL" if not diffs else f"DIFFER in {len(diffs)} fields"
        print(f"{name}: {len(a['rows'])} vs {len(b['rows'])} rows, {n_fields} fields: {verdict} "
              f"({a['seconds']} s old, {b['seconds']} s new)")
        for d in diffs[:20]:
            print(f"    {d}")
        bad += bool(diffs)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the sample's rows here (JSON)")
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "full-bfloat16", help="the paper-scale run folders")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"), help="compare two --out files")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*(json.loads(p.read_text()) for p in args.compare))
    if args.out is None:
        ap.error("--out or --compare")
    result = compute(args.runs)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"{args.out}: {sum(len(s['rows']) for s in result['studies'].values())} rows from {result['code']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
