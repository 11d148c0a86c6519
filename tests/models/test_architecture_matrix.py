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
             "capture_bridge": 1e-6, "head_mask": 1e-5, "C": 1e-4}
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


def test_the_window_mask_is_transformers_rule_at_logical_positions():
    import torch

    from workbench.models.scoring import ActionScorer, sliding_windows

    # 2 cached keys, 3 new prompt tokens (positions 2..4), a trie of 2 nodes (root at depth 0 -> position 5, child 6)
    m = ActionScorer._mask(2, 3, [-1, 0], window=3, positions=[2, 3, 4, 5, 6])[0, 0] == 0
    keys = [0, 1, 2, 3, 4, 5, 6]  # the keys' positions: cached, new, then the trie nodes'
    for q, qpos in enumerate([2, 3, 4, 5, 6]):
        for k, kpos in enumerate(keys):
            causal = kpos <= qpos if k < 5 else (k == 5 and q >= 3) or (k == 6 and q == 4)
            assert bool(m[q, k]) == (causal and kpos > qpos - 3), (q, k)
    assert torch.equal(ActionScorer._mask(2, 3, [-1, 0]), ActionScorer._mask(2, 3, [-1, 0], window=None))
    from types import SimpleNamespace as C

    assert sliding_windows(C(sliding_window=None)) is None
    assert sliding_windows(C(sliding_window=8, use_sliding_window=False)) is None
    assert sliding_windows(C(sliding_window=8)) == 8
    assert sliding_windows(C(sliding_window=8, layer_types=["sliding_attention"] * 2)) == 8
    assert sliding_windows(C(sliding_window=8, layer_types=["full_attention", "sliding_attention"])) == {
        "full_attention": None, "sliding_attention": 8}
    with pytest.raises(NotImplementedError, match="chunked_attention"):
        sliding_windows(C(sliding_window=8, layer_types=["chunked_attention"]))


@pytest.mark.integration
def test_the_packaged_gemma3_loads_and_conforms():
    """The second real model (Gemma 3 270M, the chunked GGUF package), through every check on an ALFWorld-like
    episode, float32 (its first load dequantizes the GGUF once, ~1 min)."""
    from workbench.models import load_model, load_transformers_model

    lm = load_model("gemma3-270m")
    reference = load_transformers_model("gemma3-270m")
    prompts = _episode(lm.tokenizer)
    got = check_model(lm, reference, prompts, ["go to shelf 2", "put mug 1 in/on shelf 2", "look"])
    bad = {k: v for k, v in got.items() if isinstance(v, str) or v > 20 * TOLERANCE[k]}  # 18 layers, not 2
    assert not bad, got
