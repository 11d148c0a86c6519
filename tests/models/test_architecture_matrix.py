"""The architecture matrix: a tiny random model of every family users run as agents, each through every
conformance check (``workbench.attention.conformance``: bridge logits, packed scoring, KV reuse, the selective
capture with and without the cache, head masking, C) against the untouched `transformers` model.

``WORKBENCH_MATRIX_REPORT=FILE`` writes the table (architecture x check, the largest difference) as markdown;
``WORKBENCH_MATRIX_DEVICE=cuda`` runs it on a GPU (the GPU check, ``make gpu-check``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from architectures import ARCHITECTURES, build  # noqa: E402

from workbench.attention.conformance import CHECKS, check_model  # noqa: E402
from workbench.models.loading import wrap  # noqa: E402

TOLERANCE = {"logits": 1e-5, "scores": 1e-5, "kv_reuse": 1e-5, "capture": 1e-6, "capture_cached": 1e-6,
             "head_mask": 1e-5, "C": 1e-4}
RESULTS: dict[str, dict] = {}
DEVICE = os.environ.get("WORKBENCH_MATRIX_DEVICE", "cpu")

HISTORY = ["> go to desk 1\nOn the desk 1, you see a mug 1, a pen 2 and a laptop 1.\n",
           "> take mug 1 from desk 1\nYou pick up the mug 1 from the desk 1.\n",
           "> go to shelf 2\nOn the shelf 2, you see nothing.\n"]


def _episode(tok):
    head = tok("You are in the middle of a room. Looking quickly around you, you see a desk 1, a shelf 2 and a "
               "drawer 3.\nYour task is to: put a mug in shelf.\n", add_special_tokens=False).input_ids
    end = tok("<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False).input_ids
    prompts, body = [], list(head)
    for line in HISTORY:  # each step's prompt extends the last one's prefix: the cache is reused
        body += tok(line, add_special_tokens=False).input_ids
        prompts.append(body + end[-3:])
    return prompts


@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_every_check_holds(arch):
    model, reference, tok = build(arch, device=DEVICE)
    lm = wrap(model, tok, name=f"tiny-{arch}", hf_id=f"tiny/{arch}", device=DEVICE)
    prompts = _episode(tok)
    assert len(prompts[-1]) > 40  # longer than the sliding windows (12): they matter
    got = check_model(lm, reference, prompts, ["go to shelf 2", "put mug 1 in/on shelf 2", "look"])
    RESULTS[arch] = got
    bad = {k: v for k, v in got.items() if isinstance(v, str) or v > TOLERANCE[k]}
    assert not bad, f"{arch}: {bad}"


def teardown_module(module):
    out = os.environ.get("WORKBENCH_MATRIX_REPORT")
    if not out or not RESULTS:
        return
    lines = ["| architecture | " + " | ".join(CHECKS) + " |", "|---" * (len(CHECKS) + 1) + "|"]
    for arch, got in RESULTS.items():
        cells = [(f"{v:.1e}" if v else "0") if not isinstance(v, str) else v.replace("|", "/") for v in
                 (got[c] for c in CHECKS)]
        lines.append(f"| {arch} | " + " | ".join(cells) + " |")
    Path(out).write_text("\n".join(lines) + "\n")


def test_an_architecture_the_bridge_cannot_wrap_is_named_with_the_supported_ones():
    from workbench.models.loading import UnsupportedArchitectureError

    model, _, tok = build("llama")
    model.config.architectures = ["MadeUpForCausalLM"]
    model.config.model_type = "made_up"  # the bridge falls back to the model type
    with pytest.raises(UnsupportedArchitectureError) as e:
        wrap(model, tok, name="made-up", hf_id="made/up")
    msg = str(e.value)
    assert "made-up: MadeUpForCausalLM is not an architecture" in msg
    assert "Gemma2ForCausalLM" in msg and "Phi3ForCausalLM" in msg and "architectures, among them" in msg
