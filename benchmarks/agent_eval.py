"""Does the behaviour-cloned agent act, and does it use its memory? Teacher-forced accuracy and episodes.

Per model: teacher-forced next-action accuracy on the valid_unseen expert plans under every memory condition
(none / icl / traj), the memory controls (``other_type``: the best-retrieved trajectory of a *different* task
type; ``random_same``: a random same-type trajectory instead of the retrieved one), and episodes under
the episode conditions. Everything is written under ``--runs`` (resumable: finished episodes and computed
accuracies are reused), with ``summary.json`` and ``summary.md`` at the end.

    .venv/bin/python benchmarks/agent_eval.py --model smollm2-135m-alfworld --episode-tasks 0:134:7
    .venv/bin/python benchmarks/agent_eval.py --model smollm2-135m-instruct --episode-tasks none

Tables and the model card read run folders ``ROOT/<model>/<condition>`` (from here, ``workbench run``,
``workbench merge-runs`` or notebook 01), with paired comparisons (exact McNemar) between conditions:

    .venv/bin/python benchmarks/agent_eval.py --table reports/tables/NAME.md --runs ROOT
    .venv/bin/python benchmarks/agent_eval.py --card workbench/assets/adapters/smollm2-135m-alfworld \
        --card-section "valid_unseen=ROOT" --card-section "valid_seen=reports/tables/NAME.json"

A table over models whose runs live on different machines or sessions is regenerated from the folders at hand
with ``--table-keep-absent``: what has no folders under ROOT (a model, or a model's teacher forcing) keeps its rows
and paired comparisons from the previous ``NAME.json``, and the page says so. A card section may render such a
table's ``.json`` instead of runs.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

from workbench.agents.policy import _StaticEntry
from workbench.eval.runner import RunConfig, run, select_tasks, teacher_forced_for
from workbench.memory.task_info import game_key


class OtherTypeMemory(_StaticEntry):
    """Control: the best-retrieved trajectory whose task type differs from the task's (a wrong procedure)."""

    name = "other_type"

    def __init__(self, retriever) -> None:
        super().__init__()
        self.retriever = retriever

    def _choose(self, task, goal):
        for entry, score in self.retriever.retrieve(goal, task.task_id, None, k=60):
            if entry.task_type != task.task_type:
                return entry, {"memory_entry": entry.entry_id, "retrieval_score": score}
        return None, {"memory_entry": None}


class RandomSameType(_StaticEntry):
    """Control: a random (seeded per task) same-type trajectory of another game instead of the retrieved one."""

    name = "random_same"

    def __init__(self, base, seed: int = 0) -> None:
        super().__init__()
        self.base, self.seed = base, seed

    def _choose(self, task, goal):
        pool = [e for e in self.base.entries(task.task_type) if game_key(e.task_id) != game_key(task.task_id)]
        if not pool:
            return None, {"memory_entry": None}
        e = random.Random(f"{self.seed}|{task.task_id}").choice(pool)
        return e, {"memory_entry": e.entry_id}


def control_accuracy(lm, name: str, split: str, tasks: str, out: Path) -> dict:
    """Teacher-forced accuracy under a control policy (cached in ``out/teacher_forced.json``)."""
    from workbench.eval.memory_base import default_memory_base
    from workbench.memory.retrieval import get_retriever

    base = default_memory_base()
    policy = OtherTypeMemory(get_retriever("minilm", base)) if name == "other_type" else RandomSameType(base)
    return teacher_forced_for(lm, name, split, tasks, out, policy=policy)


def decision_rule_accuracy(lm, memory: str, split: str, tasks: str, out: Path) -> dict:
    """Teacher-forced accuracy under the agent's rule (mean log-prob per candidate token) and under the sum.

    Both come from the same forward (sum = mean x candidate length), so the gap isolates what length
    normalisation does to the model's choices: it favours long candidates whose tail tokens are predictable
    ("take pencil 2 from shelf 1") over short ones with one uncertain token ("go to shelf 2").
    """
    from workbench.agents.loop import Agent
    from workbench.eval.memory_base import expert_trajectories_for
    from workbench.eval.runner import build_policy
    from workbench.eval.teacher_forcing import teacher_forced_accuracy

    path = out / "decision_rules.json"
    key = {"model": lm.name, "memory": memory, "split": split, "tasks": tasks}
    if path.exists() and json.loads(path.read_text()).get("key") == key:
        return json.loads(path.read_text())["result"]
    by_id = {t.task_id: t for t in select_tasks(RunConfig(out=str(out), split=split, tasks=tasks))}
    agent = Agent.from_model(lm)
    kinds: dict[str, list[int]] = {}  # verb -> [steps, right by mean, right by sum]

    def tally(record: dict, res, cands: list[str]) -> None:
        sums = [m * len(agent.scorer.encode_candidate(c)) for m, c in zip(res.scores, cands)]
        gold = cands.index(record["expert"])
        by_sum = max(range(len(sums)), key=lambda i: (sums[i], -i)) == gold
        counts = kinds.setdefault(record["expert"].split()[0], [0, 0, 0])
        counts[0], counts[1], counts[2] = counts[0] + 1, counts[1] + (res.best == gold), counts[2] + by_sum

    experts = [e for e in expert_trajectories_for(split) if e.task_id in by_id]
    teacher_forced_accuracy(agent, experts, by_id, build_policy(memory), progress=False, on_step=tally)
    n, hit_mean, hit_sum = (sum(c[i] for c in kinds.values()) for i in range(3))
    result = {"n_steps": n, "accuracy_mean_rule": hit_mean / max(1, n), "accuracy_sum_rule": hit_sum / max(1, n),
              "by_verb": {v: {"n": c[0], "mean_rule": round(c[1] / c[0], 3), "sum_rule": round(c[2] / c[0], 3)}
                          for v, c in sorted(kinds.items())}}
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "result": result}, indent=1))
    return result


def folder_table(root: Path, models: list[str], conds: list[str]) -> list[dict]:
    """One row per (model, condition) from run folders ``root/<model>/<cond>`` (``metrics.json`` of the
    episodes, ``teacher_forced.json``), whatever wrote them (``workbench run``, ``merge-runs``, notebook 01)."""
    rows = []
    for model in models:
        for cond in conds:
            folder = root / model / cond
            m = json.loads((folder / "metrics.json").read_text()) if (folder / "metrics.json").exists() else {}
            tf = (json.loads((folder / "teacher_forced.json").read_text())["result"]
                  if (folder / "teacher_forced.json").exists() else {})
            if not m and not tf:
                continue
            rows.append({"model": model, "memory": cond, "episodes": m.get("n_episodes"),
                         "success_rate": m.get("success_rate"), "avg_steps": m.get("avg_steps"),
                         "memory_tokens": m.get("memory_tokens"), "tf_steps": tf.get("n_steps"),
                         "tf_accuracy": tf.get("accuracy"), "tf_mean_p_expert": tf.get("mean_p_expert"),
                         "by_task_type": {k: v["success_rate"] for k, v in (m.get("by_task_type") or {}).items()},
                         "action_patterns": m.get("action_patterns")})
    return rows


Outcomes = tuple[dict, dict]  # ({task_id: won}, {(task_id, step): expert action chosen}) of one run folder


def folder_outcomes(root: Path, models: list[str], conds: list[str]) -> dict[tuple[str, str], Outcomes]:
    """Per (model, condition) with a folder ``root/<model>/<cond>``: which episodes were won (by task) and which
    teacher-forced steps chose the expert's action (by (task, step)) -- what the paired comparisons match."""
    from workbench.memory.trajectory import iter_jsonl_dicts

    out = {}
    for model in models:
        for cond in conds:
            folder = root / model / cond
            eps = ({d["task_id"]: bool(d["success"]) for d in iter_jsonl_dicts(folder / "trajectories.jsonl")}
                   if (folder / "trajectories.jsonl").exists() else {})
            tf = (json.loads((folder / "teacher_forced.json").read_text())
                  if (folder / "teacher_forced.json").exists() else {"per_step": []})
            steps = {(r["task_id"], r["step"]): r["chosen"] == r["expert"] for r in tf.get("per_step", [])}
            if eps or steps:
                out[(model, cond)] = eps, steps
    return out


def pairs_from(outcomes: dict[tuple[str, str], Outcomes], models: list[str], pairs: list[tuple[str, str]]
               ) -> list[dict]:
    """Paired comparisons of memory conditions per model: episodes matched by task, teacher-forced steps by
    (task, step), each with the exact McNemar test (``workbench.eval.compare.paired_outcomes``)."""
    from workbench.eval.compare import paired_outcomes

    rows = []
    for model in models:
        for a, b in pairs:
            (ea, ta), (eb, tb) = outcomes.get((model, a), ({}, {})), outcomes.get((model, b), ({}, {}))
            for kind, x, y in (("episodes", ea, eb), ("TF steps", ta, tb)):
                r = paired_outcomes(x, y)
                if r["n"]:
                    rows.append({"model": model, "a": a, "b": b, "kind": kind} | r)
    return rows


def paired_table(root: Path, models: list[str], pairs: list[tuple[str, str]]) -> list[dict]:
    """``pairs_from`` the run folders ``root/<model>/<cond>`` of every condition the pairs name."""
    return pairs_from(folder_outcomes(root, models, sorted({c for p in pairs for c in p})), models, pairs)


def encode_outcomes(outcomes: dict[tuple[str, str], Outcomes]) -> dict:
    """Outcomes as compact JSON (task ids listed once; episodes as [task index, won], steps as [task index, step,
    chosen right]) so a table keeps what its paired comparisons were computed from."""
    tasks = sorted({t for eps, steps in outcomes.values() for t in [*eps, *(k[0] for k in steps)]})
    index = {t: i for i, t in enumerate(tasks)}
    return {"tasks": tasks, "runs": [
        {"model": m, "memory": c, "episodes": [[index[t], int(w)] for t, w in eps.items()],
         "tf_steps": [[index[t], k, int(h)] for (t, k), h in steps.items()]}
        for (m, c), (eps, steps) in outcomes.items()]}


def read_table(path: Path, who: str) -> dict:
    """A table ``--table`` wrote (its ``.json``), checked: ``rows``, ``paired`` and ``outcomes`` (decoded, empty for
    tables written before they kept outcomes). Anything else stops with ``who`` and the file named."""
    try:
        table = json.loads(Path(path).read_text())
        if not all({"model", "memory"} <= r.keys() for r in table["rows"]):
            raise KeyError("a row without model or memory")
        return {**table, "paired": table.get("paired", []),
                "outcomes": decode_outcomes(table["outcomes"]) if table.get("outcomes") else {}}
    except (OSError, json.JSONDecodeError, KeyError, TypeError, IndexError, ValueError) as e:
        raise SystemExit(f"{who}: {path} is not a table written by --table ({e!r})")


def decode_outcomes(data: dict) -> dict[tuple[str, str], Outcomes]:
    """The inverse of ``encode_outcomes``."""
    tasks = data["tasks"]
    return {(r["model"], r["memory"]): ({tasks[i]: bool(w) for i, w in r["episodes"]},
                                        {(tasks[i], k): bool(h) for i, k, h in r["tf_steps"]})
            for r in data["runs"]}


def rows_markdown(rows: list[dict], paired: list[dict] = ()) -> str:
    """The condition table (and success by task type, and paired comparisons) as markdown."""
    def pct(v):
        return "–" if v is None else f"{v:.1%}"

    def num(v, f=".1f"):
        return "–" if v is None else format(v, f)

    types = sorted({t for r in rows for t in r["by_task_type"]})
    lines = ["| model | memory | episodes | success | avg steps | memory tokens | TF steps | TF accuracy | "
             "mean p(expert) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['memory']} | {r['episodes'] or '–'} | {pct(r['success_rate'])} | "
                     f"{num(r['avg_steps'])} | {num(r['memory_tokens'], '.0f')} | {r['tf_steps'] or '–'} | "
                     f"{pct(r['tf_accuracy'])} | {num(r['tf_mean_p_expert'], '.3f')} |")
    if types:
        lines += ["", "Success by task type:", "", "| model | memory | " + " | ".join(types) + " |",
                  "|---|---|" + "---|" * len(types)]
        for r in rows:
            if r["by_task_type"]:
                lines.append(f"| {r['model']} | {r['memory']} | "
                             + " | ".join(pct(r["by_task_type"].get(t)) for t in types) + " |")
    moves = [r for r in rows if r.get("action_patterns")]
    if moves:
        lines += ["", "How the episodes move (`workbench.eval.metrics.action_patterns`): oscillation = steps going back "
                  "to the action of two steps before (A, B, A, B); repeat = the last action again; go to = share of "
                  "navigation actions; take = episodes that ever pick something up:", "",
                  "| model | memory | oscillation | repeat | distinct actions / episode | go to | take |",
                  "|---|---|---|---|---|---|---|"]
        for r in moves:
            p = r["action_patterns"]
            lines.append(f"| {r['model']} | {r['memory']} | {pct(p['oscillation'])} | {pct(p['repeat'])} | "
                         f"{p['distinct_actions']:.1f} | {pct(p['navigation'])} | {pct(p['took_object'])} |")
    if paired:
        lines += ["", "Paired comparisons (items both conditions scored; exact McNemar test on the discordant ones):",
                  "", "| model | A vs B | items | A | B | A − B | only A | only B | p |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in paired:
            lines.append(f"| {r['model']} | {r['a']} vs {r['b']} ({r['kind']}) | {r['n']} | {pct(r['rate_a'])} | "
                         f"{pct(r['rate_b'])} | {100 * r['diff']:+.1f} pts | {r['only_a']} | {r['only_b']} | "
                         f"{r['p_mcnemar']:.3g} |")
    return "\n".join(lines) + "\n"


def table_markdown(rows: list[dict], title: str, command: str, paired: list[dict] = (), notes: str = "",
                   carried: dict[str, str] | None = None) -> str:
    """The table page: title, the command that wrote it, ``notes`` (how the run folders were made), what was
    carried over from the previous version (``carried``: "model: part: condition" -> provenance), the tables."""
    notes = notes.strip()
    by_source: dict[str, dict[str, list[str]]] = {}  # provenance -> "model part" -> conditions
    for what, src in (carried or {}).items():
        model, part, cond = what.split(": ")
        by_source.setdefault(src, {}).setdefault(f"{model} {part}", []).append(cond)
    kept = "".join(f"Carried over from the previous version of this table (no run folders for them where this one "
                   f"was written), from {src}: " + "; ".join(f"{k} ({', '.join(v)})" for k, v in whats.items())
                   + ".\n\n" for src, whats in by_source.items())
    return (f"# {title}\n\nMeasured with: `{command}`\n\n" + (f"{notes}\n\n" if notes else "") + kept
            + rows_markdown(rows, paired))


# the two parts of a table row, each from its own files of a run folder, and the paired lines each part makes
PARTS = {"episodes": ("episodes", "success_rate", "avg_steps", "memory_tokens", "by_task_type", "action_patterns"),
         "teacher forcing": ("tf_steps", "tf_accuracy", "tf_mean_p_expert")}
PAIRED_KIND = {"episodes": "episodes", "teacher forcing": "TF steps"}


def carry_over(previous: Path, models: list[str], conds: list[str], rows: list[dict],
               outcomes: dict[tuple[str, str], Outcomes]) -> tuple[list[dict], set, list[dict], dict[str, str]]:
    """What the run folders at hand lack, taken from the previous table's ``.json`` (a table over models, or
    parts, whose runs were made on different machines or sessions): a part of a row (episodes, teacher forcing)
    with no files here keeps its previous values and its outcomes, so every paired comparison is recomputed from
    fresh and kept outcomes alike. (A previous table written before tables kept their outcomes gives its paired
    lines as they were, for comparisons whose two conditions both had that part carried.) ``outcomes`` is
    completed in place. Returns the rows in ``models`` order, the (model, condition, paired kind) carried without
    outcomes, the previous paired lines, and the provenance of each carried "model: part: condition"."""
    if not previous.exists():
        return rows, set(), [], {}
    old = read_table(previous, "--table-keep-absent")
    old_rows = {(r["model"], r["memory"]): r for r in old["rows"]}
    old_outcomes = old["outcomes"]
    here = {(r["model"], r["memory"]): r for r in rows}
    carried: dict[str, str] = {}
    legacy: set[tuple[str, str, str]] = set()  # (model, condition, paired kind) carried without outcomes
    merged = []
    for model in models:
        for cond in conds:
            new, prev = here.get((model, cond)), old_rows.get((model, cond))
            if prev is None:
                if new is not None:
                    merged.append(new)
                continue
            row = dict(new) if new is not None else {"model": model, "memory": cond,
                                                     **{f: None for fs in PARTS.values() for f in fs}}
            for n, (part, fields) in enumerate(PARTS.items()):
                if any(row.get(f) not in (None, {}) for f in fields) or all(prev.get(f) in (None, {}) for f in fields):
                    continue  # measured here, or not in the old table either
                row.update({f: prev.get(f) for f in fields})
                if (model, cond) in old_outcomes:
                    both = list(outcomes.get((model, cond), ({}, {})))
                    both[n] = old_outcomes[(model, cond)][n]
                    outcomes[(model, cond)] = both[0], both[1]
                else:
                    legacy.add((model, cond, PAIRED_KIND[part]))
                label = f"{model}: {part}: {cond}"
                carried[label] = (old.get("carried", {}).get(label)
                                  or (f"run folders under `{old['runs']}`" if old.get("runs") else
                                      "a version written before tables recorded their runs root (the notes above "
                                      "say how its runs were made)")
                                  + (f", table written {old['written']}" if old.get("written") else ""))
            row["by_task_type"] = row.get("by_task_type") or {}
            merged.append(row)
    return merged, legacy, old["paired"], carried


def write_table(out: Path, root: Path, models: list[str], conds: list[str], title: str, command: str,
                notes: str = "", keep_absent: bool = False) -> str:
    """``--table``: the markdown page ``out`` and its ``.json`` (rows, paired comparisons, provenance, and the
    outcomes the comparisons were computed from) from the run folders ``root/<model>/<cond>``; with
    ``keep_absent`` what the folders lack keeps its previous values and outcomes."""
    rows = folder_table(root, models, conds)
    outcomes = folder_outcomes(root, models, sorted({*conds, *(c for p in PAIRS for c in p)}))
    carried: dict[str, str] = {}
    legacy, old_paired = set(), []
    if keep_absent:
        rows, legacy, old_paired, carried = carry_over(out.with_suffix(".json"), models, conds, rows, outcomes)
    paired = pairs_from(outcomes, models, PAIRS)
    if legacy:  # previous lines of comparisons whose two sides were both carried without outcomes
        have = {(r["model"], r["a"], r["b"], r["kind"]) for r in paired}
        order = {m: i for i, m in enumerate(models)}
        keep = [r for r in old_paired if r.get("model") in order and (r["model"], r["a"], r["b"], r["kind"]) not in
                have and all((r["model"], c, r["kind"]) in legacy for c in (r["a"], r["b"]))]
        paired = sorted(paired + keep, key=lambda r: order[r["model"]])  # stable: order within a model kept
    if not rows:
        raise SystemExit(f"--table: no run folders under {root}/<model>/<condition>")
    text = table_markdown(rows, title, command, paired, notes, carried)
    record = {"rows": rows, "paired": paired, "runs": str(root), "written": time.strftime("%Y-%m-%d"),
              "carried": carried, "outcomes": encode_outcomes(outcomes)}
    out.parent.mkdir(parents=True, exist_ok=True)
    # readable rows, and the outcomes on one line (thousands of small lists)
    body = json.dumps(record | {"outcomes": None}, indent=1)
    body = body.replace('"outcomes": null', '"outcomes": ' + json.dumps(record["outcomes"], separators=(",", ":")))
    for path, body in ((out, text), (out.with_suffix(".json"), body)):
        tmp = path.with_name(path.name + ".tmp")  # both written whole, or the old ones stay
        tmp.write_text(body)
        tmp.replace(path)
    return text


PAIRS = [("traj", "none"), ("icl", "none"), ("traj", "icl"), ("traj", "other_type"), ("traj", "random_same")]


def write_card(adapter: str, sections: list[str], models: list[str], conds: list[str]) -> None:
    """Write the evaluation section of the adapter's MODEL_CARD.md (rebuilt from its training_log.json): each
    section ``TITLE=ROOT`` reads the run folders ``ROOT/<model>/<cond>`` like ``--table``; ``TITLE=TABLE.json``
    renders a table ``--table`` wrote (its rows of ``models`` x ``conds``), so the card and the report agree."""
    from workbench.training.card import adapter_summary, write_model_card

    parts = ["## Evaluation (never trained or tuned on valid_unseen)", "",
             "TF = teacher-forced next-action accuracy on the planner's expert plans of the same tasks (arg-max over "
             "the admissible commands, as the agent decides). `other_type`: the best-retrieved trajectory of a "
             "different task type; `random_same`: a random same-type trajectory instead of the retrieved one. "
             "Episodes: 50-step limit.", "", f"Written by `{' '.join(['python', *sys.argv])}`."]
    for section in sections:
        title, _, root = section.partition("=")
        if not root:
            raise SystemExit(f"--card-section {section!r}: expected TITLE=RUNS_ROOT or TITLE=TABLE.json")
        if root.endswith(".json"):
            table = read_table(Path(root), f"--card-section {section!r}")
            rows = [r for r in table["rows"] if r["model"] in models and r["memory"] in conds]
            paired = [r for r in table["paired"] if r.get("model") in models]
            source = f"Table: `{root}` (its page `{Path(root).with_suffix('.md')}` says how the runs were made)."
        else:
            rows, paired = folder_table(Path(root), models, conds), paired_table(Path(root), models, PAIRS)
            source = f"Runs: `{root}/<model>/<condition>`."
        if not rows:
            raise SystemExit(f"--card-section {section!r}: " + (f"no rows for {models} x {conds} in {root}"
                             if root.endswith(".json") else f"no run folders under {root}/<model>/<condition>"))
        parts += ["", f"### {title}", "", source, "", rows_markdown(rows, paired).rstrip()]
    record = json.loads((Path(adapter) / "training_log.json").read_text())
    write_model_card(adapter, record, adapter_summary(adapter), "\n".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-alfworld")
    ap.add_argument("--split", default="valid_unseen")
    ap.add_argument("--tf-tasks", default="all", help="tasks for teacher-forced accuracy")
    ap.add_argument("--tf-conditions", nargs="*", default=["none", "icl", "traj"])
    ap.add_argument("--controls", nargs="*", default=[], help="other_type random_same")
    ap.add_argument("--episode-tasks", default="0:134:7", help="'none' to skip episodes")
    ap.add_argument("--episode-conditions", nargs="*", default=["none", "traj"])
    ap.add_argument("--rules", nargs="*", default=[], help="memory conditions for the mean-vs-sum decision-rule "
                    "diagnostic (teacher-forced, on --tf-tasks)")
    ap.add_argument("--max-steps", type=int, default=50)
    ap.add_argument("--runs", default=None, help="default runs/agent_eval/<model>")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--card-section", action="append", default=[], metavar="TITLE=RUNS_ROOT",
                    help="with --card: a table of the run folders RUNS_ROOT/<model>/<cond> (repeatable)")
    ap.add_argument("--card", metavar="ADAPTER_DIR", help="only rewrite this adapter's MODEL_CARD.md with an "
                    "evaluation section per --card-section (default: valid_unseen=<--runs or runs/full/01_baselines>)")
    ap.add_argument("--table", metavar="OUT_MD", help="only write a markdown table (and .json) of the run folders "
                    "--runs/<model>/<cond> for the models given by --table-models and --table-conditions")
    ap.add_argument("--table-models", nargs="*", default=["smollm2-135m-instruct", "smollm2-135m-alfworld"])
    ap.add_argument("--table-conditions", nargs="*", default=["none", "icl", "traj", "other_type", "random_same"])
    ap.add_argument("--table-title", default="valid_unseen: memory conditions")
    ap.add_argument("--table-notes", metavar="NOTES_MD", help="with --table: markdown put between the command and "
                    "the tables (how the run folders were made), kept in a file so a regenerated table keeps it")
    ap.add_argument("--table-keep-absent", action="store_true", help="with --table: what has no run folders under "
                    "--runs (a model, or a model's episodes or teacher forcing) keeps its rows and paired "
                    "comparisons from the previous OUT.json, marked as such")
    a = ap.parse_args()
    if a.table:
        out = Path(a.table)
        text = write_table(out, Path(a.runs or "runs/full/01_baselines"), a.table_models, a.table_conditions,
                           a.table_title, " ".join(["python", *sys.argv]),
                           Path(a.table_notes).read_text() if a.table_notes else "", a.table_keep_absent)
        if out.parent.name == "tables" and (out.parent.parent / "index.md").exists():
            from workbench.reporting.save import Reports

            Reports(out.parent.parent, "agent_eval").index()  # the reports' index lists the new table
        print(text)
        return
    if a.card:
        write_card(a.card, a.card_section or [f"valid_unseen={a.runs or 'runs/full/01_baselines'}"], a.table_models,
                   a.table_conditions)
        return
    torch.set_num_threads(a.threads)
    from workbench.models import load_model

    runs = Path(a.runs or f"runs/agent_eval/{a.model}")
    lm = load_model(a.model)
    summary: dict = {"model": a.model, "split": a.split, "tf_tasks": a.tf_tasks, "episode_tasks": a.episode_tasks,
                     "teacher_forced": {}, "episodes": {}, "wall_s": {}}
    if a.episode_tasks != "none":
        for cond in a.episode_conditions:
            t0 = time.perf_counter()
            cfg = RunConfig(out=str(runs / cond), split=a.split, tasks=a.episode_tasks, memory=cond, model=a.model,
                            max_steps=a.max_steps, teacher_forcing=False)
            m = run(cfg, resume=True, lm=lm)
            summary["episodes"][cond] = {k: m[k] for k in ("n_episodes", "success_rate", "avg_steps", "memory_tokens")
                                         if k in m} | {"by_task_type": m.get("by_task_type")}
            summary["wall_s"][f"episodes_{cond}"] = round(time.perf_counter() - t0, 1)
            print(cond, json.dumps(summary["episodes"][cond]), flush=True)
    for cond in a.tf_conditions:
        t0 = time.perf_counter()
        summary["teacher_forced"][cond] = teacher_forced_for(lm, cond, a.split, a.tf_tasks, runs / cond)
        summary["wall_s"][f"tf_{cond}"] = round(time.perf_counter() - t0, 1)
        print("tf", cond, json.dumps(summary["teacher_forced"][cond]), flush=True)
    for name in a.controls:
        t0 = time.perf_counter()
        summary["teacher_forced"][name] = control_accuracy(lm, name, a.split, a.tf_tasks, runs / name)
        summary["wall_s"][f"tf_{name}"] = round(time.perf_counter() - t0, 1)
        print("tf", name, json.dumps(summary["teacher_forced"][name]), flush=True)
    summary["decision_rules"] = {}
    for cond in a.rules:
        summary["decision_rules"][cond] = decision_rule_accuracy(lm, cond, a.split, a.tf_tasks, runs / f"rules_{cond}")
        print("rules", cond, json.dumps(summary["decision_rules"][cond]), flush=True)
    old = json.loads((runs / "summary.json").read_text()) if (runs / "summary.json").exists() else {}
    for k in ("teacher_forced", "episodes", "wall_s", "decision_rules"):
        summary[k] = old.get(k, {}) | summary[k]
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({"teacher_forced": {k: round(v["accuracy"], 4) for k, v in summary["teacher_forced"].items()},
                      "episodes": {k: v["success_rate"] for k, v in summary["episodes"].items()}}))


if __name__ == "__main__":
    main()
