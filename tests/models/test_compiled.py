"""``--forward compiled``: the plain model's decoder stack through torch.compile (workbench.models.compiled). It scores
the families of the matrix as the plain path does (fp32, within compiler reassociation), across the steps of an
episode (no cache, a fresh cache, a cropped one); a tapped step runs on the uncompiled plain model and a hooked one
on the bridge; a compiler that cannot build the step is an error naming the way back; a run played with it says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from architectures import CANDIDATES, build, episode_steps  # noqa: E402

from workbench.models.compiled import CompileError, compiled_model  # noqa: E402
from workbench.models.loading import wrap  # noqa: E402
from workbench.models.scoring import FORWARDS, ActionScorer, default_forward, set_default_forward  # noqa: E402

# the families whose code differs on this path: Llama (the default agent's), Gemma 2 (soft-capping: the family's eager
# function, sliding layers), Qwen 2 with a sliding window (the window in the mask), GPT-NeoX (another base-model name,
# fused QKV, partial rotary)
COMPILED_ARCHITECTURES = ["llama", "gemma2", "qwen2-sliding", "gpt_neox"]


@pytest.fixture(scope="module", params=COMPILED_ARCHITECTURES)
def tiny(request):
    model, _, tok = build(request.param)
    return request.param, wrap(model, tok, name=f"tiny-{request.param}", hf_id=f"tiny/{request.param}"), tok


def test_the_compiled_path_scores_like_the_plain_path_at_every_step(tiny):
    from torch._dynamo.utils import counters

    arch, lm, tok = tiny
    plain, comp = ActionScorer(lm, forward="auto"), ActionScorer(lm, forward="compiled")
    graphs = counters["stats"]["unique_graphs"]
    steps = episode_steps(tok)
    for episode in range(2):
        plain.reset()
        comp.reset()
        # the second episode's steps (another prompt, a cache of another length) reuse the first one's graphs
        order = steps if episode == 0 else [(p + p[-3:], s) for p, s in steps]
        with torch._dynamo.config.patch(error_on_recompile=episode == 1):
            for k, (prefix, suffix) in enumerate(order):
                a = plain.score(prefix, suffix, CANDIDATES)
                b = comp.score(prefix, suffix, CANDIDATES)
                assert (plain.last_path, comp.last_path) == ("plain", "compiled")
                assert b.reused_tokens == a.reused_tokens  # the cache is kept and cropped as on the plain path
                assert b.best == a.best, (arch, k)
                assert max(abs(x - y) for x, y in zip(a.scores, b.scores)) < 1e-5, (arch, k)
                assert a.scores != [0.0] * len(a.scores)
    assert counters["stats"]["unique_graphs"] > graphs  # dynamo did compile (not a silent eager fall back)


def test_the_compiled_model_holds_the_bridges_tensors(tiny):
    _, lm, _ = tiny
    comp = compiled_model(lm)
    assert comp is compiled_model(lm)  # built (and compiled) once per model
    bridged = {p.data_ptr() for p in lm.hf_model.parameters()}
    assert {p.data_ptr() for p in comp.plain.parameters()} <= bridged


def test_a_tapped_step_runs_on_the_uncompiled_plain_model_and_a_hooked_one_on_the_bridge():
    from workbench.attention import AttentionCapture

    model, _, tok = build("llama")
    lm = wrap(model, tok, name="tiny-llama-taps", hf_id="tiny/llama")
    ref, comp = ActionScorer(lm, forward="auto"), ActionScorer(lm, forward="compiled")
    heads = [(0, 1), (1, 3)]
    cap_ref = AttentionCapture(lm, heads, scorer=ref, keep_steps=False)
    cap = AttentionCapture(lm, heads, scorer=comp, keep_steps=False)
    seen = []
    pattern = ("blocks.0.attn.hook_pattern", lambda t, hook: seen.append(t.shape) or t)
    for k, (prefix, suffix) in enumerate(episode_steps(tok)):
        # an unhooked (compiled) step first: the tapped and hooked steps then reuse the cache it left
        u = comp.score(prefix, suffix, CANDIDATES)
        assert comp.last_path == "compiled"
        a = ref.score(prefix, suffix, CANDIDATES, hooks=cap_ref.hooks(), on_layout=cap_ref.on_layout)
        b = comp.score(prefix, suffix, CANDIDATES, hooks=cap.hooks(), on_layout=cap.on_layout)
        assert comp.last_path == "plain"  # taps read grouped_attention's inputs: not compiled
        assert b.reused_tokens >= len(prefix) - 1  # on the cache the compiled step left (all its prefix but q)
        assert max(abs(x - y) for x, y in zip(a.scores, b.scores)) < 1e-5
        assert max(abs(x - y) for x, y in zip(a.scores, u.scores)) < 1e-5
        assert torch.allclose(cap.rows, cap_ref.rows, atol=1e-6)
        comp.score(prefix, suffix, CANDIDATES, hooks=[pattern])
        assert comp.last_path == "bridge"
    assert len(seen) == len(episode_steps(tok))


def test_a_compiler_that_cannot_build_the_step_is_an_error_naming_the_way_back():
    import torch._inductor.config as inductor

    torch._dynamo.reset()  # no graph of an earlier test to reuse: this step must compile
    model, _, tok = build("llama", seed=3)
    lm = wrap(model, tok, name="tiny-llama-nocxx", hf_id="tiny/llama")
    scorer, plain = ActionScorer(lm, forward="compiled"), ActionScorer(lm, forward="auto")
    (p0, s0), (p1, s1) = episode_steps(tok)[:2]
    scorer._compiled = plain.plain_path()  # a first step on the plain model: a cache to lose
    scorer.score(p0, s0, CANDIDATES)
    scorer._compiled = None
    assert scorer._cached == p0
    with inductor.patch({"cpp.cxx": ("/nonexistent/g++",), "force_disable_caches": True}):
        with pytest.raises(CompileError, match=r"--forward auto.*C\+\+ compiler"):
            scorer.score(p1, s1, CANDIDATES)
    assert scorer._cached == [] and scorer._cache is None  # the failed step dropped the cache it had extended
    # with a compiler again, the same scorer compiles and scores as the plain path does
    a, b = plain.score(p1, s1, CANDIDATES), scorer.score(p1, s1, CANDIDATES)
    assert scorer.last_path == "compiled" and max(abs(x - y) for x, y in zip(a.scores, b.scores)) < 1e-5


def test_forward_compiled_is_a_process_default_and_a_run_played_with_it_says_so(tmp_path, monkeypatch):
    from workbench.eval.config import RunConfig
    from workbench.eval.run_folder import write_run_config

    assert "compiled" in FORWARDS
    monkeypatch.setenv("WORKBENCH_FORWARD", "auto")  # restored after the test
    write_run_config(RunConfig(out=str(tmp_path / "eager"), memory="none"))
    assert "forward" not in json.loads((tmp_path / "eager" / "config.json").read_text())["versions"]
    set_default_forward("compiled")
    assert default_forward() == "compiled" and ActionScorer(_tiny_lm(), reuse_cache=False).forward == "compiled"
    write_run_config(RunConfig(out=str(tmp_path / "compiled"), memory="none"))
    versions = json.loads((tmp_path / "compiled" / "config.json").read_text())["versions"]
    assert versions["forward"] == "compiled"


def _tiny_lm():
    model, _, tok = build("llama")
    return wrap(model, tok, name="tiny-llama", hf_id="tiny/llama")


def test_only_the_commands_that_play_batches_take_forward_compiled():
    import argparse

    from workbench.cli import _options

    batch, study = argparse.ArgumentParser(), argparse.ArgumentParser()
    _options.add_executor(batch)  # run, sweep, dagger
    _options.add_device(study)    # heads, partings, refine, reproduce: studies that compare scores
    assert batch.parse_args(["--forward", "compiled"]).forward == "compiled"
    assert {a.dest: a for a in batch._actions}["forward"].choices == FORWARDS
    assert study.parse_args(["--forward", "bridge"]).forward == "bridge"
    for p, bad in ((study, "compiled"), (batch, "fast")):
        with pytest.raises(SystemExit):
            p.parse_args(["--forward", bad])


def test_a_run_played_otherwise_is_not_resumed_compiled_nor_the_reverse(tmp_path, monkeypatch):
    from workbench.eval.config import RunConfig
    from workbench.eval.run_folder import check_resume, write_run_config

    monkeypatch.setenv("WORKBENCH_FORWARD", "auto")
    eager, comp = RunConfig(out=str(tmp_path / "eager"), memory="none"), RunConfig(out=str(tmp_path / "c"), memory="none")
    write_run_config(eager)
    assert check_resume(eager, resume=True) == set()
    set_default_forward("bridge")  # the same scores as auto: the same run
    assert check_resume(eager, resume=True) == set()
    set_default_forward("compiled")
    with pytest.raises(ValueError, match="played eager and this process plays compiled.*--forward auto"):
        check_resume(eager, resume=True)
    write_run_config(comp)
    assert check_resume(comp, resume=True) == set()
    set_default_forward("auto")
    with pytest.raises(ValueError, match="played compiled and this process plays eager.*--forward compiled"):
        check_resume(comp, resume=True)


def test_a_session_refuses_the_compiled_forward(monkeypatch):
    from workbench.live.session import Session, SessionError

    monkeypatch.setenv("WORKBENCH_FORWARD", "compiled")
    with pytest.raises(SessionError, match=r"set_default_forward\('auto'\)"):
        Session(model=_tiny_lm(), task="valid_unseen/0")


def test_episodes_played_compiled_are_not_adopted_into_an_eager_run(tmp_path, monkeypatch):
    from workbench.eval.adoption import adopt_episodes
    from workbench.eval.config import RunConfig
    from workbench.eval.run_folder import write_run_config

    monkeypatch.setenv("WORKBENCH_FORWARD", "compiled")
    source = RunConfig(out=str(tmp_path / "source"), memory="none", tasks="0:2")
    write_run_config(source)
    set_default_forward("auto")
    with pytest.raises(ValueError, match="played compiled and this run plays eager"):
        adopt_episodes(RunConfig(out=str(tmp_path / "target"), memory="none", tasks="0:2"), source.out)
    assert not (tmp_path / "target").exists()
