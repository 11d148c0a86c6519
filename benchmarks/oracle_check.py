"""The expert for any state, checked two ways (a benchmark, not a test: the rollouts take minutes).

1. On the planner's own states: agreement with the planner and the share with no answer, per split.
2. From states the planner never visited: take N episodes of an agent's run folder, cut each at a random step
   (seeded, at most ``--max-prefix`` so the oracle has steps left of the 50), replay the agent's prefix in the
   game and let the oracle finish; count the games won.

    OMP_NUM_THREADS=1 python benchmarks/oracle_check.py --run runs/full/01_baselines/smollm2-135m-alfworld/none --n 60

Prints one JSON line per part; the last line is ``agreement=<min over splits> no_answer=<max> takeover_won=<w>/<n>``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.envs.alfworld import ALFWorldEnv  # noqa: E402
from workbench.envs.memory_base import expert_trajectories_for  # noqa: E402
from workbench.envs.oracle import oracle_agreement, oracle_rollout  # noqa: E402
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.run_folder import load_run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", help="an agent's run folder (its split's planner plans are the oracle's)")
    p.add_argument("--n", type=int, default=60)
    p.add_argument("--max-prefix", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    agreements = {}
    for split in ("valid_train", "valid_seen", "valid_unseen"):
        agreements[split] = oracle_agreement(expert_trajectories_for(split))
        print(json.dumps({"split": split, **agreements[split]}))
    won = n = 0
    if a.run:
        trajs, _, config = load_run(a.run)
        split = config["run"]["split"]
        plans = {e.task_id: e.actions() for e in expert_trajectories_for(split) if e.source == "planner"}
        tasks = {t.task_id: t for t in select_tasks(RunConfig(out="", split=split, tasks="all"))}
        rng = random.Random(a.seed)
        sample = [t for t in trajs if t.task_id in plans]
        rng.shuffle(sample)
        env, t0 = ALFWorldEnv(), time.perf_counter()
        for t in sample[: a.n]:
            k = rng.randint(1, min(a.max_prefix, max(1, t.n_steps - 1)))
            r = oracle_rollout(env, tasks[t.task_id], plans[t.task_id], t.actions()[:k])
            n += 1
            won += r["won"]
            if not r["won"]:
                print(json.dumps({"lost": t.task_id, "prefix": k, **r}))
        env.close()
        print(json.dumps({"run": a.run, "takeovers": n, "won": won, "wall_s": round(time.perf_counter() - t0)}))
    print(f"agreement={min(v['agreement'] for v in agreements.values()):.4f} "
          f"no_answer={max(v['no_answer'] for v in agreements.values()):.4f} takeover_won={won}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
