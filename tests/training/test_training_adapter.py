"""The committed adapter: loads by name (merged, cached), matches base + PEFT adapter unmerged, and a missing
adapter is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from workbench.models import ModelNotFoundError, ModelSpec, get_model_spec, load_model
from workbench.models.adapters import adapter_dir, load_with_adapter

PROMPT = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, "
          "a fridge 1, and a sinkbasin 1.\nYour task is to: put a clean apple in fridge.\n> go to countertop 1\n")


def test_registered_with_its_base():
    spec = get_model_spec("smollm2-135m-alfworld")
    assert spec is not None and spec.base == "smollm2-135m-instruct" and spec.adapter
    assert get_model_spec("smollm2-135m-instruct").base is None  # the untrained model stays available


def test_missing_adapter_names_the_path_and_the_make_target(tmp_path):
    spec = ModelSpec(name="nowhere-lora", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
                     adapter=str(tmp_path / "absent"), base="smollm2-135m-instruct")
    with pytest.raises(ModelNotFoundError) as e:
        load_with_adapter(spec)
    assert str(tmp_path / "absent") in str(e.value) and "workbench.training.train --out" in str(e.value)
    v2 = get_model_spec("smollm2-135m-alfworld-v2")  # until trained, loading it says how to train it
    assert v2.base == "smollm2-135m-instruct" and v2.recipe == "make train-agent"
    missing = ModelSpec(name="v2-elsewhere", hf_id=v2.hf_id, adapter=str(tmp_path / "absent"), base=v2.base,
                        recipe=v2.recipe)
    with pytest.raises(ModelNotFoundError, match="It is trained, not downloaded: `make train-agent`"):
        load_with_adapter(missing)


def test_an_adapter_folder_loads_over_its_registered_base(tmp_path):
    import json

    from workbench.models.loading import _adapter_folder_spec

    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct"}))
    spec = _adapter_folder_spec(str(tmp_path))
    assert spec.base == "smollm2-135m-instruct" and spec.adapter == str(tmp_path.resolve())
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "someone/else"}))
    with pytest.raises(ModelNotFoundError, match="not a registered base model"):
        _adapter_folder_spec(str(tmp_path))
    assert _adapter_folder_spec(str(tmp_path / "missing")) is None


@pytest.mark.integration
def test_bridge_of_the_merged_model_matches_base_plus_unmerged_adapter():
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from workbench.models.loading import _dequantized_dir

    spec = get_model_spec("smollm2-135m-alfworld")
    lm = load_model("smollm2-135m-alfworld")
    assert "adapter:" in lm.source
    base = AutoModelForCausalLM.from_pretrained(_dequantized_dir(get_model_spec(spec.base)), dtype=torch.float32,
                                                attn_implementation="eager")
    ref = PeftModel.from_pretrained(base, adapter_dir(spec)).eval()
    messages = [{"role": "user", "content": PROMPT}]
    text = lm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + "take apple 1"
    ids = lm.tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        ours = lm.bridge(ids)
        theirs = ref(ids).logits
    diff = (ours - theirs).abs().max().item()
    print(f"adapter parity, {ids.shape[1]} tokens: max|diff| = {diff:.3e}")
    assert diff < 1e-3
    # and the adapter does change the model (the merge did not silently drop it)
    with ref.disable_adapter(), torch.no_grad():
        untouched = ref(ids).logits
    assert (untouched - theirs).abs().max().item() > 1e-2


def test_a_card_names_the_registered_model_and_its_recipe(tmp_path):
    """A registered adapter's card carries its registry name and recipe; any other folder its path and command."""
    import workbench
    from workbench.training.card import _identity

    v1 = Path(workbench.__file__).parent / get_model_spec("smollm2-135m-alfworld").adapter
    v2 = Path(workbench.__file__).parent / get_model_spec("smollm2-135m-alfworld-v2").adapter
    assert _identity(v1, {"out": "x"}) == ("smollm2-135m-alfworld",
                                           "`make train-agent-v1` (its training step: `python -m "
                                           "workbench.training.train --out x ...`; the exact arguments are in "
                                           "`training_log.json`)")
    assert _identity(v2, {"out": "y"})[0] == "smollm2-135m-alfworld-v2"
    assert _identity(v2, {"out": "y"})[1].startswith("`make train-agent` ")
    title, regenerate = _identity(tmp_path, {"out": "runs/dagger/it0/adapter"})
    assert title == "runs/dagger/it0/adapter" and regenerate.startswith("`python -m workbench.training.train --out "
                                                                        "runs/dagger/it0/adapter ...`")


def test_a_warm_start_finds_a_registered_adapter_by_name(tmp_path):
    from workbench.models.adapters import adapter_path
    from workbench.training.run_folder import init_adapter_folder

    assert init_adapter_folder("smollm2-135m-alfworld") == adapter_path(get_model_spec("smollm2-135m-alfworld"))
    with pytest.raises(FileNotFoundError, match="smollm2-135m-alfworld"):  # the message lists the registered ones
        init_adapter_folder("smollm2-135m-alfworl")
