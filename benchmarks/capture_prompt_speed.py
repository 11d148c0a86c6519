"""``AttentionCapture.capture_prompt`` over every head of a whole prompt (what ``workbench heads score`` runs for each
of its prompts), through the bridge's hooks and on the plain path's taps, in fp32 and bf16 side by side: median
time and the largest row difference.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/capture_prompt_speed.py \
        --json benchmarks/notes/capture_prompt_speed.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from workbench.attention import AttentionCapture
from workbench.models import load_model
from workbench.models.registry import DEFAULT_AGENT
from workbench.models.scoring import ActionScorer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_AGENT)
    ap.add_argument("--tokens", type=int, default=800, help="prompt length")
    ap.add_argument("--reps", type=int, default=8, help="captures per path (interleaved)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    torch.set_num_threads(1)
    report: dict = {"args": vars(a), "cpu_capability": torch.backends.cpu.get_cpu_capability(), "dtypes": {}}
    for dtype in a.dtypes.split(","):
        lm = load_model(a.model, dtype=dtype)
        g = torch.Generator().manual_seed(0)
        tokens = torch.randint(100, lm.tokenizer.vocab_size - 100, (a.tokens,), generator=g).tolist()
        caps = {"bridge": AttentionCapture(lm, "all", scorer=ActionScorer(lm, forward="bridge"), keep_steps=False),
                "plain": AttentionCapture(lm, "all", scorer=ActionScorer(lm, forward="auto"), keep_steps=False)}
        times: dict[str, list[float]] = {p: [] for p in caps}
        rows = {}
        for i in range(a.reps + 1):  # the first round warms up, untimed
            for p in (list(caps) if i % 2 else list(caps)[::-1]):
                t0 = time.perf_counter()
                rows[p] = caps[p].capture_prompt(tokens).clone()
                if i:
                    times[p].append(time.perf_counter() - t0)
        paths = {p: caps[p].last_path for p in caps}
        if paths != {"bridge": "bridge", "plain": "plain"}:
            raise RuntimeError(f"the captures took {paths}")
        drow = (rows["bridge"] - rows["plain"]).abs().max().item()
        med = {p: 1e3 * statistics.median(ts) for p, ts in times.items()}
        report["dtypes"][dtype] = {"median_ms": med, "ratio": med["plain"] / med["bridge"], "max_abs_drow": drow,
                                   "heads": len(caps["plain"].heads)}
        print(f"{dtype:8s} {a.tokens} tokens, {len(caps['plain'].heads)} heads: bridge {med['bridge']:.0f} ms, plain "
              f"{med['plain']:.0f} ms ({med['plain'] / med['bridge']:.2f}x), max |drow| {drow:.1e}")
        del lm, caps
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
