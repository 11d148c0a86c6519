"""What AGMR's capture costs on ScienceWorld's longest episodes (issue 48).

The AGMR paper dropped the ScienceWorld task types with a step limit of 60 or more because storing
``output_attentions`` over long episodes ran out of GPU memory (its E.1). The workbench's selective capture keeps the
decision query's row of the retrieval heads only: O(prompt) a step, not O(prompt²) per layer and head.

:func:`capture_cost` replays the longest gold path among a split's variations of some task types and makes every
step's decision as a Traj agent makes it (its retrieved trajectory, the constrained decode), once with the capture of
the model's committed retrieval heads and once without, interleaved (the order alternating step by step, each arm with
its own KV cache reused from step to step as in an episode); the action played is the gold one, so both arms see the
same states. ``benchmarks/scienceworld_capture.py`` is its command line; notebook 08 shows it.
"""

from __future__ import annotations

import resource
import statistics
import time

__all__ = ["capture_cost"]


def capture_cost(lm, split: str = "test@10", task_types: list[str] | None = None, max_steps: int | None = None,
                 full_context: bool = False, progress=None) -> dict:
    """The capture's time and memory against a plain decision, on the longest gold path of ``split`` (``task_types``:
    default the 7 types the AGMR paper dropped).

    Args:
        lm (LoadedModel): the loaded agent model (its committed retrieval heads are captured).
        max_steps: stop after this many steps of the episode (None: all of it).
        full_context: the prompt's budget is the model's context, not ScienceWorld's 4,096 tokens.
        progress (Callable[[dict], Any] | None): called with each step's row (a dict), e.g. ``print``.

    Returns:
        the task, the steps measured, the longest prompt, each arm's median step time and their ratio, the bytes the
        capture holds at the end (every step's rows as stored) against the bytes the full attention patterns of the
        same decisions would take (every layer and head, query x key, in the model's dtype), the process's peak
        resident memory (MiB), and one row per step.

    Raises:
        ValueError: no gold path of ``split`` among ``task_types`` ends in success.
    """
    import torch

    from workbench.agents.loop import Agent
    from workbench.agents.policy import build_policy
    from workbench.attention.heads import default_retrieval_heads
    from workbench.attention.instrument import CaptureInstrument
    from workbench.envs.scienceworld import (
        INSTRUCTIONS,
        LONG_TYPES,
        ScienceWorldEnv,
        load_scienceworld_tasks,
    )
    from workbench.envs.scienceworld_experts import (
        default_scienceworld_base,
        gold_trajectories,
    )

    types = list(task_types or LONG_TYPES)
    golds = [t for t in gold_trajectories(split, progress=False, task_types=types) if t.success]
    if not golds:
        raise ValueError(f"no winning gold path among {split}'s variations of {', '.join(types)}")
    traj = max(golds, key=lambda t: t.n_steps)
    task = next(t for t in load_scienceworld_tasks(split, types) if t.task_id == traj.task_id)
    # two agents on the one model, each with its own KV cache reused step to step as in an episode
    agents = {arm: (Agent.from_model(lm, decode="constrained", instructions=INSTRUCTIONS) if full_context
                    else Agent.for_benchmark(lm, "scienceworld")) for arm in ("capture", "plain")}
    agent = agents["plain"]
    heads = default_retrieval_heads(lm.name, (lm.n_layers, lm.n_heads))
    inst = CaptureInstrument(agents["capture"], heads)
    policy = build_policy("traj", "minilm", memory_base=str(default_scienceworld_base().root))
    policy.begin(task, traj.goal, traj.initial_observation)
    env = ScienceWorldEnv(step_limits=False)
    res = env.reset(task)
    n = min(traj.n_steps, max_steps or traj.n_steps)
    rows, times = [], {"capture": [], "plain": []}
    pattern_bytes = 0
    dtype_bytes = torch.finfo(next(lm.hf_model.parameters()).dtype).bits // 8
    try:
        for k in range(n):
            history = list(traj.steps[:k])
            block = policy.memory(k, history)
            prompt = agent.build_prompt(block, traj.initial_observation, traj.goal, history, traj.steps[k].observation)
            admissible = list(res.admissible_commands)
            for arm in (("capture", "plain") if k % 2 == 0 else ("plain", "capture")):
                t0 = time.perf_counter()
                agents[arm].write(prompt, admissible, [inst] if arm == "capture" else [])
                times[arm].append(time.perf_counter() - t0)
            n_t = prompt.n_tokens
            pattern_bytes += lm.n_layers * lm.n_heads * n_t * n_t * dtype_bytes
            rows.append({"step": k, "prompt_tokens": n_t, "n_valid": len(admissible),
                         "capture_s": round(times["capture"][-1], 3), "plain_s": round(times["plain"][-1], 3)})
            if progress is not None:
                progress(rows[-1])
            res = env.step(traj.steps[k].action)
    finally:
        env.close()
    held = sum(s.rows.numel() * s.rows.element_size() for s in inst.capture.steps)
    return {
        "model": lm.name, "dtype": lm.dtype, "task_id": task.task_id, "task_type": task.task_type,
        "gold_steps": traj.n_steps, "steps_measured": n, "memory_entry": policy.memory(0, []).entry.entry_id,
        "heads": [list(h) for h in heads], "max_prompt_tokens": max(r["prompt_tokens"] for r in rows),
        "median_step_s": {arm: round(statistics.median(v), 3) for arm, v in times.items()},
        "time_ratio": round(statistics.median(times["capture"]) / statistics.median(times["plain"]), 3),
        "capture_bytes_held": held, "full_patterns_bytes": pattern_bytes,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "rows": rows,
    }
