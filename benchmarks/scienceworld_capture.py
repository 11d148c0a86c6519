"""What AGMR's capture costs on ScienceWorld's longest episodes (issue 48): the AGMR paper dropped the task types with
a step limit of 60 or more because storing ``output_attentions`` over long episodes ran out of GPU memory (its E.1).
The selective capture keeps q_t's row for the retrieval heads only: O(prompt) a step.

On the longest gold path among ``--split``'s variations of ``--task-types`` (default: the 7 types the paper dropped),
every step's decision is made as a Traj agent makes it (its retrieved trajectory, the constrained decode), once with
the AGMR capture of the model's committed retrieval heads and once without, interleaved (the order alternating
step by step, each arm with its own KV cache reused from step to step), on the gold path's states (the action played is the gold one). Printed:

* the steps, the longest prompt (tokens), the median step time of each arm and their ratio;
* the bytes the capture holds at the episode's end (every step's rows, float32) and what the full attention
  patterns of the same steps would take (``output_attentions``: every layer and head, query x key, in the model's
  dtype, for the decision's forward alone);
* the process's peak resident memory.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scienceworld_capture.py --json benchmarks/notes/scienceworld_capture.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-alfworld-v2")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--split", default="test@10")
    ap.add_argument("--task-types", nargs="*")
    ap.add_argument("--max-steps", type=int, help="stop after this many steps of the episode")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--full-context", action="store_true",
                    help="the prompt's budget is the model's context (8,192), not ScienceWorld's 4,096 (what the "
                         "first measurement, 2026-12-06, used: prompts up to 5,465 tokens)")
    a = ap.parse_args()

    import torch

    from workbench.agents.loop import Agent
    from workbench.agents.policy import build_policy
    from workbench.attention.heads import default_retrieval_heads
    from workbench.attention.instrument import CaptureInstrument
    from workbench.envs.scienceworld import INSTRUCTIONS, LONG_TYPES, ScienceWorldEnv, load_scienceworld_tasks
    from workbench.envs.scienceworld_experts import default_scienceworld_base, gold_trajectories
    from workbench.models.loading import load_model

    torch.set_num_threads(1)
    types = a.task_types or list(LONG_TYPES)
    golds = [t for t in gold_trajectories(a.split, progress=False, task_types=types) if t.success]
    traj = max(golds, key=lambda t: t.n_steps)
    task = next(t for t in load_scienceworld_tasks(a.split, types) if t.task_id == traj.task_id)
    lm = load_model(a.model, dtype=a.dtype)
    # two agents on the one model, each with its own KV cache reused step to step as in an episode
    agents = {arm: (Agent.from_model(lm, decode="constrained", instructions=INSTRUCTIONS) if a.full_context
                    else Agent.for_benchmark(lm, "scienceworld")) for arm in ("capture", "plain")}
    agent = agents["plain"]
    heads = default_retrieval_heads(a.model, (lm.n_layers, lm.n_heads))
    inst = CaptureInstrument(agents["capture"], heads)
    policy = build_policy("traj", "minilm", memory_base=str(default_scienceworld_base().root))
    policy.begin(task, traj.goal, traj.initial_observation)
    env = ScienceWorldEnv(step_limits=False)
    res = env.reset(task)
    n = min(traj.n_steps, a.max_steps or traj.n_steps)
    rows, times = [], {"capture": [], "plain": []}
    pattern_bytes = 0
    dtype_bytes = torch.finfo(next(lm.hf_model.parameters()).dtype).bits // 8
    try:
        for k in range(n):
            history = list(traj.steps[:k])
            block = policy.memory(k, history)
            prompt = agent.build_prompt(block, traj.initial_observation, traj.goal, history, traj.steps[k].observation)
            admissible = list(res.admissible_commands)
            arms = ("capture", "plain") if k % 2 == 0 else ("plain", "capture")
            for arm in arms:
                t0 = time.perf_counter()
                agents[arm].write(prompt, admissible, [inst] if arm == "capture" else [])
                times[arm].append(time.perf_counter() - t0)
            n_t = prompt.n_tokens
            pattern_bytes += lm.n_layers * lm.n_heads * n_t * n_t * dtype_bytes
            rows.append({"step": k, "prompt_tokens": n_t, "n_valid": len(admissible),
                         "capture_s": round(times["capture"][-1], 3), "plain_s": round(times["plain"][-1], 3)})
            res = env.step(traj.steps[k].action)
            print(json.dumps(rows[-1]), flush=True)
    finally:
        env.close()
    held = sum(s.rows.numel() * s.rows.element_size() for s in inst.capture.steps)
    out = {
        "model": a.model, "dtype": a.dtype, "task_id": task.task_id, "task_type": task.task_type,
        "gold_steps": traj.n_steps, "steps_measured": n, "memory_entry": policy.memory(0, []).entry.entry_id,
        "heads": [list(h) for h in heads], "max_prompt_tokens": max(r["prompt_tokens"] for r in rows),
        "median_step_s": {arm: round(statistics.median(v), 3) for arm, v in times.items()},
        "time_ratio": round(statistics.median(times["capture"]) / statistics.median(times["plain"]), 3),
        "capture_bytes_held": held, "full_patterns_bytes": pattern_bytes,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "rows": rows,
    }
    print(f"{task.task_id}: {n} steps, prompts up to {out['max_prompt_tokens']} tokens; median step "
          f"{out['median_step_s']['plain']} s plain, {out['median_step_s']['capture']} s with the capture "
          f"(ratio {out['time_ratio']}); the capture holds {held / 2**20:.2f} MiB for the episode, full patterns "
          f"would be {pattern_bytes / 2**30:.1f} GiB; peak RSS {out['peak_rss_mib']} MiB")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
