"""Throughput of batch runs, measured side by side in one run on the default agent.

1. **The loop vs the model.** Teacher-forced steps of ``--tf-tasks`` (Traj memory): each step is scored by the
   agent (``ActionScorer`` through the TransformerLens bridge: prompt with spans, candidate trie, KV prefix reuse,
   hooks point) and, interleaved with it, by a plain transformers forward of exactly the same tokens over a cache
   of the same length (the same 4-D trie mask, no bridge, no scoring). ``step_vs_plain`` = median agent step /
   median plain forward, in the same dtype.
2. **bf16 vs fp32.** The first ``--bf16-steps`` of those steps again with the model in bfloat16 (agent and plain):
   ``bf16_speedup`` = fp32 step time / bf16 step time (median), ``agreement`` = share of steps where the bf16 agent
   picks the fp32 agent's action. This CPU's torch kernel level is printed: without AVX512-BF16 / AMX (or a GPU)
   bf16 matrix products have no native kernels and run far slower than fp32.
3. **Workers.** ``--episodes`` episodes (``--episode-tasks``, ``--max-steps``) played by the Ray executor with 1
   worker, then with 2, each after every worker has loaded the model and the game engine (``Worker.warm``), so
   the time is the episodes' alone. ``workers_speedup`` = episodes per hour with 2 / with 1; both runs must write
   identical trajectories.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/throughput.py            # about 10 min on 2 cores

Run it on an otherwise idle machine. The last line is
``step_vs_plain=… bf16_speedup=… agreement=… workers_speedup=…``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, select_tasks
from workbench.models import load_model
from workbench.models.scoring import ActionScorer, _trie


class PlainForward:
    """The scorer's forward without the bridge: the same tokens, positions, mask and cache length, through the
    transformers model alone (its own DynamicCache, cropped to the prefix after each step like the scorer's)."""

    def __init__(self, lm, scorer: ActionScorer) -> None:
        self.hf, self.scorer = lm.hf_model, scorer
        self.cache, self.cached = None, []

    @torch.no_grad()
    def __call__(self, prefix: list[int], suffix: list[int], candidates: list[str], n_cached: int) -> None:
        if self.cache is not None and n_cached < len(self.cached):
            if n_cached == 0:
                self.cache = None
            else:
                self.cache.crop(n_cached - self.cache.get_seq_length())
        n_cached = n_cached if self.cache is not None else 0
        new = prefix[n_cached:] + suffix
        node_tok, node_parent, node_depth, _ = _trie([self.scorer.encode_candidate(c) for c in candidates])
        base = n_cached + len(new)
        dtype = next(self.hf.parameters()).dtype
        mask = ActionScorer._mask(n_cached, len(new), node_parent, dtype=dtype)
        from transformers import DynamicCache

        out = self.hf(input_ids=torch.tensor([new + node_tok]), attention_mask=mask,
                      position_ids=torch.tensor([list(range(n_cached, base)) + [base + d for d in node_depth]]),
                      past_key_values=self.cache if self.cache is not None else DynamicCache(), use_cache=True)
        torch.log_softmax(out.logits[0].float(), dim=-1)
        self.cache = out.past_key_values
        self.cache.crop(len(prefix) - self.cache.get_seq_length())
        self.cached = list(prefix)


def tf_steps(split: str, tasks: str):
    """(task, expert, step index) of every teacher-forced step of ``tasks``, with the Traj policy begun per task."""
    by_id = {t.task_id: t for t in select_tasks(RunConfig(out="", split=split, tasks=tasks))}
    return [e for e in expert_trajectories_for(split) if e.task_id in by_id], by_id


def step_timings(lm, experts, by_id, max_steps: int | None = None) -> tuple[list[float], list[float], list[str]]:
    """Per teacher-forced step: agent time, plain-forward time (interleaved, alternating which goes first) and
    the agent's choice."""
    agent = Agent.from_model(lm)
    plain = PlainForward(lm, agent.scorer)
    policy = build_policy("traj")
    t_agent, t_plain, chosen = [], [], []
    for expert in experts:
        agent.scorer.reset()
        plain.cache, plain.cached = None, []
        policy.begin(by_id[expert.task_id], expert.goal, expert.initial_observation)
        adm = expert.meta["admissible"]
        for k, step in enumerate(expert.steps):
            if max_steps is not None and len(chosen) >= max_steps:
                return t_agent, t_plain, chosen
            block = policy.memory(k, list(expert.steps[:k]))
            prompt = agent.builder.build(expert.initial_observation, expert.goal, expert.steps[:k],
                                         memory=block.pieces, final_observation=step.observation if k else None)
            cands = list(adm[k])
            n_cached = agent.scorer._common_prefix(list(prompt.prefix))  # what the agent's forward reuses
            order = ("agent", "plain") if len(chosen) % 2 == 0 else ("plain", "agent")
            for arm in order:
                t0 = time.perf_counter()
                if arm == "agent":
                    res = agent.decide(prompt, cands)
                    t_agent.append(time.perf_counter() - t0)
                else:
                    plain(list(prompt.prefix), list(prompt.suffix), cands, n_cached)
                    t_plain.append(time.perf_counter() - t0)
            chosen.append(cands[res.best])
            policy.observe(step, expert.steps[k + 1].observation if k + 1 < expert.n_steps else "")
    return t_agent, t_plain, chosen


def episodes_per_hour(model: str, dtype: str, tasks: str, max_steps: int, workers: int, out: Path) -> tuple[float, bytes]:
    """Episodes per hour of ``workers`` Ray workers, timed from all workers ready to the last episode."""
    from workbench.eval.driver import drive
    from workbench.eval.executor import RayExecutor

    cfg = RunConfig(out=str(out), model=model, dtype=dtype, tasks=tasks, memory="traj", max_steps=max_steps,
                    teacher_forcing=False)
    executor = RayExecutor(workers=workers)
    try:
        executor.warm(cfg)
        t0 = time.perf_counter()
        report = drive([cfg], executor=executor, progress=False)
        wall = time.perf_counter() - t0
    finally:
        executor.close()
    n = report.metrics[cfg.out]["n_episodes"]
    return 3600 * n / wall, (out / "trajectories.jsonl").read_bytes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-alfworld")
    ap.add_argument("--split", default="valid_unseen")
    ap.add_argument("--tf-tasks", default="0:134:45", help="teacher-forced tasks for the step timings (fp32)")
    ap.add_argument("--bf16-steps", type=int, default=6, help="how many of those steps to time in bf16 as well")
    ap.add_argument("--episode-tasks", default="0:134:23", help="episodes for the workers comparison")
    ap.add_argument("--max-steps", type=int, default=10)
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, CPU kernels: {torch.backends.cpu.get_cpu_capability()}, 1 thread per process")

    experts, by_id = tf_steps(a.split, a.tf_tasks)
    fp32 = load_model(a.model, dtype="float32")
    fa, fp, fchosen = step_timings(fp32, experts, by_id)
    bf16 = load_model(a.model, dtype="bfloat16")
    ba, bp, bchosen = step_timings(bf16, experts, by_id, max_steps=a.bf16_steps)
    med = statistics.median
    step_vs_plain = med(fa) / med(fp)
    n_bf = len(bchosen)
    bf16_speedup = med(fa[:n_bf]) / med(ba)
    agreement = sum(x == y for x, y in zip(fchosen, bchosen)) / n_bf
    print(f"fp32: {len(fa)} steps, agent {med(fa) * 1e3:.0f} ms, plain forward {med(fp) * 1e3:.0f} ms (median)")
    print(f"bf16: {n_bf} steps, agent {med(ba) * 1e3:.0f} ms, plain forward {med(bp) * 1e3:.0f} ms; "
          f"bf16 step_vs_plain {med(ba) / med(bp):.2f}; same action as fp32 on {agreement:.1%}")

    tmp = Path(tempfile.mkdtemp(prefix="throughput-"))
    try:
        one, traj1 = episodes_per_hour(a.model, "float32", a.episode_tasks, a.max_steps, 1, tmp / "w1")
        two, traj2 = episodes_per_hour(a.model, "float32", a.episode_tasks, a.max_steps, 2, tmp / "w2")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert traj1 == traj2, "1 and 2 workers must write identical trajectories"
    print(f"episodes per hour ({a.episode_tasks}, {a.max_steps} steps max, fp32): 1 worker {one:.0f}, 2 workers "
          f"{two:.0f}; identical trajectories")
    numbers = {"step_vs_plain": round(step_vs_plain, 3), "bf16_speedup": round(bf16_speedup, 3),
               "agreement": round(agreement, 3), "workers_speedup": round(two / one, 3)}
    if a.json:
        Path(a.json).write_text(json.dumps(numbers | {
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "fp32_steps": len(fa), "bf16_steps": n_bf,
            "fp32_agent_ms": med(fa) * 1e3, "fp32_plain_ms": med(fp) * 1e3, "bf16_agent_ms": med(ba) * 1e3,
            "bf16_plain_ms": med(bp) * 1e3, "episodes_per_hour": {"1": one, "2": two}, "args": vars(a)}, indent=1))
    print(" ".join(f"{k}={v}" for k, v in numbers.items()))


if __name__ == "__main__":
    main()
