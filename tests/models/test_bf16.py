"""bfloat16 models: the dtype is recorded, the scorer's mask stays finite, its fp32 log-probs pick the same action."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "attention"))  # attention_tiny: the planted-head builder

from attention_tiny import MARKERS, WRITE_DIM, build_tiny_lm, plain_tokens  # noqa: E402

from workbench.models.generation import generate_action  # noqa: E402
from workbench.models.scoring import ActionScorer  # noqa: E402

TARGET = 20  # token "w20": its logit reads the planted head's write, so it wins whenever markers are in the prompt
CANDIDATES = ["w10 w11", "w12", f"w{TARGET}", "w13 w14 w15"]


def _plant_target(model) -> None:
    with torch.no_grad():
        model.lm_head.weight[TARGET] = 0.0
        model.lm_head.weight[TARGET, WRITE_DIM] = 0.5


def _bf16(model) -> None:
    _plant_target(model)
    model.to(torch.bfloat16)  # before wrap, so the bridge records bfloat16 too


@pytest.fixture(scope="module")
def lms():
    return {"float32": build_tiny_lm(edit=_plant_target), "bfloat16": build_tiny_lm(edit=_bf16)}


def _prefixes() -> list[list[int]]:
    """Growing prefixes of one episode (the scorer reuses the KV cache), markers in the first."""
    rng = random.Random(4)
    base = plain_tokens(18, rng)
    for pos, tok in zip((2, 7, 12), MARKERS):
        base[pos] = tok
    return [base, base + plain_tokens(5, rng), base + plain_tokens(9, rng)]


def test_dtype_is_recorded_on_the_model_and_its_bridge(lms):
    assert lms["float32"].dtype == "float32" and lms["bfloat16"].dtype == "bfloat16"
    assert lms["bfloat16"].bridge.cfg.dtype == torch.bfloat16
    assert lms["float32"].bridge.cfg.dtype == torch.float32


def test_mask_is_built_in_the_model_dtype():
    parents = [-1, 0, -1, 2]
    fp32 = ActionScorer._mask(3, 5, parents)
    assert fp32.dtype == torch.float32 and fp32.min() == torch.finfo(torch.float32).min  # fp32 unchanged
    bf16 = ActionScorer._mask(3, 5, parents, dtype=torch.bfloat16)
    assert bf16.dtype == torch.bfloat16 and bool(torch.isfinite(bf16).all())
    assert bf16.min() == torch.finfo(torch.bfloat16).min
    assert torch.equal(bf16 == 0, fp32 == 0)
    # What the bridge would have made of the fp32 mask: its min overflows to -inf in bf16.
    assert torch.isneginf(fp32.to(torch.bfloat16)).any()


def test_bf16_attention_scores_stay_finite_under_the_mask(lms):
    lm = lms["bfloat16"]
    seen = []

    def keep(scores, hook):  # [batch, head, query_pos, key_pos], masked positions included
        seen.append(scores.detach().clone())

    scorer = ActionScorer(lm)
    for prefix in _prefixes():
        scorer.score(prefix, [7, 8], CANDIDATES, hooks=[("blocks.0.attn.hook_attn_scores", keep)])
    assert all(s.dtype == torch.bfloat16 and bool(torch.isfinite(s).all()) for s in seen)


def test_bf16_picks_the_planted_action_like_fp32_with_finite_fp32_log_probs(lms):
    results = {}
    for name, lm in lms.items():
        reuse, fresh = ActionScorer(lm), ActionScorer(lm, reuse_cache=False)
        steps = []
        for prefix in _prefixes():
            a, b = reuse.score(prefix, [7, 8], CANDIDATES), fresh.score(prefix, [7, 8], CANDIDATES)
            assert all(isinstance(s, float) and math.isfinite(s) for s in a.scores)
            assert max(abs(x - y) for x, y in zip(a.scores, b.scores)) < (1e-4 if name == "float32" else 2e-2)
            steps.append(a)
        assert sum(s.reused_tokens > 0 for s in steps) == 2
        results[name] = steps
    for s32, s16 in zip(results["float32"], results["bfloat16"]):
        assert s32.best == s16.best == CANDIDATES.index(f"w{TARGET}")
        assert max(abs(a - b) for a, b in zip(s32.scores, s16.scores)) < 5e-2
        margin = sorted(s32.scores)[-1] - sorted(s32.scores)[-2]
        assert margin > 1.0  # a planted choice, not a near tie that bf16 rounding could flip


def test_generate_action_runs_in_bf16(lms):
    gen = generate_action(lms["bfloat16"], _prefixes()[0], CANDIDATES, max_new_tokens=4)
    assert gen.action in CANDIDATES


def test_the_prefix_generator_writes_in_bf16_what_generate_action_writes(lms):
    """The cached prefix in bf16 (keys and values stored in bf16) writes the reply a whole-prompt generation writes."""
    from workbench.models.generation import PrefixGenerator

    gen = PrefixGenerator(lms["bfloat16"], max_new_tokens=4)
    prefixes = _prefixes()
    for prefix in prefixes:
        ref = generate_action(lms["bfloat16"], prefix[:-1] + prefix[-1:], CANDIDATES, max_new_tokens=4)
        assert gen.generate(prefix[:-1], prefix[-1:], CANDIDATES) == ref
    assert gen.reused_tokens == len(prefixes[0])  # the last prompt shares the episode's first prefix
