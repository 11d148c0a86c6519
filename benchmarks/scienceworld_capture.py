"""What AGMR's capture costs on ScienceWorld's longest episodes (issue 48): the AGMR paper dropped the task types with
a step limit of 60 or more because storing ``output_attentions`` over long episodes ran out of GPU memory (its E.1).
The selective capture keeps q_t's row for the retrieval heads only: O(prompt) a step. The measurement is
``workbench.studies.capture_cost.capture_cost``; this is its command line.

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

    from workbench.models.loading import load_model
    from workbench.studies.capture_cost import capture_cost

    torch.set_num_threads(1)
    lm = load_model(a.model, dtype=a.dtype)
    out = capture_cost(lm, a.split, a.task_types, a.max_steps, a.full_context,
                       progress=lambda row: print(json.dumps(row), flush=True))
    held, pattern_bytes = out["capture_bytes_held"], out["full_patterns_bytes"]
    print(f"{out['task_id']}: {out['steps_measured']} steps, prompts up to {out['max_prompt_tokens']} tokens; median "
          f"step {out['median_step_s']['plain']} s plain, {out['median_step_s']['capture']} s with the capture "
          f"(ratio {out['time_ratio']}); the capture holds {held / 2**20:.2f} MiB for the episode, full patterns "
          f"would be {pattern_bytes / 2**30:.1f} GiB; peak RSS {out['peak_rss_mib']} MiB")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
