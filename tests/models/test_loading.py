"""Model loading: parity with plain transformers, clear errors, no downloads."""

import os
from pathlib import Path

import pytest
import torch

from workbench.models import ModelNotFoundError, load_model, packaged_gguf_path


def test_unknown_model_says_where_it_looked(tmp_path):
    with pytest.raises(ModelNotFoundError) as e:
        load_model(str(tmp_path / "missing-model"))
    msg = str(e.value)
    assert "looked in" in msg and "missing-model" in msg and "smollm2-135m-instruct" in msg
    with pytest.raises(ModelNotFoundError, match="HF cache"):
        load_model("nobody/not-in-cache-7B")


def test_offline_is_enforced():
    import workbench.models.loading  # noqa: F401

    assert os.environ.get("HF_HUB_OFFLINE") == "1"


@pytest.mark.integration
def test_bridge_logits_match_plain_transformers_from_the_gguf(smollm):
    """The bridge (over the cached fp32 safetensors) vs transformers loading the GGUF itself, 200 tokens."""
    from transformers import AutoModelForCausalLM

    gguf = packaged_gguf_path()
    ref = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                               attn_implementation="eager").eval()
    text = "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1. " * 12
    ids = smollm.tokenizer(text, return_tensors="pt").input_ids[:, :200]
    assert ids.shape[1] == 200
    with torch.no_grad():
        diff = (smollm.bridge(ids) - ref(ids).logits).abs().max().item()
    print(f"logit parity, 200 tokens: max|diff| = {diff:.3e}")
    assert diff < 1e-4
    assert smollm.n_heads == 9 and smollm.n_key_value_heads == 3 and smollm.n_layers == 30


def _build_slowly(out: str, log: str) -> None:
    import time

    from workbench.models.registry import cached_model_folder

    def build(tmp):
        with open(log, "a") as fh:
            fh.write("built\n")
        (tmp / "config.json").write_text("{}")
        time.sleep(0.5)  # the other process asks while this one is still writing
        (tmp / "model.safetensors").write_bytes(b"weights")

    cached_model_folder(Path(out), build)


def test_cached_model_folder_is_built_once_when_two_processes_ask_at_once(tmp_path):
    """A sweep's workers on a fresh machine load the same model at once: one builds, the other waits for it."""
    import multiprocessing

    out, log = tmp_path / "models" / "m", tmp_path / "builds.log"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_build_slowly, args=(str(out), str(log))) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert log.read_text() == "built\n"
    assert (out / "model.safetensors").read_bytes() == b"weights"
    assert sorted(x.name for x in out.parent.iterdir()) == ["m", "m.lock"]  # no temporary folder left behind
