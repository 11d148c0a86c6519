"""A captured step on the plain path: the attention capture's hooks carry read-only taps, and a scorer whose hooks
are all taps runs the step on the plain transformers model, which hands each tapped layer's post-RoPE query and keys
to them. The rows are the bridge's, the scores are the unhooked step's, the cache is shared; anything that needs the
bridge (a head mask, ``hook_pattern``) keeps it; a forward that raises leaves the scorer usable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from architectures import ARCHITECTURES, CANDIDATES, build, episode_steps  # noqa: E402

from workbench.attention import AttentionCapture, mask_heads_hooks  # noqa: E402
from workbench.models.loading import wrap  # noqa: E402
from workbench.models.plain import attention_taps  # noqa: E402
from workbench.models.scoring import ActionScorer, plain_taps  # noqa: E402


def _wrap(arch, dtype=torch.float32):
    model, _, tok = build(arch)
    model = model.to(dtype)
    return wrap(model, tok, name=f"tiny-{arch}", hf_id=f"tiny/{arch}"), tok


def _captured_episode(lm, tok, forward, heads="all", captures=1):
    """Scores and each capture's rows per step of the episode, on one scorer of ``forward``."""
    scorer = ActionScorer(lm, forward=forward)
    caps = [AttentionCapture(lm, heads if k == 0 else [(lm.n_layers - 1, 0), (0, 1)], scorer=scorer)
            for k in range(captures)]
    out = []
    for prefix, suffix in episode_steps(tok):
        hooks = [h for c in caps for h in c.hooks()]
        res = scorer.score(prefix, suffix, CANDIDATES, hooks=hooks,
                           on_layout=lambda lay: [c.on_layout(lay) for c in caps])
        out.append((res, scorer.last_path, [c.rows.clone() for c in caps]))
    return out


@pytest.fixture(scope="module", params=list(ARCHITECTURES))
def tiny(request):
    return (request.param, *_wrap(request.param))


def test_a_captured_step_runs_on_the_plain_path_with_the_bridges_rows_and_scores(tiny):
    arch, lm, tok = tiny
    bridge = _captured_episode(lm, tok, "bridge", captures=2)
    plain = _captured_episode(lm, tok, "auto", captures=2)
    unhooked = ActionScorer(lm, forward="auto")
    for k, ((a, pa, rows_a), (b, pb, rows_b)) in enumerate(zip(bridge, plain)):
        assert (pa, pb) == ("bridge", "plain"), arch
        assert b.reused_tokens == a.reused_tokens and (k == 0 or b.reused_tokens > 0)
        # the taps only read: the step scores as an unhooked plain step does, bit for bit
        assert b.scores == unhooked.score(*episode_steps(tok)[k], CANDIDATES).scores, arch
        assert max(abs(x - y) for x, y in zip(a.scores, b.scores)) < 1e-5, arch
        for ra, rb in zip(rows_a, rows_b):  # every head, and a second capture on overlapping layers
            assert ra.shape == rb.shape and rb.dtype == torch.float32
            assert (ra - rb).abs().max().item() < 1e-6, arch
            assert torch.allclose(rb.sum(-1), torch.ones(rb.shape[0]), atol=1e-5)


def test_capture_prompt_runs_on_either_path_with_the_same_rows(tiny):
    arch, lm, tok = tiny
    prefix, suffix = episode_steps(tok)[-1]
    tokens = prefix + suffix
    for heads in ("all", [(0, 1), (0, 3)]):  # every layer; the first only (the plain forward stops after it)
        plain = AttentionCapture(lm, heads)
        rows = plain.capture_prompt(tokens).clone()
        assert plain.last_path == "plain"
        bridged = AttentionCapture(lm, heads, scorer=ActionScorer(lm, forward="bridge"))
        ref = bridged.capture_prompt(tokens)
        assert bridged.last_path == "bridge"
        assert (rows - ref).abs().max().item() < 1e-6, (arch, heads)


@pytest.mark.parametrize("arch,tol", [("llama", 1e-6), ("gemma2", 1e-6), ("phi3", 2e-5)])
def test_bf16_rows_on_the_plain_path_are_the_bridges(arch, tol):
    """In bf16 the rows are the same fp32 product of the model's bf16 q and K on both paths (one product per kv head
    on the plain path, two on the bridge's: equal here, within fp32 rounding elsewhere); a fused-QKV bridge (Phi-3)
    hands out its bf16 scores where the tap multiplies in fp32."""
    lm, tok = _wrap(arch, torch.bfloat16)
    bridge = _captured_episode(lm, tok, "bridge")
    plain = _captured_episode(lm, tok, "auto")
    for (a, _, [ra]), (b, path, [rb]) in zip(bridge, plain):
        assert path == "plain"
        assert (ra - rb).abs().max().item() <= tol
        assert a.best == b.best


def test_write_taps_only_its_first_forward(tiny):
    arch, lm, tok = tiny
    prefix, suffix = episode_steps(tok)[0]
    scorer = ActionScorer(lm, forward="auto")
    cap = AttentionCapture(lm, "all", scorer=scorer)
    res = scorer.write(prefix, suffix, CANDIDATES, beam=2, hooks=cap.hooks(), on_layout=cap.on_layout)
    assert res.forwards > 1 and scorer.last_path == "plain"
    assert len(cap.steps) == 1 and cap.steps[0].prompt_len == len(prefix) + len(suffix)
    ref = AttentionCapture(lm, "all").capture_prompt(prefix + suffix)
    assert (cap.rows - ref).abs().max().item() < 1e-6


def test_a_capture_beside_a_head_mask_keeps_the_bridge():
    lm, tok = _wrap("llama")
    prefix, suffix = episode_steps(tok)[0]
    scorer = ActionScorer(lm, forward="auto")
    cap = AttentionCapture(lm, "all", scorer=scorer)
    masks = mask_heads_hooks([(1, 2)], lm.n_heads)
    assert plain_taps(cap.hooks()) and plain_taps(masks + cap.hooks()) is None
    scorer.score(prefix, suffix, CANDIDATES, hooks=masks + cap.hooks(), on_layout=cap.on_layout)
    assert scorer.last_path == "bridge" and cap.rows is not None


def test_a_hook_pattern_reader_keeps_the_bridge():
    lm, tok = _wrap("llama")
    prefix, suffix = episode_steps(tok)[0]
    scorer = ActionScorer(lm, forward="auto")
    seen = []
    scorer.score(prefix, suffix, CANDIDATES, hooks=[("blocks.0.attn.hook_pattern", lambda t, hook: seen.append(1))])
    assert scorer.last_path == "bridge" and seen == [1]


@pytest.mark.parametrize("forward", ["auto", "bridge"])
def test_a_forward_that_raises_leaves_the_scorer_scoring_correctly(forward):
    """A hook or tap that raises mid-forward used to leave this step's keys appended to the cached prefix of the
    layers before it: the next step then failed with a size mismatch. The scorer drops the cache instead."""
    lm, tok = _wrap("llama")
    steps = episode_steps(tok)
    scorer, ref = ActionScorer(lm, forward=forward), ActionScorer(lm, forward=forward)
    scorer.score(*steps[0], CANDIDATES)
    cap = AttentionCapture(lm, [(1, 0)], scorer=scorer)

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    boom.plain_tap = (1, lambda q, k, s: boom())
    with pytest.raises(KeyboardInterrupt):
        scorer.score(*steps[1], CANDIDATES, hooks=[(cap.hooks()[-1][0], boom)], on_layout=cap.on_layout)
    assert scorer.cache is None  # dropped, not left with layer 0's keys of the failed step
    assert cap.rows is None and cap.steps == []
    got = scorer.score(*steps[2], CANDIDATES)
    assert got.scores == ref.score(*steps[2], CANDIDATES).scores


@pytest.mark.parametrize("forward", ["auto", "bridge"])
def test_a_step_that_raises_after_the_capture_is_taken_back(forward, monkeypatch):
    """The capture has its rows once the last selected layer ran; a raise later in the forward (the log-softmax, an
    interrupt) discards the step: the scorer drops its cache and the capture forgets the step it recorded."""
    from workbench.models import scoring

    lm, tok = _wrap("llama")
    steps = episode_steps(tok)
    scorer = ActionScorer(lm, forward=forward)
    cap = AttentionCapture(lm, [(0, 1)], scorer=scorer)
    scorer.score(*steps[0], CANDIDATES, hooks=cap.hooks(), on_layout=cap.on_layout)
    first = cap.rows
    monkeypatch.setattr(scoring, "log_softmax_rows", lambda logits: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        scorer.score(*steps[1], CANDIDATES, hooks=cap.hooks(), on_layout=cap.on_layout)
    assert len(cap.steps) == 1 and cap.steps[0].rows is first and cap.rows is None and scorer.cache is None
    monkeypatch.undo()
    scorer.score(*steps[1], CANDIDATES, hooks=cap.hooks(), on_layout=cap.on_layout)
    assert len(cap.steps) == 2 and cap.rows is not None


def test_a_tap_that_writes_raises():
    lm, tok = _wrap("llama")
    scorer = ActionScorer(lm, forward="auto")

    def hook(t, hook):
        return None

    hook.plain_tap = (0, lambda q, k, s: q.mul_(1.0))
    with pytest.raises(RuntimeError, match="taps only read"):
        scorer.score(*episode_steps(tok)[0], CANDIDATES, hooks=[("blocks.0.attn.hook_rot_q", hook)])


def test_a_tap_whose_layer_never_runs_names_the_bridge():
    lm, tok = _wrap("llama")
    scorer = ActionScorer(lm, forward="auto")

    def hook(t, hook):
        return None

    hook.plain_tap = (7, lambda q, k, s: None)  # a layer this two-layer model does not have
    with pytest.raises(RuntimeError, match="--forward bridge"):
        scorer.score(*episode_steps(tok)[0], CANDIDATES, hooks=[("blocks.0.attn.hook_rot_q", hook)])
    assert scorer.cache is None


def test_taps_see_the_cached_keys_first_and_only_read():
    lm, tok = _wrap("qwen2")
    steps = episode_steps(tok)
    scorer = ActionScorer(lm, forward="auto")
    scorer.score(*steps[0], CANDIDATES)
    n_cached = len(steps[0][0])
    seen = {}

    def tap(q, k, scaling):
        seen.setdefault("shapes", []).append((tuple(q.shape), tuple(k.shape), scaling))
        seen["first_keys"] = k[:, :, :n_cached].clone()

    def hook(t, hook):
        return None

    hook.plain_tap = (1, tap)
    cached = scorer.cache.layers[1].keys.clone()  # layer 1's keys of the prefix, before this step appends its own
    res = scorer.score(*steps[1], CANDIDATES, hooks=[("blocks.1.attn.hook_rot_q", hook)])
    [(qs, ks, scaling)] = seen["shapes"]
    assert torch.equal(seen["first_keys"], cached)
    n_q = res.layout.n_queries
    assert qs == (1, lm.n_heads, n_q, lm.d_head) and ks == (1, lm.n_key_value_heads, n_cached + n_q, lm.d_head)
    assert scaling == pytest.approx(lm.d_head ** -0.5)
    assert res.scores == ActionScorer(lm, forward="auto").score(*steps[1], CANDIDATES).scores


def test_attention_taps_are_off_outside_their_block():
    from workbench.models.plain import plain_model

    lm, tok = _wrap("llama")
    plain = plain_model(lm)
    ids = torch.tensor([episode_steps(tok)[0][0]])
    calls = []
    with attention_taps({0: [lambda q, k, s: calls.append(0)]}) as fired:
        plain(input_ids=ids)
    assert calls == [0] and fired == {0}
    plain(input_ids=ids)
    assert calls == [0]
    # stop_after: the forward ends once that layer's taps ran; a later layer's never do
    from workbench.models.plain import StopForward

    with pytest.raises(StopForward):
        with attention_taps({0: [lambda q, k, s: calls.append(0)], 1: [lambda q, k, s: calls.append(1)]},
                            stop_after=0) as fired:
            plain(input_ids=ids)
    assert calls == [0, 0] and fired == {0}


@pytest.mark.game
@pytest.mark.integration
def test_a_captured_replay_of_a_committed_run_is_the_bridges_on_the_plain_path(monkeypatch):
    """The committed paper-scale proactive run (agent v2, bf16) replayed in a live session that captures the agent's
    committed retrieval heads at every step: on the plain path (the capture's taps) and through the bridge (its
    hooks), the same p(action) and rows at every step; on the CPU type that played the run, each recorded p(action)
    exactly."""
    from workbench.eval.config import RunConfig
    from workbench.eval.run_folder import read_config, read_episodes
    from workbench.live.session import Session, find_task
    from workbench.models import load_model
    from workbench.provenance import versions

    folder = Path(__file__).parents[2] / "runs/full-bfloat16/06_proactive/smollm2-135m-alfworld-v2/proactive"
    saved = read_config(folder)
    cfg = RunConfig.from_identity(str(folder), saved.run)
    lm = load_model(cfg.model, dtype=cfg.dtype)
    ep = read_episodes(folder)[0]

    def replay(forward):
        monkeypatch.setenv("WORKBENCH_FORWARD", forward)
        s = Session(lm, find_task(ep.task_id, (cfg.split,)), cfg.memory, options=cfg.options, dtype=cfg.dtype,
                    retriever=cfg.retriever, max_steps=cfg.max_steps)  # heads: the model's committed ones
        s.recorded = ep
        rows = s.replay(to_step=min(ep.n_steps, 10))
        return s, rows

    plain, got = replay("auto")
    bridge, want = replay("bridge")
    assert plain.capture is not None and len(plain.capture.capture.heads) > 0
    assert (plain.agent.scorer.last_path, bridge.agent.scorer.last_path) == ("plain", "bridge")
    assert len(got) >= 8 and [r["p_action"] for r in got] == [r["p_action"] for r in want]
    steps_a, steps_b = plain.capture.capture.steps, bridge.capture.capture.steps
    assert len(steps_a) == len(steps_b) == len(got)
    assert max((a.rows - b.rows).abs().max().item() for a, b in zip(steps_a, steps_b)) <= 1e-6
    if saved.versions.get("cpu") == versions().get("cpu"):  # bf16 bits depend on the CPU that played the run
        assert all(r["p_action"] == r["recorded_p_action"] for r in got)


def test_taps_run_under_inference_mode():
    """Inference tensors keep no version counter: the write guard stands aside, the rows are the same."""
    lm, tok = _wrap("llama")
    prefix, suffix = episode_steps(tok)[0]
    ref = AttentionCapture(lm, "all").capture_prompt(prefix + suffix).clone()
    with torch.inference_mode():
        cap = AttentionCapture(lm, "all")
        rows = cap.capture_prompt(prefix + suffix)
    assert cap.last_path == "plain" and torch.equal(rows, ref)


def test_a_write_whose_later_forward_raises_takes_back_the_captured_step(monkeypatch):
    """write() hands its hooks to the first forward only; a raise in a later forward of the search still discards the
    step the capture recorded (the decision never completed) and the cache."""
    from workbench.models import scoring

    lm, tok = _wrap("llama")
    prefix, suffix = episode_steps(tok)[0]
    scorer = ActionScorer(lm, forward="auto")
    cap = AttentionCapture(lm, "all", scorer=scorer)
    real, calls = scoring.log_softmax_rows, []

    def second_raises(logits):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(logits)

    monkeypatch.setattr(scoring, "log_softmax_rows", second_raises)
    with pytest.raises(KeyboardInterrupt):
        scorer.write(prefix, suffix, CANDIDATES, beam=2, hooks=cap.hooks(), on_layout=cap.on_layout)
    assert len(calls) == 2 and cap.steps == [] and cap.rows is None and scorer.cache is None


def test_a_raise_before_the_forward_keeps_the_scorer_and_earlier_steps_sound():
    """on_layout raising (a capture built without scorer= on a cached step) happens after the cache was cropped: the
    scorer stays usable and scores as a fresh one, and the capture keeps the steps it had."""
    lm, tok = _wrap("llama")
    steps = episode_steps(tok)
    scorer, ref = ActionScorer(lm, forward="auto"), ActionScorer(lm, forward="auto")
    good = AttentionCapture(lm, [(0, 1)], scorer=scorer)
    scorer.score(*steps[2], CANDIDATES, hooks=good.hooks(), on_layout=good.on_layout)
    orphan = AttentionCapture(lm, [(0, 1)])  # no scorer=: a cached step is refused in on_layout
    with pytest.raises(ValueError, match="scorer=scorer"):  # a shorter prompt: the cache is cropped first
        scorer.score(*steps[0], CANDIDATES, hooks=good.hooks() + orphan.hooks(),
                     on_layout=lambda lay: [good.on_layout(lay), orphan.on_layout(lay)])
    assert len(good.steps) == 1
    with pytest.raises(RuntimeError, match="without on_layout"):  # hooks without their on_layout
        scorer.score(*steps[0], CANDIDATES, hooks=orphan.hooks())
    assert len(good.steps) == 1
    got = scorer.score(*steps[1], CANDIDATES, hooks=good.hooks(), on_layout=good.on_layout)
    assert got.scores == ref.score(*steps[1], CANDIDATES).scores and len(good.steps) == 2


def test_a_failed_capture_prompt_keeps_the_steps_recorded_before(monkeypatch):
    lm, tok = _wrap("llama")
    prefix, suffix = episode_steps(tok)[0]
    scorer = ActionScorer(lm, forward="auto")
    cap = AttentionCapture(lm, [(0, 1)], scorer=scorer)
    scorer.score(prefix, suffix, CANDIDATES, hooks=cap.hooks(), on_layout=cap.on_layout)
    monkeypatch.setattr(scorer, "plain_path", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        cap.capture_prompt(prefix + suffix)
    assert len(cap.steps) == 1


def test_an_instrument_whose_on_abort_raises_does_not_hide_the_steps_error():
    lm, tok = _wrap("llama")
    scorer = ActionScorer(lm, forward="auto")

    def hook(t, hook):
        return None

    def abort():
        raise ValueError("abort failed")

    hook.plain_tap = (0, lambda q, k, s: (_ for _ in ()).throw(KeyError("the step's own error")))
    hook.on_abort = abort
    with pytest.warns(UserWarning, match="abort failed"), pytest.raises(KeyError, match="own error"):
        scorer.score(*episode_steps(tok)[0], CANDIDATES, hooks=[("blocks.0.attn.hook_rot_q", hook)],
                     on_layout=lambda lay: None)
