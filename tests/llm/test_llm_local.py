"""In-process backend: a tiny random Llama with a tokenizer built here, plus the real SmolLM2 (integration)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from workbench.llm import (
    LLMConfigError,
    LLMOutputError,
    LocalBackend,
    Message,
    chat_json,
    get_backend,
)
from workbench.methods.proactive.stage_types import PROACTIVE_TOOLS, Intervention

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
HI = [Message(role="system", content="You are terse."), Message(role="user", content="Where is the apple?")]


@pytest.fixture(scope="module")
def tiny() -> LocalBackend:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["You are terse. Where is the apple? It is on the countertop 1.", "{\"reminder\": null}"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                                bos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.chat_template = CHATML
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048)
    model = transformers.LlamaForCausalLM(cfg).eval()
    return LocalBackend(hf_model=model, tokenizer=fast, model_name="tiny-llama")


def test_greedy_is_deterministic_and_respects_max_tokens(tiny: LocalBackend) -> None:
    a = tiny.chat(HI, max_tokens=12)
    b = tiny.chat(HI, max_tokens=12, seed=999)  # greedy ignores the seed
    assert a.text == b.text and a.backend == "local" and a.model == "tiny-llama"
    assert a.usage["completion_tokens"] <= 12 and a.usage["prompt_tokens"] > 10
    assert a.finish_reason in ("stop", "length")


def test_sampling_is_reproducible_per_seed_and_isolated_from_global_rng(tiny: LocalBackend) -> None:
    s1 = tiny.chat(HI, temperature=1.5, max_tokens=16, seed=1)
    torch.manual_seed(12345)  # unrelated global RNG use must not change a seeded call
    torch.rand(10)
    s1_again = tiny.chat(HI, temperature=1.5, max_tokens=16, seed=1)
    others = {tiny.chat(HI, temperature=1.5, max_tokens=16, seed=s).text for s in (2, 3, 4)}
    assert s1.text == s1_again.text
    assert others - {s1.text}, "different seeds should give some different samples"


def test_prompt_uses_the_chat_template_with_tool_and_schema_addenda(tiny: LocalBackend, monkeypatch) -> None:
    seen: list[list[dict]] = []
    original = tiny.tokenizer.apply_chat_template

    def spy(conversation, **kw):
        seen.append(conversation)
        return original(conversation, **kw)

    monkeypatch.setattr(tiny.tokenizer, "apply_chat_template", spy)
    monkeypatch.setattr(tiny, "constrain", False)  # tools described in the text form, the schema in words
    tiny.chat(HI, tools=PROACTIVE_TOOLS, max_tokens=2)
    tiny.chat(HI[1:], schema=Intervention, max_tokens=2)
    assert seen[0][0]["role"] == "system" and seen[0][0]["content"].startswith("You are terse.")
    assert "memory_save_knowledge" in seen[0][0]["content"] and "<tool_call>" in seen[0][0]["content"]
    assert seen[1][0]["role"] == "system" and '"reminder"' in seen[1][0]["content"]


def test_random_model_output_goes_through_the_typed_error_path(tiny: LocalBackend) -> None:
    with pytest.raises(LLMOutputError) as info:
        chat_json(tiny, HI, Intervention, max_tokens=8)
    assert len(info.value.raw) == 2  # one repair retry, then a typed error


def test_context_overflow_is_a_config_error(tiny: LocalBackend) -> None:
    with pytest.raises(LLMConfigError, match="exceeds n_ctx"):
        tiny.chat(HI, max_tokens=5000)


def test_local_needs_a_model() -> None:
    with pytest.raises(LLMConfigError, match="needs a loaded model"):
        LocalBackend()
    with pytest.raises(LLMConfigError, match="needs lm="):
        get_backend("local")


@pytest.mark.integration
def test_real_smollm2_answers_in_process() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from workbench.models import load_model
    except ImportError as e:  # pragma: no cover - the models layer is built alongside this one
        pytest.fail(f"workbench.models.load_model is not importable: {e}")
    backend = LocalBackend(load_model("smollm2-135m-instruct"))
    msgs = [Message(role="user", content="What is the capital of France? Answer in one word.")]
    a = backend.chat(msgs, max_tokens=12)
    assert "paris" in a.text.lower() and a.model == "smollm2-135m-instruct"
    assert backend.chat(msgs, max_tokens=12).text == a.text
    # the same model under the stages' grammars: every reply parses, whatever the 135M model thinks
    from workbench.llm import run_stage
    from workbench.methods.proactive.stage_types import ProactiveInput

    payload = ProactiveInput(goal="put a clean apple in fridge.", step=0,
                             current_observation="You are in the middle of a room. You see a fridge 1.")
    ledger: list = []
    reply = run_stage(backend, "proactive_intervene", payload, max_tokens=96, ledger=ledger).value
    calls = run_stage(backend, "proactive_update", payload, max_tokens=256, ledger=ledger).value
    assert reply.reminder is None or reply.reminder.strip()
    assert all(c.name.startswith("memory_") for c in calls)
    assert [c.mode for c in ledger] == ["grammar:llguidance"] * 2
