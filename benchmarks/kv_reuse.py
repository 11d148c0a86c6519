"""Cost of a decision step with KV prefix reuse vs re-encoding the whole prompt, side by side.

Plays the same ALFWorld episode prefix with both agents (identical prompts, identical candidates),
interleaving them step by step so machine noise hits both alike. ``--decode score`` (the default) checks that
both scorers choose the same actions; ``--decode generate`` compares the written replies of
:class:`~workbench.models.generation.PrefixGenerator` with and without the cache and counts the steps whose
replies are identical token for token (the episode follows the cached agent). Prints per-step medians and, as
its last line, ``kv_ratio=<reuse / re-encode>`` (with ``identical=<n>/<steps>`` when generating).

    .venv/bin/python benchmarks/kv_reuse.py --memory traj --steps 12
    .venv/bin/python benchmarks/kv_reuse.py --model smollm2-135m-alfworld-v2 --dtype bfloat16 --memory none \
        --decode generate --steps 30
"""

from __future__ import annotations

import argparse
import statistics
import time

from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.envs import ALFWorldEnv, load_alfworld_tasks
from workbench.envs.normalize import split_initial_observation
from workbench.memory.trajectory import Step
from workbench.models import load_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--memory", default="traj")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--decode", choices=["score", "generate"], default="score")
    a = ap.parse_args()
    lm = load_model(a.model, dtype=a.dtype)
    reuse, fresh = Agent.from_model(lm, reuse_cache=True), Agent.from_model(lm, reuse_cache=False)
    task = load_alfworld_tasks("valid_unseen")[a.task]
    env, policy = ALFWorldEnv(), build_policy(a.memory)
    res = env.reset(task)
    room, goal = split_initial_observation(res.observation)
    policy.begin(task, goal, room)
    history, obs, t_reuse, t_fresh, n_tokens, identical = [], res.observation, [], [], [], 0
    for t in range(a.steps):
        block = policy.memory(t, history)
        prompt = reuse.build_prompt(block, room, goal, history, obs)
        cands = list(res.admissible_commands)
        t0 = time.perf_counter()
        if a.decode == "score":
            r1 = reuse.decide(prompt, cands)
            t1 = time.perf_counter()
            r2 = fresh.decide(prompt, cands)
            t2 = time.perf_counter()
            assert r1.best == r2.best, "reuse and re-encoding must choose the same action"
            action = cands[r1.best]
        else:
            g1 = reuse.generator.generate(prompt.prefix, prompt.suffix, cands)
            t1 = time.perf_counter()
            g2 = fresh.generator.generate(prompt.prefix, prompt.suffix, cands)
            t2 = time.perf_counter()
            identical += g1.text == g2.text
            if g1.text != g2.text:
                print(f"step {t} ({prompt.n_tokens} tokens): reuse wrote {g1.text!r}, re-encode {g2.text!r}")
            action = g1.action
        if t:  # step 0 encodes the whole prompt in both
            t_reuse.append(t1 - t0)
            t_fresh.append(t2 - t1)
        n_tokens.append(prompt.n_tokens)
        step = Step(observation=obs, action=action)
        res = env.step(step.action)
        history.append(step)
        obs = res.observation
        if res.done:
            break
    mr, mf = statistics.median(t_reuse), statistics.median(t_fresh)
    print(f"task={task.task_id} memory={a.memory} decode={a.decode} dtype={a.dtype} steps={len(t_reuse)} "
          f"prompt_tokens={n_tokens[0]}..{n_tokens[-1]}")
    print(f"median step: reuse={mr * 1000:.0f} ms  re-encode={mf * 1000:.0f} ms")
    print(f"kv_ratio={mr / mf:.3f}" + (f" identical={identical}/{len(n_tokens)}" if a.decode == "generate" else ""))


if __name__ == "__main__":
    main()
