"""The fast path of an unhooked step: the plain transformers model on the bridge's own weights (no copy) scores every
architecture of the matrix exactly as the bridge does, shares the KV cache with it step for step, and gives way to
the bridge wherever a hook is active."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from architectures import ARCHITECTURES, CANDIDATES, build, episode_steps  # noqa: E402

from workbench.models.loading import wrap  # noqa: E402
from workbench.models.plain import bridge_hooked, plain_model  # noqa: E402
from workbench.models.scoring import ActionScorer, default_forward, set_default_forward  # noqa: E402


@pytest.fixture(scope="module", params=list(ARCHITECTURES))
def tiny(request):
    model, _, tok = build(request.param)
    return request.param, wrap(model, tok, name=f"tiny-{request.param}", hf_id=f"tiny/{request.param}"), tok


def test_the_plain_path_scores_every_architecture_exactly_as_the_bridge(tiny):
    arch, lm, tok = tiny
    bridge, plain = ActionScorer(lm, forward="bridge"), ActionScorer(lm, forward="auto")
    for prefix, suffix in episode_steps(tok):
        a = bridge.score(prefix, suffix, CANDIDATES)
        b = plain.score(prefix, suffix, CANDIDATES)
        assert (bridge.last_path, plain.last_path) == ("bridge", "plain")
        assert b.reused_tokens == a.reused_tokens
        assert a.scores == b.scores, arch  # bit for bit on the CPU: the same eager arithmetic


def test_the_plain_model_holds_the_bridges_tensors_not_copies(tiny):
    _, lm, _ = tiny
    plain = plain_model(lm)
    assert plain is plain_model(lm)  # built once
    bridged = {p.data_ptr() for p in lm.hf_model.parameters()}
    assert {p.data_ptr() for p in plain.parameters()} <= bridged
    assert not any(p.device.type == "meta" for p in [*plain.parameters(), *plain.buffers()])


def test_hooked_and_unhooked_steps_share_one_cache(tiny):
    """Alternating paths on one scorer (a capture every other step) gives the bridge's scores at every step."""
    arch, lm, tok = tiny
    ref, mixed = ActionScorer(lm, forward="bridge"), ActionScorer(lm, forward="auto")
    seen = []
    hook = ("blocks.0.attn.hook_pattern", lambda t, hook: seen.append(t.shape) or t)
    for k, (prefix, suffix) in enumerate(episode_steps(tok)):
        a = ref.score(prefix, suffix, CANDIDATES)
        b = mixed.score(prefix, suffix, CANDIDATES, hooks=[hook] if k % 2 else None)
        assert mixed.last_path == ("bridge" if k % 2 else "plain")
        assert a.scores == b.scores, (arch, k)
    assert len(seen) == 1  # the hook fired on the hooked step only


def test_a_hook_left_on_the_bridge_sends_the_step_through_it():
    model, _, tok = build("llama")
    lm = wrap(model, tok, name="tiny-llama", hf_id="tiny/llama")
    scorer = ActionScorer(lm)
    prefix, suffix = episode_steps(tok)[0]
    fired = []
    hp = lm.bridge.hook_dict["blocks.1.hook_resid_post"]
    assert not bridge_hooked(lm.bridge)
    hp.add_hook(lambda t, hook: fired.append(1) or t)
    try:
        assert bridge_hooked(lm.bridge)
        scorer.score(prefix, suffix, CANDIDATES)
        assert scorer.last_path == "bridge" and fired == [1]
    finally:
        hp.remove_hooks()
    scorer.score(prefix, suffix, CANDIDATES)
    assert scorer.last_path == "plain" and fired == [1]


def test_the_forward_setting_is_checked_and_inherited(monkeypatch):
    monkeypatch.setenv("WORKBENCH_FORWARD", "auto")  # recorded, so teardown restores what was there
    monkeypatch.delenv("WORKBENCH_FORWARD")
    assert default_forward() == "auto"
    set_default_forward("bridge")
    assert default_forward() == "bridge"
    model, _, tok = build("llama")
    lm = wrap(model, tok, name="tiny-llama", hf_id="tiny/llama")
    scorer = ActionScorer(lm)
    scorer.score(*episode_steps(tok)[0], CANDIDATES)
    assert scorer.forward == "bridge" and scorer.last_path == "bridge"
    with pytest.raises(ValueError, match="expected one of auto, bridge"):
        set_default_forward("fast")
    monkeypatch.setenv("WORKBENCH_FORWARD", "fused")
    with pytest.raises(ValueError, match="WORKBENCH_FORWARD='fused'"):
        ActionScorer(lm)


@pytest.mark.integration
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_packaged_agent_decides_the_same_on_the_plain_path(dtype):
    """SmolLM2-135M (the packaged weights) on a real prompt, several steps with the cache reused: the bridge's scores
    bit for bit, in both dtypes."""
    from workbench.models import load_model

    lm = load_model("smollm2-135m-instruct", dtype=dtype)
    tok = lm.tokenizer
    bridge, plain = ActionScorer(lm, forward="bridge"), ActionScorer(lm, forward="auto")
    for prefix, suffix in episode_steps(tok):
        a, b = bridge.score(prefix, suffix, CANDIDATES), plain.score(prefix, suffix, CANDIDATES)
        assert plain.last_path == "plain" and a.scores == b.scores


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("heads,kv_heads", [(9, 3), (4, 4), (8, 1)])
@pytest.mark.parametrize("block_bytes,scaling", [(None, 0.25), (1, 0.3), (3000, 0.25)])
def test_grouped_attention_is_eagers_arithmetic(dtype, heads, kv_heads, block_bytes, scaling, monkeypatch):
    """Per kv head, its query heads stacked as rows of one product, the softmax over blocks of query rows (one row,
    a few, all of them): transformers' eager result bit for bit (a mask wider than the keys is cut to them, as
    eager's callers do)."""
    import torch
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from workbench.models import plain
    from workbench.models.plain import grouped_attention

    if block_bytes is not None:
        monkeypatch.setattr(plain, "SOFTMAX_BLOCK_BYTES", block_bytes)

    class Attn(torch.nn.Module):
        num_key_value_groups = heads // kv_heads

    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    q = torch.randn(1, 13, heads, 16, dtype=dt).transpose(1, 2)  # as the attention modules hand it over
    k, v = torch.randn(1, kv_heads, 40, 16, dtype=dt), torch.randn(1, kv_heads, 40, 16, dtype=dt)
    mask = torch.zeros(1, 1, 13, 40, dtype=dt)
    mask[..., 30:] = torch.finfo(dt).min
    a, _ = eager_attention_forward(Attn().eval(), q, k, v, mask, scaling=scaling)
    b, w = grouped_attention(Attn().eval(), q, k, v, mask, scaling=scaling)
    assert torch.equal(a, b) and w is None


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("scaling", [0.125, 1 / 3, 2.0])
@pytest.mark.parametrize("kind", ["trie", "first-column", "none", "all-visible"])
@pytest.mark.parametrize("batch", [1, 2])
def test_grouped_attention_shortcuts_are_bit_exact(dtype, scaling, kind, batch, monkeypatch):
    """EXACT_SHORTCUTS (a power-of-two scaling on fp32 / bf16 queries, the mask added after the prefix the caller
    declares visible) give eager's result bit for bit: a scorer's mask (39 cached keys every query sees, then causal),
    one masked in its first column, none, all zero; one or two sequences; fp16, whose queries are not pre-scaled (its
    exponent range is too small). A declared prefix that is not visible would change the result: the shortcut is in
    effect."""
    import torch
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from workbench.models import plain
    from workbench.models.plain import grouped_attention, visible_prefix

    class Attn(torch.nn.Module):
        num_key_value_groups = 3

    torch.manual_seed(1)
    dt = getattr(torch, dtype)
    q = (4 * torch.randn(batch, 21, 9, 64, dtype=dt)).transpose(1, 2)
    k, v = 4 * torch.randn(batch, 3, 60, 64, dtype=dt), torch.randn(batch, 3, 60, 64, dtype=dt)
    neg = torch.finfo(dt).min
    mask = torch.zeros(batch, 1, 21, 60, dtype=dt)
    visible = {"trie": 39, "first-column": 0, "none": 60, "all-visible": 60}[kind]
    if kind == "trie":
        mask[:, 0, :, 39:] = torch.full((21, 21), neg, dtype=dt).triu(1)
    elif kind == "first-column":
        mask[..., 0] = neg
    mask = None if kind == "none" else mask
    monkeypatch.setattr(plain, "SOFTMAX_BLOCK_BYTES", 4 * batch * 9 * 60 * 5)  # blocks of 5 rows
    a, _ = eager_attention_forward(Attn().eval(), q, k, v, mask, scaling=scaling)
    with visible_prefix(visible):
        b, _ = grouped_attention(Attn().eval(), q, k, v, mask, scaling=scaling)
    monkeypatch.setattr(plain, "EXACT_SHORTCUTS", False)
    c, _ = grouped_attention(Attn().eval(), q, k, v, mask, scaling=scaling)
    assert torch.equal(a, b) and torch.equal(a, c)
    if kind == "first-column":  # declared visible, it is not: the mask's first column is skipped
        monkeypatch.setattr(plain, "EXACT_SHORTCUTS", True)
        with visible_prefix(1):
            d, _ = grouped_attention(Attn().eval(), q, k, v, mask, scaling=scaling)
        assert not torch.equal(a, d)


def test_a_power_of_two_scaling_is_applied_to_fp32_and_bf16_queries_only(monkeypatch):
    import torch

    from workbench.models import plain

    calls = []
    real = torch.matmul
    monkeypatch.setattr(torch, "matmul", lambda x, y: calls.append(x) or real(x, y))

    class Attn(torch.nn.Module):
        num_key_value_groups = 1

    for dtype, prescaled in ((torch.float32, True), (torch.bfloat16, True), (torch.float16, False)):
        q = torch.ones(1, 2, 3, 8, dtype=dtype)
        k = v = torch.ones(1, 2, 5, 8, dtype=dtype)
        calls.clear()
        plain.grouped_attention(Attn().eval(), q, k, v, torch.zeros(1, 1, 3, 5, dtype=dtype), scaling=0.25)
        assert (calls[0].flatten()[0].item() == 0.25) == prescaled, dtype
    assert plain._power_of_two(0.125) and plain._power_of_two(2.0) and not plain._power_of_two(1 / 3)


@pytest.mark.game
@pytest.mark.integration
def test_the_plain_path_replays_a_committed_bf16_run_bit_for_bit():
    """The committed paper-scale proactive run (agent v2, bf16, played through the bridge on this CPU type): replayed
    with no instrument, so every step takes the plain path, each recorded p(action) comes back exactly."""
    from workbench.eval.config import RunConfig
    from workbench.eval.run_folder import read_config, read_episodes
    from workbench.live.session import Session, find_task
    from workbench.models import load_model
    from workbench.provenance import versions

    folder = Path(__file__).parents[2] / "runs/full-bfloat16/06_proactive/smollm2-135m-alfworld-v2/proactive"
    saved = read_config(folder)
    if saved.versions.get("cpu") != versions().get("cpu"):
        pytest.skip(f"bf16 bits depend on the CPU: played on {saved.versions.get('cpu')}, here {versions().get('cpu')}")
    cfg = RunConfig.from_identity(str(folder), saved.run)
    lm = load_model(cfg.model, dtype=cfg.dtype)
    rows = []
    for ep in read_episodes(folder)[:2]:
        s = Session(lm, find_task(ep.task_id, (cfg.split,)), cfg.memory, options=cfg.options, dtype=cfg.dtype,
                    retriever=cfg.retriever, max_steps=cfg.max_steps, heads=[])
        s.recorded = ep
        rows += s.replay(to_step=min(ep.n_steps, 12))
        assert s.agent.scorer.last_path == "plain"
    assert len(rows) >= 20 and all(r["p_action"] == r["recorded_p_action"] for r in rows)


def test_an_architecture_outside_the_matrix_keeps_the_bridge():
    """GPT-2 is not in TESTED_ARCHITECTURES (the bridge's arithmetic is not checked against transformers' there), so
    even an unhooked step goes through the bridge."""
    import torch
    import transformers

    from architectures import tokenizer

    tok = tokenizer()
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=len(tok), n_embd=64, n_layer=2, n_head=4, n_positions=512,
                                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.config._attn_implementation = "eager"
    lm = wrap(model, tok, name="tiny-gpt2", hf_id="tiny/gpt2")
    scorer = ActionScorer(lm, forward="auto")
    scorer.score(*episode_steps(tok)[0], CANDIDATES)
    assert scorer.last_path == "bridge" and scorer._plain is False


def test_a_worker_takes_the_forward_it_is_handed(monkeypatch):
    """Ray workers on a cluster do not share the driver's environment: the executor hands them the forward."""
    from workbench.eval.jobs import Worker

    monkeypatch.setenv("WORKBENCH_FORWARD", "auto")
    Worker(threads=None, forward="bridge")
    assert default_forward() == "bridge"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("block_bytes", [1, 4000 * 5, 1 << 40])
def test_the_scores_log_softmax_by_blocks_of_rows_is_the_whole_ones(dtype, block_bytes, monkeypatch):
    """log_softmax_rows: one row, five rows, all rows per block: the fp32 log-softmax of the whole tensor bit for
    bit."""
    import torch

    from workbench.models import scoring

    monkeypatch.setattr(scoring, "LOG_SOFTMAX_BLOCK_BYTES", block_bytes)
    torch.manual_seed(0)
    x = (torch.randn(37, 1000) * 8).to(getattr(torch, dtype))
    out = scoring.log_softmax_rows(x)
    assert out.dtype == torch.float32 and torch.equal(out, torch.log_softmax(x.float(), dim=-1))


def test_grouped_attention_with_an_fp32_mask_on_bf16_scores_promotes_as_eager_does():
    import torch
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from workbench.models.plain import grouped_attention

    class Attn(torch.nn.Module):
        num_key_value_groups = 3

    torch.manual_seed(1)
    q = torch.randn(1, 9, 7, 16, dtype=torch.bfloat16)
    k, v = torch.randn(1, 3, 20, 16, dtype=torch.bfloat16), torch.randn(1, 3, 20, 16, dtype=torch.bfloat16)
    mask = torch.randn(1, 1, 7, 20) * 3  # fp32, not a multiple of a bf16 step: the sum's dtype shows
    a, _ = eager_attention_forward(Attn().eval(), q, k, v, mask, scaling=0.3)
    b, _ = grouped_attention(Attn().eval(), q, k, v, mask, scaling=0.3)
    assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_grouped_attention_with_a_mask_broadcast_over_the_queries_is_eagers(dtype, monkeypatch):
    import torch
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from workbench.models import plain

    monkeypatch.setattr(plain, "SOFTMAX_BLOCK_BYTES", 1)  # one row a block, were the mask cut by rows

    class Attn(torch.nn.Module):
        num_key_value_groups = 3

    dt = getattr(torch, dtype)
    torch.manual_seed(2)
    q = torch.randn(2, 9, 5, 16, dtype=dt)
    k, v = torch.randn(2, 3, 12, 16, dtype=dt), torch.randn(2, 3, 12, 16, dtype=dt)
    mask = torch.zeros(2, 1, 1, 12, dtype=dt)
    mask[0, ..., :3] = torch.finfo(dt).min  # padding on the left of the first sequence
    a, _ = eager_attention_forward(Attn().eval(), q, k, v, mask, scaling=0.25)
    b, _ = plain.grouped_attention(Attn().eval(), q, k, v, mask, scaling=0.25)
    assert torch.equal(a, b)
