"""How many packed forwards a ScienceWorld visit of the joint training costs (issue 48), before and after
2026-12-07's change: ALFWorld's pack bound (``--max-pack-tokens`` 3,072) and a one-step history drop, against
ScienceWorld's own bound (``JointData.pack_tokens``: its prompt budget + 1,024) and its 10-step drop
(``HISTORY_CHUNK``). Tokenizer only, no model: the visits of ``--n`` gold paths of ``--split`` (drawn with
``--seed``), each under the layout and the 10 states the training draws for it at epoch 0.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/joint_packing.py --n 289 --json benchmarks/notes/joint_packing.json

Printed per arm: packed examples a visit (mean, max) and tokens a visit (mean, max; a forward's cost grows with its
tokens, a little faster than linearly).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="train@10")
    ap.add_argument("--n", type=int, default=289, help="gold paths (all 289 winning ones of train@10 by default)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    from transformers import AutoTokenizer

    from workbench.envs.scienceworld import HISTORY_CHUNK, INSTRUCTIONS, PROMPT_TOKENS
    from workbench.models.registry import get_model_spec
    from workbench.prompts.layout import PromptBuilder
    from workbench.training import joint as J
    from workbench.training.train import DataConfig, _dequantized_dir, build_layout_stream

    tok = AutoTokenizer.from_pretrained(_dequantized_dir(get_model_spec("smollm2-135m-instruct")))
    trajs = J.scienceworld_trajectories(a.split)
    sample = random.Random(a.seed).sample(trajs, min(a.n, len(trajs)))
    out = {"split": a.split, "visits": len(sample), "states_a_visit": 10, "arms": {}}
    for arm, chunk, joint_bound in (("before: ALFWorld's bound, 1-step drop", 1, False),
                                    ("after: ScienceWorld's bound, 10-step drop", HISTORY_CHUNK, True)):
        jd = J.JointData.build(tok, 8192)
        jd.builder = PromptBuilder(tok, PROMPT_TOKENS, instructions=INSTRUCTIONS, history_chunk=chunk)
        dcfg = DataConfig(max_pack_tokens=3072, on_policy_states=10)
        if not joint_bound:
            jd = _Bound(jd)
        stream = build_layout_stream(sample, None, None, dcfg, 0, 0, joint=jd)
        n_ex, toks = [], []
        for i in range(len(sample)):
            exs = stream(i)
            n_ex.append(len(exs))
            toks.append(sum(e.n_tokens for e in exs))
        out["arms"][arm] = {"examples_mean": round(statistics.mean(n_ex), 2), "examples_max": max(n_ex),
                            "tokens_mean": round(statistics.mean(toks)), "tokens_max": max(toks),
                            "tokens_total": sum(toks)}
        print(arm, json.dumps(out["arms"][arm]), flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


class _Bound:
    """A JointData whose own pack bound is off (ALFWorld's ``--max-pack-tokens`` governs), all else delegated."""

    def __init__(self, jd):
        self._jd = jd

    pack_tokens = 0

    def __getattr__(self, name):
        return getattr(self._jd, name)


if __name__ == "__main__":
    main()
