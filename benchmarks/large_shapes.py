"""7-8B shapes, measured: one decision step of models with the exact shapes of Llama-3.1-8B and Qwen2.5-7B
(random weights, bf16, a few decoder layers at full width, the real vocabulary) at 2k, 4k and 8k prompt tokens,
scored three ways side by side:

* ``plain``: the scorer's forward (prompt + 12 candidates packed as a trie), nothing captured;
* ``capture``: the same forward with the selective capture of every head of every layer (q_t's row only);
* ``patterns``: the same forward keeping every head's whole pattern (``hook_pattern``), what ran AGMR out of
  memory at these sizes.

Each (shape, length, mode) runs in its own process, so its peak resident memory is its own; after a short warm-up
step, the step is timed ``--repeats`` times and the fastest kept. Per run: the step's time, the process's peak
memory, and the bytes the instrument keeps after the step; per layer and extrapolated to
the full depth (32 layers for Llama-3.1-8B, 28 for Qwen2.5-7B; the kept bytes scale with depth, the transient peak
of one layer's eager attention does not). The last lines give the ratios issue 45 asks for (capture memory / full
patterns at 8k; capture step time / plain step time).

    OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/large_shapes.py --lengths 2048 4096 8192 \\
        --layers 2 --out runs/large_shapes/cpu.jsonl
    OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/large_shapes.py --side-by-side 3 \
        --lengths 2048 4096 --out runs/large_shapes/cpu_side_by_side.jsonl      # the time ratios
    .venv/bin/python benchmarks/large_shapes.py --device cuda ...      # the GPU check (make gpu-check)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

SHAPES = {
    # name: (config class, model class, full depth, config)
    "llama-3.1-8b": ("LlamaConfig", "LlamaForCausalLM", 32, dict(
        hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        vocab_size=128256, rope_theta=500000.0, max_position_embeddings=131072, rms_norm_eps=1e-5)),
    "qwen2.5-7b": ("Qwen2Config", "Qwen2ForCausalLM", 28, dict(
        hidden_size=3584, intermediate_size=18944, num_attention_heads=28, num_key_value_heads=4,
        vocab_size=152064, rope_theta=1000000.0, max_position_embeddings=32768, rms_norm_eps=1e-6)),
}
CANDIDATES = [f"go to drawer {k}" for k in range(1, 7)] + [f"take mug {k} from desk 1" for k in range(1, 7)]


def _build(shape: str, layers: int, device: str, dtype: str):
    """(the wrapped model of ``shape`` with ``layers`` decoder layers, seconds to build it, the full depth)."""
    import torch
    import transformers

    from workbench.models.loading import _dequantized_dir, wrap
    from workbench.models.registry import get_model_spec

    tok = transformers.AutoTokenizer.from_pretrained(_dequantized_dir(get_model_spec("smollm2-135m-instruct")))
    cname, mname, depth, shape_cfg = SHAPES[shape]
    cfg = getattr(transformers, cname)(num_hidden_layers=layers, **shape_cfg)
    cfg.architectures = [mname]
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(device):  # built in the dtype on the device: no float32 copy of ~2-4 GB of weights first
        model = getattr(transformers, mname)._from_config(cfg, dtype=getattr(torch, dtype)).eval()
    build_s = time.perf_counter() - t0
    return wrap(model, tok, name=shape, hf_id=f"shapes/{shape}", device=device), build_s, depth


def _prompt(tok, length: int) -> list[int]:
    return (tok("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a drawer 2. ",
                add_special_tokens=False).input_ids * (length // 20 + 1))[:length]


def one(shape: str, length: int, mode: str, layers: int, device: str, dtype: str, repeats: int = 2) -> dict:
    """One step in this process (see the module docstring)."""
    import torch

    from workbench.attention.capture import AttentionCapture
    from workbench.models.device import describe_device, resolve_device
    from workbench.models.scoring import ActionScorer

    device = resolve_device(device)
    lm, build_s, depth = _build(shape, layers, device, dtype)
    ids = _prompt(lm.tokenizer, length)
    scorer = ActionScorer(lm, reuse_cache=False)
    kept: list = []
    hooks, on_layout = [], None
    if mode == "capture":
        cap = AttentionCapture(lm, "all", scorer=scorer)
        hooks, on_layout = cap.hooks(), cap.on_layout
    elif mode == "patterns":
        def keep(pattern, hook):
            kept.append(pattern.detach().clone())
        hooks = [(f"blocks.{layer}.attn.hook_pattern", keep) for layer in range(layers)]
    # a short step first: one-time costs (kernel selection, first allocations) out of the timed ones
    ActionScorer(lm, reuse_cache=False).score(ids[:125], ids[125:128], CANDIDATES)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):  # the fastest of the repeats: the least disturbed by the rest of the machine
        kept.clear()
        t0 = time.perf_counter()
        scorer.score(ids[:-3], ids[-3:], CANDIDATES, hooks=hooks, on_layout=on_layout)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    step_s = min(times)
    if mode == "capture":
        kept_bytes = cap.rows.numel() * cap.rows.element_size()
    else:
        kept_bytes = sum(t.numel() * t.element_size() for t in kept)
    out = {"shape": shape, "length": length, "mode": mode, "layers": layers, "full_depth": depth, "dtype": dtype,
           "device": describe_device(device), "build_s": round(build_s, 1), "step_s": round(step_s, 3),
           "step_s_all": [round(t, 3) for t in times],
           "kept_mib": round(kept_bytes / 2**20, 3), "threads": torch.get_num_threads()}
    if device.startswith("cuda"):
        out["peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    else:
        out["peak_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB
    return out


def side_by_side(shape: str, length: int, layers: int, device: str, dtype: str, rounds: int) -> dict:
    """Step times of the three modes in one process, one model, interleaved round by round (noise hits them
    alike): the time ratios, measured as the guide asks. Returns the median per mode and the ratios."""
    import statistics

    import torch

    from workbench.attention.capture import AttentionCapture
    from workbench.models.device import resolve_device
    from workbench.models.scoring import ActionScorer

    device = resolve_device(device)
    lm, _, _ = _build(shape, layers, device, dtype)
    ids = _prompt(lm.tokenizer, length)
    scorer = ActionScorer(lm, reuse_cache=False)
    cap = AttentionCapture(lm, "all", scorer=scorer, keep_steps=False)
    kept: list = []

    def keep(pattern, hook):
        kept.append(pattern.detach().clone())

    modes = {"plain": ([], None), "capture": (cap.hooks(), cap.on_layout),
             "patterns": ([(f"blocks.{layer}.attn.hook_pattern", keep) for layer in range(layers)], None)}
    scorer.score(ids[:125], ids[125:128], CANDIDATES)  # warm-up
    times: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode, (hooks, on_layout) in modes.items():
            kept.clear()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            scorer.score(ids[:-3], ids[-3:], CANDIDATES, hooks=hooks, on_layout=on_layout)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times[mode].append(time.perf_counter() - t0)
    med = {m: statistics.median(t) for m, t in times.items()}
    return {"shape": shape, "length": length, "layers": layers, "rounds": rounds, "device": device,
            "median_s": {m: round(v, 3) for m, v in med.items()},
            "capture_over_plain": round(med["capture"] / med["plain"], 3),
            "patterns_over_plain": round(med["patterns"] / med["plain"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--lengths", nargs="+", type=int, default=[2048, 4096, 8192])
    ap.add_argument("--modes", nargs="+", default=["plain", "capture", "patterns"])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--repeats", type=int, default=2, help="timed steps per run (the fastest is reported)")
    ap.add_argument("--out", help="append each run's JSON line here too")
    ap.add_argument("--one", nargs=3, metavar=("SHAPE", "LENGTH", "MODE"), help=argparse.SUPPRESS)
    ap.add_argument("--side-by-side", type=int, metavar="ROUNDS", default=0,
                    help="instead: time the three modes interleaved in one process, ROUNDS rounds per shape and "
                    "length (the time ratios; memory needs the separate processes)")
    a = ap.parse_args()
    if a.side_by_side:
        for shape in a.shapes:
            for length in a.lengths:
                row = side_by_side(shape, length, a.layers, a.device, a.dtype, a.side_by_side)
                print(json.dumps(row), flush=True)
                if a.out:
                    with open(a.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
        return
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]), a.one[2], a.layers, a.device, a.dtype, a.repeats)), flush=True)
        return
    rows = []
    for shape in a.shapes:
        for length in a.lengths:
            for mode in a.modes:
                p = subprocess.run([sys.executable, __file__, "--one", shape, str(length), mode, "--layers",
                                    str(a.layers), "--device", a.device, "--dtype", a.dtype, "--repeats",
                                    str(a.repeats)],
                                   capture_output=True, text=True, env=os.environ)
                line = next((ln for ln in p.stdout.splitlines() if ln.startswith("{")), None)
                why = (p.stderr.strip().splitlines() or [""])[-1][:300]
                if p.returncode < 0:  # a signal: on Linux a SIGKILL with no message is the out-of-memory killer's
                    why = f"killed by signal {-p.returncode}" + (" (out of memory)" if p.returncode == -9 else "") + (
                        f": {why}" if why else "")
                row = json.loads(line) if line else {"shape": shape, "length": length, "mode": mode,
                                                     "error": why or f"exit {p.returncode}"}
                rows.append(row)
                print(json.dumps(row), flush=True)
                if a.out:
                    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
                    with open(a.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
    summarize(rows)


def summarize(rows: list[dict]) -> None:
    """Per layer and at full depth; the ratios."""
    ok = [r for r in rows if "error" not in r]
    by = {(r["shape"], r["length"], r["mode"]): r for r in ok}
    for r in ok:
        per_layer_kept = r["kept_mib"] / r["layers"]
        print(f"{r['shape']:13s} {r['length']:5d} {r['mode']:8s} step {r['step_s']:8.3f}s "
              f"({r['step_s'] / r['layers']:.3f}s/layer)  peak {r['peak_mib']:9.1f} MiB  kept {r['kept_mib']:10.3f} MiB "
              f"({per_layer_kept:.3f}/layer, {per_layer_kept * r['full_depth'] / 1024:.3f} GiB at {r['full_depth']} "
              "layers)")
    for (shape, length, mode), r in sorted(by.items()):
        if mode != "capture":
            continue
        plain, pat = by.get((shape, length, "plain")), by.get((shape, length, "patterns"))
        line = f"ratio {shape} {length}:"
        if pat and pat["kept_mib"]:
            line += f" capture/patterns memory {r['kept_mib'] / pat['kept_mib']:.5f}"
        if plain:
            line += f" capture/plain time {r['step_s'] / plain['step_s']:.3f}"
        print(line)


if __name__ == "__main__":
    main()
