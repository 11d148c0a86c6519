"""Fixtures of the batch tests: a tiny random model saved as a local HF folder, so worker processes load it by path
exactly as they would load Qwen2.5-7B from /models (the real loader, no in-memory shortcut)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


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
