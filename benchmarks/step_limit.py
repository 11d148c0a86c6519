"""How far an agent step is from this machine's limit, in fp32 and bf16 side by side in one run (issue 49).

For each dtype, on the same teacher-forced steps (Traj memory, the default agent):

* **FLOPs of the step**, counted from the model's config and the step's token counts: every new query token (the
  prompt's uncached tail and the candidate trie's nodes) through every layer's projections and MLP, attention over
  the rectangle the kernels compute (queries x all keys, cached and new), and the unembedding of the rows the scores
  read (q_t and the trie's inner nodes; a leaf, a candidate's end token, predicts nothing).
* **This core's peak** for the model's shapes: the best of repeated ``linear`` products (tokens x hidden) @
  (hidden x intermediate) at the step's median token count, in that dtype, one thread.
* **limit_ratio** = step time / (FLOPs / peak), summed over the steps, for each path:

  - ``bridge``: the agent's step through the TransformerLens bridge (``--forward bridge``: eager attention in every
    layer, the bridge's hook points, KV prefix reuse), what every step ran before issue 49;
  - ``plain``: the default now (``--forward auto``) for a step no instrument hooks: the same scorer over the plain
    transformers model on the bridge's own weights (:func:`workbench.models.plain.plain_model`);
  - ``plain-whole``: the plain path with the attention's fp32 softmax and the scores' log-softmax over whole
    tensors (``SOFTMAX_BLOCK_BYTES`` / ``LOG_SOFTMAX_BLOCK_BYTES`` unbounded), as the plain path ran before they
    went by blocks of rows;
  - ``plain-all-ops``: the plain path with the scaling and the mask applied to every score, as before
    :data:`workbench.models.plain.EXACT_SHORTCUTS` (a power-of-two scaling moved onto the queries, the mask added
    from its first non-zero key column; both bit for bit);
  - ``hf-sdpa``: the same scorer over a copy of the weights with transformers' fused
    ``scaled_dot_product_attention`` (a candidate, measured, not used);
  - ``compiled``: ``--forward compiled`` (:mod:`workbench.models.compiled`: the plain model's decoder stack through
    ``torch.compile``, eager's operations fused by inductor); its one-off compile (the first steps of the process)
    is timed apart (``compile_s``: the extra time of its first three steps over the plain path's, before the timed
    states) and left out of its step times.

  ``--glibc-defaults`` runs it all with glibc's own allocator thresholds (``WORKBENCH_MALLOPT=0``: every large
  temporary a fresh ``mmap``, page faults at first touch), the state before :mod:`workbench.models.allocator`; the
  allocator is the process's, so that comparison is two runs, not interleaved arms.

  Each path keeps its own KV cache and its decisions are compared with the bridge's: same action, and the largest
  score difference (a path is kept only if fp32 stays within 1e-5 and bf16 picks the same action at >= 99 % of
  steps).

``--capture retrieval|all`` times a *captured* step instead (what AGMR's captured episodes, ``CaptureInstrument`` and
the live session's attention panel run): every step watched by an attention capture of the model's committed
retrieval heads or of every head, through the bridge's hooks (``bridge``) and through the plain path's read-only taps
(``plain``), the rows compared as well as the scores.

Then (``--sweep-tasks``) the same episodes played by 2 Ray workers with every unhooked step through the bridge
(``--forward bridge``), through the plain path (the default) and, with ``--sweep-compiled``, compiled
(``--forward compiled``, each worker's compile inside the timed hour): episodes per hour of each, timed from all
workers ready, and whether each wrote the bridge's trajectories.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/step_limit.py --json benchmarks/notes/step_limit.json
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/step_limit.py --paths bridge,plain,compiled --tasks 0:134:6 \
        --steps 136 --sweep-tasks '' --json benchmarks/notes/step_limit_compiled.json
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/step_limit.py --glibc-defaults --sweep-tasks '' \
        --json benchmarks/notes/step_limit_glibc_defaults.json

Run it on an otherwise idle machine (timings are medians of interleaved arms; the ratios, not the times, carry).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch

from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, select_tasks
from workbench.models import load_model
from workbench.models.loading import load_transformers_model
from workbench.models.registry import DEFAULT_AGENT
from workbench.models.scoring import ActionScorer



class HFAsBridge:
    """A plain transformers model called the way ``ActionScorer`` calls the bridge (``return_type`` dropped), so
    the very same scoring code runs without the bridge."""

    def __init__(self, hf) -> None:
        self.hf = hf

    def __call__(self, inp, return_type: str, **kwargs):
        out = self.hf(input_ids=inp, use_cache=True, **kwargs)
        return out.logits, out.past_key_values


def hf_scorer(lm, attn: str, dtype: str) -> ActionScorer:
    """An ``ActionScorer`` over an unbridged copy of ``lm``'s weights with attention implementation ``attn``."""
    hf = load_transformers_model(lm.name, dtype=dtype)
    hf.set_attn_implementation(attn)
    return ActionScorer(replace(lm, bridge=HFAsBridge(hf), hf_model=hf, meta={}), forward="bridge")


class Patched:
    """A scorer whose forwards run with some module settings of the plain path changed (an earlier state of it):
    ``settings`` maps ``(module, name)`` to the value held during each score()."""

    def __init__(self, inner: ActionScorer, settings: dict) -> None:
        self.inner, self.settings = inner, settings

    def reset(self) -> None:
        self.inner.reset()

    def score(self, *args, **kwargs):
        saved = {(m, k): getattr(m, k) for m, k in self.settings}
        for (m, k), v in self.settings.items():
            setattr(m, k, v)
        try:
            return self.inner.score(*args, **kwargs)
        finally:
            for (m, k), v in saved.items():
                setattr(m, k, v)


def whole_blocks(inner: ActionScorer) -> Patched:
    """The softmax and log-softmax over whole tensors (one block), as the plain path ran before they went by rows."""
    from workbench.models import plain, scoring

    return Patched(inner, {(plain, "SOFTMAX_BLOCK_BYTES"): 1 << 62, (scoring, "LOG_SOFTMAX_BLOCK_BYTES"): 1 << 62})


def all_ops(inner: ActionScorer) -> Patched:
    """The scaling and the mask over every score (no :data:`workbench.models.plain.EXACT_SHORTCUTS`)."""
    from workbench.models import plain

    return Patched(inner, {(plain, "EXACT_SHORTCUTS"): False})


class Captured:
    """A scorer whose every step is watched by an attention capture of ``heads``: through the bridge's hooks for a
    ``forward="bridge"`` scorer, through the plain path's read-only taps for the default one. ``rows`` keeps each
    step's captured rows, so the paths' rows are compared too."""

    def __init__(self, lm, inner: ActionScorer, heads) -> None:
        from workbench.attention import AttentionCapture

        self.inner = inner
        self.capture = AttentionCapture(lm, heads, scorer=inner, keep_steps=False)
        self.rows: list[torch.Tensor] = []

    @property
    def last_path(self) -> str:
        return self.inner.last_path

    def reset(self) -> None:
        self.inner.reset()
        self.capture.reset()

    def score(self, prefix, suffix, cands):
        r = self.inner.score(prefix, suffix, cands, hooks=self.capture.hooks(), on_layout=self.capture.on_layout)
        self.rows.append(self.capture.rows)
        return r


def capture_heads(lm, which: str):
    """The heads ``--capture`` names: the model's committed retrieval heads, or every head."""
    from workbench.attention import default_retrieval_heads

    if which == "all":
        return "all"
    return default_retrieval_heads(lm.name, (lm.n_layers, lm.n_heads))


def step_flops(config, n_cached: int, n_q: int, n_logits: int) -> float:
    """FLOPs (2 per multiply-add) of one forward of ``n_q`` new tokens over ``n_cached`` cached ones, unembedding
    ``n_logits`` rows (module docstring)."""
    d, n_layers = config.hidden_size, config.num_hidden_layers
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or d // heads
    ff = config.intermediate_size
    per_token = d * heads * head_dim + 2 * d * kv_heads * head_dim + heads * head_dim * d + 3 * d * ff
    attention = 2 * heads * head_dim * n_q * (n_cached + n_q)  # QK^T and AV over the computed rectangle
    return 2.0 * (n_layers * (n_q * per_token + attention) + n_logits * d * config.vocab_size)


def matmul_peak(config, n_tokens: int, dtype: torch.dtype, reps: int = 30) -> float:
    """FLOP/s of the best of ``reps`` (tokens x hidden) @ (hidden x intermediate) products on this thread."""
    x = torch.randn(n_tokens, config.hidden_size, dtype=dtype)
    w = torch.randn(config.intermediate_size, config.hidden_size, dtype=dtype)
    for _ in range(5):
        torch.nn.functional.linear(x, w)
    best = min(_timed(lambda: torch.nn.functional.linear(x, w)) for _ in range(reps))
    return 2.0 * n_tokens * config.hidden_size * config.intermediate_size / best


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def steps_of(split: str, tasks: str, n_steps: int):
    """The first ``n_steps`` teacher-forced states of ``tasks``: (task, expert, step index)."""
    by_id = {t.task_id: t for t in select_tasks(RunConfig(out="", split=split, tasks=tasks))}
    out = []
    for e in expert_trajectories_for(split):
        if e.task_id in by_id:
            out += [(by_id[e.task_id], e, k) for k in range(e.n_steps)]
    return out[:n_steps]


def prompts_of(lm, states):
    """Each state's (new episode?, prefix, suffix, candidates) as the agent builds it under Traj memory (its
    retriever loaded on the first)."""
    agent = Agent.from_model(lm)  # its prompt builder
    policy = build_policy("traj")
    current = None
    for task, expert, k in states:
        first = expert.task_id != current
        if first:
            current = expert.task_id
            policy.begin(task, expert.goal, expert.initial_observation)
        step = expert.steps[k]
        block = policy.memory(k, list(expert.steps[:k]))
        prompt = agent.builder.build(expert.initial_observation, expert.goal, expert.steps[:k], memory=block.pieces,
                                     final_observation=step.observation if k else None)
        yield first, list(prompt.prefix), list(prompt.suffix), list(expert.meta["admissible"][k])
        policy.observe(step, expert.steps[k + 1].observation if k + 1 < expert.n_steps else "")


@torch.no_grad()
def warm_up(lm, states, compiled: ActionScorer) -> float:
    """The compile of ``compiled`` (its graphs: no cache, a fresh cache, a cropped one): seconds its first three steps
    of ``states`` take over the plain path's same steps. The retriever (a transformers model: building one after the
    compile would make every graph compile again, models.compiled) is loaded first, as in a run."""
    plain = ActionScorer(lm, forward="auto")
    prompts = list(prompts_of(lm, states[:3]))
    spent = 0.0
    for scorer, sign in ((compiled, 1.0), (plain, -1.0)):
        scorer.reset()
        for first, prefix, suffix, cands in prompts:
            if first:
                scorer.reset()
            t0 = time.perf_counter()
            scorer.score(prefix, suffix, cands)
            spent += sign * (time.perf_counter() - t0)
        scorer.reset()
    return spent


@torch.no_grad()
def measure(lm, dtype: str, states, scorers: dict[str, ActionScorer], bridge) -> dict:
    """Per path: step times, decisions and scores on ``states`` (arms interleaved, the order rotating), each path
    compared with ``bridge``."""
    scorers = {"bridge": bridge} | scorers
    times = {p: [] for p in scorers}
    best = {p: [] for p in scorers}
    scores = {p: [] for p in scorers}
    flops, tokens = [], []
    for i, (first, prefix, suffix, cands) in enumerate(prompts_of(lm, states)):
        if first:
            for s in scorers.values():
                s.reset()
        names = list(scorers)
        names = names[i % len(names):] + names[:i % len(names)]
        for p in names:
            t0 = time.perf_counter()
            r = scorers[p].score(prefix, suffix, cands)
            times[p].append(time.perf_counter() - t0)
            best[p].append(r.best)
            scores[p].append(r.scores)
            if p == "bridge":
                lay = r.layout
                n_q = lay.query_index + 1 + sum(b - a for a, b in lay.candidate_slices)
                # the rows whose logits the scores read: q_t and every candidate's parent nodes
                n_rows = len({lay.query_index} | {q for path in lay.candidate_paths for q in path[:-1]})
                flops.append(step_flops(lm.hf_model.config, lay.n_cached, n_q, n_rows))
                tokens.append(n_q)
    return {"times": times, "best": best, "scores": scores, "flops": flops, "tokens": tokens}


def sweep_rates(model: str, dtype: str, tasks: str, max_steps: int, out: Path, compiled: bool = False) -> dict:
    """Episodes per hour of 2 workers on ``tasks`` with each forward path, and how many episodes of each wrote the
    bridge's actions."""
    from throughput import episodes_per_hour  # beside this script

    from workbench.models.scoring import set_default_forward

    rates, played = {}, {}
    for forward in ("bridge", "auto") + (("compiled",) if compiled else ()):
        set_default_forward(forward)  # the executor hands it to its workers
        rates[forward], rows = episodes_per_hour(model, dtype, tasks, max_steps, 2, out / forward)
        played[forward] = {json.loads(line)["task_id"]: json.loads(line) for line in rows.decode().splitlines()}
    set_default_forward("auto")

    def same(forward: str) -> int:
        return sum(1 for k, ep in played[forward].items()
                   if [st["action"] for st in ep["steps"]] == [st["action"] for st in played["bridge"][k]["steps"]])

    report = {"episodes_per_hour": rates, "speedup": rates["auto"] / rates["bridge"], "episodes": len(played["auto"]),
              "same_actions": same("auto")}
    if compiled:
        report |= {"speedup_compiled": rates["compiled"] / rates["bridge"], "same_actions_compiled": same("compiled")}
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_AGENT)
    ap.add_argument("--split", default="valid_unseen")
    ap.add_argument("--tasks", default="0:134:13", help="teacher-forced tasks whose states are timed")
    ap.add_argument("--steps", type=int, default=100, help="states timed per dtype")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--sweep-tasks", default="0:134:17", help="episodes of the 2-worker comparison ('' skips it)")
    ap.add_argument("--sweep-dtype", default="bfloat16")
    ap.add_argument("--sweep-max-steps", type=int, default=20)
    ap.add_argument("--sweep-compiled", action="store_true", help="also play the sweep with --forward compiled")
    ap.add_argument("--paths", default="bridge,plain,plain-all-ops,plain-whole,hf-sdpa",
                    help="the paths timed, interleaved (bridge is always run: the others are compared with it)")
    ap.add_argument("--glibc-defaults", action="store_true",
                    help="glibc's allocator thresholds (WORKBENCH_MALLOPT=0): the allocator before issue 49's change")
    ap.add_argument("--capture", choices=("none", "retrieval", "all"), default="none",
                    help="capture q_t's rows at every step (the model's committed retrieval heads, or every head): "
                         "the bridge through its hooks, the plain path through its taps; times only those two paths")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    import os

    if a.glibc_defaults:
        os.environ["WORKBENCH_MALLOPT"] = "0"
    from workbench.models.allocator import allocator_state

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, CPU kernels: {torch.backends.cpu.get_cpu_capability()}, 1 thread")
    states = steps_of(a.split, a.tasks, a.steps) if a.dtypes else []
    report: dict = {"args": vars(a), "cpu_capability": torch.backends.cpu.get_cpu_capability(), "dtypes": {}}
    for dtype in [d for d in a.dtypes.split(",") if d]:  # --dtypes '': the sweep alone
        lm = load_model(a.model, dtype=dtype)
        report["allocator"] = allocator_state()
        print(f"allocator: {report['allocator']}")
        wanted = set(a.paths.split(","))
        scorers = {"plain": lambda: ActionScorer(lm, forward="auto"),
                   "plain-whole": lambda: whole_blocks(ActionScorer(lm, forward="auto")),
                   "plain-all-ops": lambda: all_ops(ActionScorer(lm, forward="auto")),
                   "hf-sdpa": lambda: hf_scorer(lm, "sdpa", dtype),
                   "compiled": lambda: ActionScorer(lm, forward="compiled")}
        if a.capture != "none":  # every path's steps captured: the bridge's hooks, the plain path's taps
            if wanted - {"bridge", "plain"}:
                print(f"--capture times bridge and plain only (a captured step is never compiled): "
                      f"{', '.join(sorted(wanted - {'bridge', 'plain'}))} left out")
            heads = capture_heads(lm, a.capture)
            scorers = {"plain": lambda: Captured(lm, ActionScorer(lm, forward="auto"), heads)}
            bridge = Captured(lm, ActionScorer(lm, forward="bridge"), heads)
        else:
            bridge = ActionScorer(lm, forward="bridge")
        scorers = {p: make() for p, make in scorers.items() if p in wanted}
        if "compiled" in scorers:  # its one-off compile, before the timed states
            report.setdefault("compile_s", {})[dtype] = warm_up(lm, states, scorers["compiled"])
            print(f"{dtype:8s} compiled: compile {report['compile_s'][dtype]:.0f} s (its first steps over the plain "
                  "path's)")
        m = measure(lm, dtype, states, scorers, bridge)
        tdtype = next(lm.hf_model.parameters()).dtype
        peak = matmul_peak(lm.hf_model.config, int(statistics.median(m["tokens"])), tdtype)
        ideal = sum(m["flops"]) / peak
        rows = {}
        for p, ts in m["times"].items():
            same = sum(x == y for x, y in zip(m["best"][p], m["best"]["bridge"])) / len(ts)
            dmax = max(max(abs(x - y) for x, y in zip(s, r)) for s, r in zip(m["scores"][p], m["scores"]["bridge"]))
            rows[p] = {"median_ms": 1e3 * statistics.median(ts), "limit_ratio": sum(ts) / ideal,
                       "same_action": same, "max_abs_dscore": dmax}
            line = (f"{dtype:8s} {p:9s} median {rows[p]['median_ms']:6.0f} ms  limit_ratio "
                    f"{rows[p]['limit_ratio']:.2f}  same action {same:.1%}  max |dscore| {dmax:.2e}")
            if isinstance(scorers.get(p, bridge), Captured):
                mine, ref = (scorers[p] if p in scorers else bridge).rows, bridge.rows
                rows[p]["max_abs_drow"] = max((x - y).abs().max().item() for x, y in zip(mine, ref))
                rows[p]["path"] = (scorers[p] if p in scorers else bridge).last_path
                line += f"  max |drow| {rows[p]['max_abs_drow']:.1e} ({rows[p]['path']})"
            print(line)
        gflop = statistics.median(m["flops"]) / 1e9
        print(f"{dtype:8s} {len(states)} steps: median {gflop:.1f} GFLOP over {statistics.median(m['tokens']):.0f} "
              f"query tokens; peak {peak / 1e9:.0f} GFLOP/s; ideal step {1e3 * ideal / len(states):.0f} ms")
        report["dtypes"][dtype] = {"paths": rows, "median_gflop": gflop, "peak_gflops": peak / 1e9,
                                   "median_query_tokens": statistics.median(m["tokens"]),
                                   "ideal_ms": 1e3 * ideal / len(states)}
        del lm, scorers
    if a.sweep_tasks:
        import shutil
        import tempfile

        tmp = Path(tempfile.mkdtemp(prefix="step-limit-"))
        try:
            report["sweep"] = sweep_rates(a.model, a.sweep_dtype, a.sweep_tasks, a.sweep_max_steps, tmp,
                                          compiled=a.sweep_compiled)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        sw = report["sweep"]
        print(f"2 workers, {sw['episodes']} episodes ({a.sweep_tasks}, {a.sweep_dtype}, {a.sweep_max_steps} steps max): "
              f"{sw['episodes_per_hour']['bridge']:.0f} episodes/h through the bridge, "
              f"{sw['episodes_per_hour']['auto']:.0f} on the plain path ({sw['speedup']:.2f}x); "
              f"the same actions in {sw['same_actions']} of {sw['episodes']} episodes")
        if a.sweep_compiled:
            print(f"2 workers compiled: {sw['episodes_per_hour']['compiled']:.0f} episodes/h "
                  f"({sw['speedup_compiled']:.2f}x the bridge, compiles included); the bridge's actions in "
                  f"{sw['same_actions_compiled']} of {sw['episodes']} episodes")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    print(" ".join(f"{d}:{p}={r['limit_ratio']:.2f}" for d, v in report["dtypes"].items()
                   for p, r in v["paths"].items()))


if __name__ == "__main__":
    main()
