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

    .venv/bin/python benchmarks/agent_eval.py --table reports/full-bfloat16/tables/NAME.md --runs ROOT
    .venv/bin/python benchmarks/agent_eval.py --card workbench/assets/adapters/smollm2-135m-alfworld \
        --card-section "valid_unseen=ROOT" --card-section "valid_seen=reports/full-bfloat16/tables/NAME.json"

A table over models whose runs live on different machines or sessions is regenerated from the folders at hand
with ``--table-keep-absent``: what has no folders under ROOT (a model, or a model's teacher forcing) keeps its rows
and paired comparisons from the previous ``NAME.json``, and the page says so. A card section may render such a
table's ``.json`` instead of runs. The tables and the card section are rendered by ``workbench.reporting``
(``write_table``, ``write_card``); this script only parses the flags for them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.run import run
from workbench.eval.teacher_forced import teacher_forced_for
from workbench.reporting import PAIRS, write_table
from workbench.reporting.cards import write_card


def decision_rule_accuracy(lm, memory: str, split: str, tasks: str, out: Path) -> dict:
    """Teacher-forced accuracy under the agent's rule (mean log-prob per candidate token) and under the sum.

    Both come from the same forward (sum = mean x candidate length), so the gap isolates what length
    normalisation does to the model's choices: it favours long candidates whose tail tokens are predictable
    ("take pencil 2 from shelf 1") over short ones with one uncertain token ("go to shelf 2").
    """
    from workbench.agents.loop import Agent
    from workbench.agents.policy import build_policy
    from workbench.agents.teacher_forcing import teacher_forced_accuracy
    from workbench.envs.memory_base import expert_trajectories_for

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


def _model_pairs(items: list[str], option: str = "--table-model-pairs", what: str = "MODEL") -> list[tuple[str, str]]:
    pairs = [tuple(p.split(":", 1)) for p in items]
    bad = [p for p, q in zip(items, pairs) if len(q) != 2 or not all(q)]
    if bad:
        raise SystemExit(f"{option} {bad[0]}: expected {what}_A:{what}_B")
    return pairs


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
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--workers", type=int, help="play the episodes in N worker processes (a local Ray instance)")
    ap.add_argument("--card-section", action="append", default=[], metavar="TITLE=RUNS_ROOT",
                    help="with --card: a table of the run folders RUNS_ROOT/<model>/<cond> (repeatable)")
    ap.add_argument("--card", metavar="ADAPTER_DIR", help="only rewrite this adapter's MODEL_CARD.md with an "
                    "evaluation section per --card-section (default: valid_unseen=<--runs or runs/full/01_baselines>)")
    ap.add_argument("--table", metavar="OUT_MD", help="only write a markdown table (and .json) of the run folders "
                    "--runs/<model>/<cond> for the models given by --table-models and --table-conditions")
    ap.add_argument("--table-models", nargs="*", default=["smollm2-135m-instruct", "smollm2-135m-alfworld"])
    ap.add_argument("--table-conditions", nargs="*", default=["none", "icl", "traj", "other_type", "random_same"])
    ap.add_argument("--table-model-pairs", nargs="*", default=[], metavar="A:B",
                    help="with --table/--card: models compared under each condition, paired (e.g. "
                    "smollm2-135m-alfworld-v2:smollm2-135m-alfworld)")
    ap.add_argument("--table-pairs", nargs="*", metavar="A:B", help="with --table: the condition pairs compared "
                    "(default: traj:none icl:none traj:icl traj:other_type traj:random_same)")
    ap.add_argument("--table-tf-bands", nargs="*", default=[], metavar="K-L",
                    help="with --table: teacher-forced accuracy within these bands of expert steps (K, K-L or K-), "
                         "and the pairs compared within each")
    ap.add_argument("--table-compare-dtypes", action="store_true", help="with --table: the compared variable is the "
                    "dtype (rows of float32 and bfloat16 folders, with a dtype column)")
    ap.add_argument("--table-title", default="valid_unseen: memory conditions")
    ap.add_argument("--table-notes", metavar="NOTES_MD", help="with --table: markdown put between the command and "
                    "the tables (how the run folders were made), kept in a file so a regenerated table keeps it")
    ap.add_argument("--table-keep-absent", action="store_true", help="with --table: what has no run folders under "
                    "--runs (a model, or a model's episodes or teacher forcing) keeps its rows and paired "
                    "comparisons from the previous OUT.json, marked as such")
    a = ap.parse_args()
    if a.table:
        out = Path(a.table)
        notes = Path(a.table_notes).read_text() if a.table_notes else ""
        try:
            text = write_table(out, Path(a.runs or "runs/full/01_baselines"), a.table_models, a.table_conditions,
                               a.table_title, " ".join(["python", *sys.argv]), notes, a.table_keep_absent,
                               model_pairs=_model_pairs(a.table_model_pairs),
                               compare_dtypes=a.table_compare_dtypes, tf_bands=a.table_tf_bands,
                               pairs=_model_pairs(a.table_pairs, "--table-pairs", "CONDITION") if a.table_pairs else PAIRS)
        except (ValueError, FileNotFoundError) as e:
            raise SystemExit(f"--table: {e}") from e
        if out.parent.name == "tables" and (out.parent.parent / "index.md").exists():
            from workbench.reporting.save import Reports

            Reports(out.parent.parent, "agent_eval").add(out)  # the set's index lists the new table
        print(text)
        return
    if a.card:
        try:
            write_card(a.card, a.card_section or [f"valid_unseen={a.runs or 'runs/full/01_baselines'}"],
                       a.table_models, a.table_conditions, " ".join(["python", *sys.argv]))
        except (ValueError, FileNotFoundError) as e:
            raise SystemExit(f"--card: {e}") from e
        return
    torch.set_num_threads(a.threads)
    from workbench.models import load_model

    runs = Path(a.runs or f"runs/agent_eval/{a.model}")
    lm = load_model(a.model, dtype=a.dtype)
    summary: dict = {"model": a.model, "split": a.split, "tf_tasks": a.tf_tasks, "episode_tasks": a.episode_tasks,
                     "teacher_forced": {}, "episodes": {}, "wall_s": {}}
    if a.episode_tasks != "none":
        for cond in a.episode_conditions:
            t0 = time.perf_counter()
            cfg = RunConfig(out=str(runs / cond), split=a.split, tasks=a.episode_tasks, memory=cond, model=a.model,
                            max_steps=a.max_steps, teacher_forcing=False, dtype=a.dtype)
            m = run(cfg, resume=True, workers=a.workers) if a.workers else run(cfg, resume=True, lm=lm)
            summary["episodes"][cond] = {k: m[k] for k in ("n_episodes", "success_rate", "avg_steps", "memory_tokens")
                                         if k in m} | {"by_task_type": m.get("by_task_type")}
            summary["wall_s"][f"episodes_{cond}"] = round(time.perf_counter() - t0, 1)
            print(cond, json.dumps(summary["episodes"][cond]), flush=True)
    for cond in [*a.tf_conditions, *a.controls]:  # the controls are memory policies too (teacher forcing only)
        t0 = time.perf_counter()
        summary["teacher_forced"][cond] = teacher_forced_for(lm, cond, a.split, a.tf_tasks, runs / cond)
        summary["wall_s"][f"tf_{cond}"] = round(time.perf_counter() - t0, 1)
        print("tf", cond, json.dumps(summary["teacher_forced"][cond]), flush=True)
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
