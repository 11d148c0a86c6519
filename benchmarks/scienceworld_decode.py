"""How the agent should act in ScienceWorld, measured (issue 48): its valid actions run to a thousand a step.

On states along ScienceWorld gold paths (the first ``--per-type`` variations of every type in ``--split``, a few
evenly spaced steps of each), the action prompt the agent sees with ``--memory`` (ReAct: none), four ways to act:

* ``score``: every valid action scored in one forward (the ALFWorld decode; the candidate trie runs to ~3,000
  tokens): the exact length-normalised choice, and the reference the others are compared with;
* ``constrained@B``: the action written token by token along the valid actions' trie, a beam of B
  (:meth:`workbench.models.scoring.ActionScorer.write`), for B in ``--beams``;
* ``generate``: the reply written freely (greedy, ``Thought/Action``) and mapped to the closest valid action.

Per way: the median time of a step, how often it picks the action ``score`` picks, and how often the gold action.
The ``score`` arm is slow by construction (``--max-candidates`` skips states above that many valid actions, whose
single forward would take a minute).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scienceworld_decode.py --json benchmarks/notes/scienceworld_decode.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def states(split: str, per_type: int, steps_per_traj: int, seed_types: list[str] | None):
    """(task, gold trajectory, step index, admissible there) along the gold paths, replayed (a fresh JVM per task)."""
    from workbench.envs.scienceworld import ScienceWorldEnv, load_scienceworld_tasks
    from workbench.envs.scienceworld_experts import gold_trajectories

    base, _, _ = split.partition("@")
    trajs = {t.task_id: t for t in gold_trajectories(f"{base}@{per_type}", progress=False, task_types=seed_types)}
    tasks = load_scienceworld_tasks(f"{base}@{per_type}", seed_types)
    env = ScienceWorldEnv()
    try:
        for task in tasks:
            traj = trajs[task.task_id]
            n = traj.n_steps
            if not traj.success or n == 0:
                continue
            picks = sorted({round(i * (n - 1) / max(1, steps_per_traj - 1)) for i in range(steps_per_traj)})
            res = env.reset(task)
            for k, step in enumerate(traj.steps):
                if k in picks:
                    yield task, traj, k, list(res.admissible_commands)
                if k == picks[-1]:
                    break
                res = env.step(step.action)
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-alfworld-v2")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--per-type", type=int, default=1)
    ap.add_argument("--steps-per-traj", type=int, default=3)
    ap.add_argument("--task-types", nargs="*")
    ap.add_argument("--beams", default="1,4,16")
    ap.add_argument("--max-candidates", type=int, default=1200)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--alfworld-instructions", action="store_true",
                    help="the action prompt's system text of ALFWorld (what the first measurement, 2026-12-06, used)")
    a = ap.parse_args()

    import torch

    from workbench.agents.loop import Agent
    from workbench.agents.policy import build_policy
    from workbench.envs.base import Task  # noqa: F401 - the states' tasks
    from workbench.models.loading import load_model

    torch.set_num_threads(1)
    lm = load_model(a.model, dtype=a.dtype)
    agent = (Agent.from_model(lm) if a.alfworld_instructions
             else Agent.for_benchmark(lm, "scienceworld", decode="score"))
    policy = build_policy("none")
    beams = [int(b) for b in a.beams.split(",")]
    arms = ["score", *[f"constrained@{b}" for b in beams], "generate"]
    rows = []
    for task, traj, k, admissible in states(a.split, a.per_type, a.steps_per_traj, a.task_types):
        if len(admissible) > a.max_candidates:
            continue
        gold = traj.steps[k].action
        policy.begin(task, traj.goal, traj.initial_observation)
        block = policy.memory(k, list(traj.steps[:k]))
        prompt = agent.build_prompt(block, traj.initial_observation, traj.goal, list(traj.steps[:k]),
                                    traj.steps[k].observation)
        row = {"task_id": task.task_id, "step": k, "n_valid": len(admissible), "gold": gold,
               "gold_valid": gold in admissible, "prompt_tokens": prompt.n_tokens}
        for arm in arms:
            agent.scorer.reset()
            agent.generator.reset()
            t0 = time.perf_counter()
            if arm == "score":
                r = agent.scorer.score(list(prompt.prefix), list(prompt.suffix), admissible)
                choice = admissible[r.best]
            elif arm.startswith("constrained@"):
                w = agent.scorer.write(list(prompt.prefix), list(prompt.suffix), admissible, beam=int(arm.split("@")[1]))
                choice = admissible[w.best]
                row[f"{arm}_forwards"] = w.forwards
            else:
                g = agent.generator.generate(list(prompt.prefix), list(prompt.suffix), admissible)
                choice = g.action
            row[f"{arm}_ms"] = round(1000 * (time.perf_counter() - t0), 1)
            row[f"{arm}_action"] = choice
        rows.append(row)
        print(json.dumps({k2: row[k2] for k2 in ("task_id", "step", "n_valid", "gold", "score_action",
                                                  "score_ms", f"constrained@{beams[-1]}_ms")}), flush=True)
    if not rows:
        raise SystemExit(f"no state of {a.split}@{a.per_type} has at most {a.max_candidates} valid actions")
    summary = {}
    for arm in arms:
        summary[arm] = {
            "median_ms": statistics.median(r[f"{arm}_ms"] for r in rows),
            "same_as_score": sum(r[f"{arm}_action"] == r["score_action"] for r in rows) / len(rows),
            "gold": sum(r[f"{arm}_action"] == r["gold"] for r in rows) / len(rows),
        }
    out = {"model": a.model, "dtype": a.dtype, "split": a.split, "per_type": a.per_type,
           "steps_per_traj": a.steps_per_traj, "n_states": len(rows),
           "gold_valid": sum(r["gold_valid"] for r in rows) / len(rows),
           "median_valid": statistics.median(r["n_valid"] for r in rows), "arms": summary, "rows": rows}
    for arm, s in summary.items():
        print(f"{arm:16s} median {s['median_ms']:8.0f} ms   same as score {100 * s['same_as_score']:5.1f} %   "
              f"gold {100 * s['gold']:5.1f} %")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
