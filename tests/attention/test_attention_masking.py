"""Head masking: zeroing a query head's hook_z slice removes exactly that head's contribution (GQA-aware)."""

from __future__ import annotations

import random

import pytest
import torch
from attention_tiny import (
    D_HEAD,
    MARKERS,
    N_HEADS,
    N_LAYERS,
    PLANTED,
    WRITE_DIM,
    plain_tokens,
)

from workbench.attention import mask_heads_hooks, random_heads
from workbench.models.scoring import ActionScorer

SIBLING = (0, 3)  # shares the planted head's key/value head
OTHER = (1, 0)


def _prompt() -> list[int]:
    tokens = plain_tokens(24, random.Random(5))
    for pos, tok in zip((3, 9, 15), MARKERS):
        tokens[pos] = tok
    return tokens


def _run(lm, tokens, hooks):
    """(logits at the last position, layer-0 attention output at the last position)."""
    out = {}

    def keep(x, hook):
        out["attn_out"] = x[0, -1].clone()

    with lm.bridge.hooks(fwd_hooks=list(hooks) + [("blocks.0.hook_attn_out", keep)]):
        logits = lm.bridge(torch.tensor([tokens]))
    return logits[0, -1], out["attn_out"]


def test_masking_the_planted_head_removes_its_effect(tiny_lm):
    tokens = _prompt()
    logits, attn_out = _run(tiny_lm, tokens, [])
    assert attn_out[WRITE_DIM] > 5  # the planted head copies the marker flag there

    masked_logits, masked_out = _run(tiny_lm, tokens, mask_heads_hooks([PLANTED], N_HEADS))
    assert masked_out[WRITE_DIM].abs() < 0.5

    # Its key/value head is shared under GQA: masking the sibling query head must leave the plant alone.
    sib_logits, sib_out = _run(tiny_lm, tokens, mask_heads_hooks([SIBLING], N_HEADS))
    assert sib_out[WRITE_DIM] > 5
    other_logits, _ = _run(tiny_lm, tokens, mask_heads_hooks([OTHER], N_HEADS))

    planted_effect = (masked_logits - logits).norm()
    assert planted_effect > 3 * (sib_logits - logits).norm()
    assert planted_effect > 3 * (other_logits - logits).norm()


def test_mask_equals_zeroing_the_heads_output_weights(tiny_lm, tiny_factory):
    heads = [PLANTED, OTHER]

    def zero_w_o(model):
        for layer, head in heads:
            with torch.no_grad():
                model.model.layers[layer].self_attn.o_proj.weight[:, head * D_HEAD : (head + 1) * D_HEAD] = 0.0

    reference = tiny_factory(edit=zero_w_o)
    tokens = _prompt()
    masked_logits, _ = _run(tiny_lm, tokens, mask_heads_hooks(heads, N_HEADS))
    ref_logits, _ = _run(reference, tokens, [])
    torch.testing.assert_close(masked_logits, ref_logits, atol=1e-5, rtol=0)


def test_masking_hooks_work_inside_the_scorer(tiny_lm):
    tokens = _prompt()
    candidates = ["w10 w11", "w12", "w13 w14"]
    plain = ActionScorer(tiny_lm).score(tokens[:-1], tokens[-1:], candidates)
    masked = ActionScorer(tiny_lm).score(tokens[:-1], tokens[-1:], candidates,
                                         hooks=mask_heads_hooks([PLANTED], N_HEADS))
    assert max(abs(a - b) for a, b in zip(plain.scores, masked.scores)) > 1e-3


def test_random_heads_are_reproducible_and_exclude():
    top = [(0, 1), (1, 2)]
    a = random_heads(5, n_layers=N_LAYERS, n_heads=N_HEADS, exclude=top, seed=3)
    assert a == random_heads(5, n_layers=N_LAYERS, n_heads=N_HEADS, exclude=top, seed=3)
    assert len(set(a)) == 5 and not set(a) & set(top)
    assert random_heads(5, n_layers=30, n_heads=9, seed=1) != random_heads(5, n_layers=30, n_heads=9, seed=2)
    with pytest.raises(ValueError, match="only 6 heads remain"):
        random_heads(7, n_layers=N_LAYERS, n_heads=N_HEADS, exclude=top)
    with pytest.raises(ValueError, match="n_heads"):
        mask_heads_hooks([(0, N_HEADS)], N_HEADS)
