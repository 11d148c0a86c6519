"""The instruments on a bfloat16 model: fp32 capture rows, bf16 head masks, C and teacher forcing agree with fp32."""

from __future__ import annotations

import math
import random

import pytest
import torch
from agent_tiny import TASK, FixedEntry, build_agent_lm, expert
from attention_tiny import (
    MARKERS,
    N_HEADS,
    N_LAYERS,
    PLANTED,
    WRITE_DIM,
    build_tiny_lm,
    plain_tokens,
)

from workbench.agents import Agent
from workbench.attention import (
    AttentionCapture,
    mask_heads_hooks,
    score_heads,
    utilization_matrix,
)
from workbench.methods.agmr.recording import teacher_forced_utilization
from workbench.models.scoring import ActionScorer

CANDIDATES = ["w10 w11", "w12", "w13 w14 w15"]
SIBLING = (0, 3)  # shares the planted head's key/value head


@pytest.fixture(scope="module")
def lm_bf16():
    return build_tiny_lm(edit=lambda model: model.to(torch.bfloat16))


def _episode() -> list[list[int]]:
    """Growing prefixes (KV-cached steps) with markers the planted head retrieves."""
    rng = random.Random(6)
    base = plain_tokens(20, rng)
    for pos, tok in zip((4, 11, 17), MARKERS):
        base[pos] = tok
    p1 = base + plain_tokens(6, rng)
    return [base, p1, p1 + plain_tokens(5, rng)]


def _capture_episode(lm) -> tuple[AttentionCapture, list[torch.Tensor]]:
    """Capture every head over the episode, with the bf16/fp32 hook_pattern q_t rows beside it."""
    scorer = ActionScorer(lm)
    capture = AttentionCapture(lm, "all", scorer=scorer)
    patterns: dict = {}

    def keep(pattern, hook):
        patterns[hook.layer()] = pattern[0].clone()  # [head, query_pos, key_pos]

    references = []
    for prefix in _episode():
        lay = scorer.score(prefix, [7, 8], CANDIDATES, on_layout=capture.on_layout,
                           hooks=capture.hooks() + [(f"blocks.{i}.attn.hook_pattern", keep) for i in range(N_LAYERS)]
                           ).layout
        references.append(torch.stack([patterns[layer][head, lay.query_index, : lay.prompt_len]
                                       for layer, head in capture.heads]))
    return capture, references


def test_capture_rows_are_fp32_and_match_the_fp32_capture(tiny_lm, lm_bf16):
    cap32, _ = _capture_episode(tiny_lm)
    cap16, patterns16 = _capture_episode(lm_bf16)
    assert sum(s.n_cached > 0 for s in cap16.steps) == 2
    for s32, s16, pattern in zip(cap32.steps, cap16.steps, patterns16):
        assert s16.rows.dtype == torch.float32 and pattern.dtype == torch.bfloat16
        torch.testing.assert_close(s16.rows.sum(-1), torch.ones(N_LAYERS * N_HEADS), atol=1e-5, rtol=0)
        torch.testing.assert_close(s16.rows, s32.rows, atol=1e-2, rtol=0)
        torch.testing.assert_close(s16.rows, pattern.float(), atol=1e-2, rtol=0)  # the model's own bf16 row
    planted = cap16.heads.heads.index(PLANTED)
    assert cap16.steps[0].rows[planted, [4, 11, 17]].sum() > 0.99


def test_head_mask_in_bf16_zeroes_the_planted_head_like_fp32(tiny_lm, lm_bf16):
    tokens = _episode()[0]

    def run(lm, heads):
        out = {}

        def keep_z(z, hook):  # runs after the mask on the same hook point
            out["z"] = z.clone()

        def keep_out(x, hook):
            out["attn_out"] = x[0, -1].float()

        hooks = mask_heads_hooks(heads, N_HEADS) + [("blocks.0.attn.hook_z", keep_z),
                                                    ("blocks.0.hook_attn_out", keep_out)]
        with lm.bridge.hooks(fwd_hooks=hooks):
            logits = lm.bridge(torch.tensor([tokens]))[0, -1].float()
        return logits, out

    for lm in (tiny_lm, lm_bf16):
        logits, plain = run(lm, [])
        masked_logits, masked = run(lm, [PLANTED])
        _, sibling = run(lm, [SIBLING])
        assert masked["z"].dtype == plain["z"].dtype == next(lm.hf_model.parameters()).dtype
        z = masked["z"].view(*masked["z"].shape[:2], N_HEADS, -1)
        assert torch.count_nonzero(z[..., PLANTED[1], :]) == 0
        assert plain["attn_out"][WRITE_DIM] > 5 and sibling["attn_out"][WRITE_DIM] > 5
        assert masked["attn_out"][WRITE_DIM].abs() < 0.5
        assert (masked_logits - logits).norm() > 0.1


def test_head_scores_in_bf16_rank_the_planted_head_first(tiny_lm, lm_bf16):
    rng = random.Random(8)
    pairs = []
    for _ in range(3):
        tokens = plain_tokens(25, rng)
        for pos in (5, 13):
            tokens[pos] = MARKERS[pos % len(MARKERS)]
        pairs.append((tokens, [5, 13]))
    s32, s16 = score_heads(tiny_lm, pairs, progress=False), score_heads(lm_bf16, pairs, progress=False)
    assert s16.scores.dtype == torch.float32
    assert s16.top_k(1) == s32.top_k(1) == [PLANTED]
    torch.testing.assert_close(s16.scores, s32.scores, atol=3e-2, rtol=0)


def test_utilization_of_bf16_rows_matches_fp32(tiny_lm, lm_bf16):
    segments = [[4, 11, 17], list(range(0, 4)), list(range(12, 17))]
    c32 = utilization_matrix(_capture_episode(tiny_lm)[0].steps, segments).C
    c16 = utilization_matrix(_capture_episode(lm_bf16)[0].steps, segments).C
    assert c16.dtype == torch.float32 and bool(torch.isfinite(c16).all())
    torch.testing.assert_close(c16, c32, rtol=2e-2, atol=1e-2)
    # bf16 rows fed directly (e.g. from hook_pattern) are summed in fp32 too.
    rows = [torch.full((2, 8), 0.125, dtype=torch.bfloat16)]
    torch.testing.assert_close(utilization_matrix(rows, [[0, 1, 2]]).C, torch.tensor([[3.0]]))


@pytest.fixture(scope="module")
def teacher_forced():
    """teacher_forced_utilization (teacher forcing + capture + C) on the tiny agent, in fp32 and bf16."""
    out = {}
    for name in ("float32", "bfloat16"):
        lm = build_agent_lm()
        if name == "bfloat16":
            lm.hf_model.to(torch.bfloat16)  # in place: the bridge wraps these very modules
        assert lm.dtype == name
        agent = Agent.from_model(lm, keep_prompts=True)
        out[name] = teacher_forced_utilization(agent, expert(), TASK, FixedEntry(), heads=[(0, 1), (1, 2), (1, 3)],
                                               carrier_heads="all")
    return out


def test_teacher_forcing_runs_in_bf16_like_fp32(teacher_forced):
    r32, r16 = teacher_forced["float32"], teacher_forced["bfloat16"]
    assert r16.steps == r32.steps and len(r16.steps) == len(expert().steps)
    assert all(math.isfinite(p) and 0 < p < 1 for p in r16.p_expert)
    assert max(abs(a - b) for a, b in zip(r16.p_expert, r32.p_expert)) < 1e-2
    c32, c16 = r32.matrix().C, r16.matrix().C
    assert bool(torch.isfinite(c16).all())
    torch.testing.assert_close(c16, c32, rtol=2e-2, atol=1e-2)
    assert len(r16.carriers) == c16.shape[0] and all(len(cell) == 5 for row in r16.carriers for cell in row)


# The real SmolLM2: one KV-cached scoring step with every head captured, in fp32 and in bf16.

MEMORY = ("Example: put a clean mug in coffeemachine.\n> go to countertop 1\nOn the countertop 1, you see a mug 1.\n"
          "> take mug 1 from countertop 1\n> go to sinkbasin 1\n> clean mug 1 with sinkbasin 1\n")
TASK_TEXT = ("Your task is to: put a clean mug in coffeemachine.\n> go to countertop 1\n"
             "On the countertop 1, you see a mug 1.\nWhat do you do next?")
REAL_ACTIONS = ["take mug 1 from countertop 1", "go to coffeemachine 1", "look", "inventory", "examine countertop 1"]
REAL_SEGMENTS = [list(range(10, 30)), list(range(30, 60)), list(range(60, 90))]


@pytest.fixture(scope="module")
def real_steps(smollm, smollm_bf16):
    tok = smollm.tokenizer
    text = tok.apply_chat_template([{"role": "system", "content": "You are a household agent.\n" + MEMORY},
                                    {"role": "user", "content": TASK_TEXT}], tokenize=False)
    prefix = tok(text, add_special_tokens=False).input_ids
    suffix = tok("<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False).input_ids
    q_t = len(prefix) + len(suffix) - 1
    out = {}
    for lm in (smollm, smollm_bf16):
        scorer = ActionScorer(lm)
        capture = AttentionCapture(lm, "all", scorer=scorer)
        patterns: dict = {}

        def keep(pattern, hook):  # the model's own q_t row, in its dtype
            patterns[hook.layer()] = pattern[0, :, q_t, : q_t + 1].clone()

        hooks = capture.hooks() + [(f"blocks.{i}.attn.hook_pattern", keep) for i in range(lm.n_layers)]
        result = scorer.score(prefix, suffix, REAL_ACTIONS, hooks=hooks, on_layout=capture.on_layout)
        pattern = torch.cat([patterns[i] for i in range(lm.n_layers)])  # [layer * head, key_pos]
        out[lm.dtype] = (result, capture.rows, utilization_matrix(capture.steps, REAL_SEGMENTS).C, pattern)
    return out


@pytest.mark.integration
def test_real_bf16_step_picks_the_fp32_action(real_steps):
    r32, r16 = real_steps["float32"][0], real_steps["bfloat16"][0]
    print(f"\nfp32 scores {r32.scores}\nbf16 scores {r16.scores}")
    assert all(math.isfinite(s) for s in r16.scores)
    assert r16.best == r32.best
    assert max(abs(a - b) for a, b in zip(r16.scores, r32.scores)) < 0.2


@pytest.mark.integration
def test_real_bf16_capture_and_C_are_finite_and_close_to_fp32(real_steps):
    (_, rows32, c32, _), (_, rows16, c16, pattern16) = real_steps["float32"], real_steps["bfloat16"]
    vs_fp32, vs_pattern = float((rows16 - rows32).abs().max()), float((rows16 - pattern16.float()).abs().max())
    print(f"\nmax |rows bf16 - rows fp32| = {vs_fp32:.3e}, |rows bf16 - bf16 hook_pattern| = {vs_pattern:.3e}; "
          f"C fp32 {c32.flatten().tolist()} bf16 {c16.flatten().tolist()}")
    assert rows16.dtype == torch.float32 and bool(torch.isfinite(rows16).all())
    assert pattern16.dtype == torch.bfloat16
    torch.testing.assert_close(rows16.sum(-1), torch.ones(rows16.shape[0]), atol=1e-5, rtol=0)
    assert vs_fp32 < 6e-2 and vs_pattern < 2e-2  # measured: 3e-2 and 8e-3
    assert float((rows16 - rows32).abs().mean()) < 1e-3
    assert bool(torch.isfinite(c16).all())
    torch.testing.assert_close(c16, c32, rtol=5e-2, atol=0.1)
