"""The GPU check (``make gpu-check``): what a CUDA machine must show, in one short script.

1. The architecture matrix on CUDA (tests/models/test_architecture_matrix.py, float32: every family through every
   conformance check against the untouched transformers model on the same GPU).
2. The large-shape benchmark on CUDA, bf16 (benchmarks/large_shapes.py: Llama-3.1-8B and Qwen2.5-7B shapes at 2k,
   4k and 8k tokens, plain / selective capture / every pattern kept; GPU peak memory per run).
3. The default agent's parity, CPU against GPU (bf16): the decisions and p(expert) of 20 teacher-forced steps of
   valid_unseen experts with the Traj memory.

Writes everything under ``--out`` (default runs/gpu_check/); prints one summary line per part. It needs nothing from
a network: the tiny models, the packaged SmolLM2 and the games are in the working tree and the package.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/gpu_check.py --out runs/gpu_check
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def matrix(out: Path) -> str:
    env = {**os.environ, "WORKBENCH_MATRIX_DEVICE": "cuda", "WORKBENCH_MATRIX_REPORT": str(out / "matrix_cuda.md")}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "tests/models/test_architecture_matrix.py")], env=env, capture_output=True,
                       text=True, cwd=ROOT)
    (out / "matrix_cuda.log").write_text(p.stdout + p.stderr)
    return f"matrix (cuda): pytest exit {p.returncode}; {(p.stdout.strip().splitlines() or ['?'])[-1]}"


def shapes(out: Path, layers: int) -> str:
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks/large_shapes.py"), "--device", "cuda", "--layers",
                        str(layers), "--out", str(out / "large_shapes_cuda.jsonl")], capture_output=True, text=True,
                       cwd=ROOT)
    (out / "large_shapes_cuda.log").write_text(p.stdout + p.stderr)
    ratios = [ln for ln in p.stdout.splitlines() if ln.startswith("ratio")]
    return f"large shapes (cuda): exit {p.returncode}; " + " | ".join(ratios)


def parity(out: Path, steps: int = 20) -> str:
    import torch

    from workbench.agents.loop import Agent
    from workbench.agents.policy import build_policy
    from workbench.agents.teacher_forcing import teacher_forced_accuracy
    from workbench.envs.alfworld import load_alfworld_tasks
    from workbench.envs.memory_base import expert_trajectories_for
    from workbench.models import load_model
    from workbench.models.registry import DEFAULT_AGENT

    tasks = {t.task_id: t for t in load_alfworld_tasks("valid_unseen")}
    experts, n = [], 0
    for e in expert_trajectories_for("valid_unseen"):
        if n >= steps:
            break
        experts.append(e)
        n += e.n_steps
    rows = {}
    for device in ("cpu", "cuda"):
        lm = load_model(DEFAULT_AGENT, dtype="bfloat16", device=device)
        res = teacher_forced_accuracy(Agent.from_model(lm), experts, tasks, build_policy("traj", "minilm"),
                                      progress=False)
        rows[device] = [s for s in res.per_step][:steps]
        del lm
        torch.cuda.empty_cache()
    same = sum(a["chosen"] == b["chosen"] for a, b in zip(rows["cpu"], rows["cuda"]))
    dp = max(abs(a["p_expert"] - b["p_expert"]) for a, b in zip(rows["cpu"], rows["cuda"]))
    (out / "parity_cpu_cuda.json").write_text(json.dumps({"steps": len(rows["cpu"]), "same_choice": same,
                                                          "max_abs_dp_expert": dp, "rows": rows}, indent=1))
    return f"parity {DEFAULT_AGENT} bf16 cpu vs cuda: {same}/{len(rows['cpu'])} same decisions, max |dp| {dp:.5f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "runs/gpu_check"))
    ap.add_argument("--layers", type=int, default=4, help="decoder layers of the large shapes (default: 4)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["matrix", "shapes", "parity"])
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit(f"gpu_check: no CUDA here (torch {torch.__version__}); run it on a GPU machine with a CUDA build of "
                 "torch (make install TORCH_INDEX=https://download.pytorch.org/whl/cu128)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"gpu_check on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
             f"{time.strftime('%Y-%m-%dT%H:%M:%S')}"]
    for name, fn in (("matrix", lambda: matrix(out)), ("shapes", lambda: shapes(out, a.layers)),
                     ("parity", lambda: parity(out))):
        if name not in a.skip:
            lines.append(fn())
            print(lines[-1], flush=True)
    (out / "summary.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
