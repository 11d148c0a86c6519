"""Tiny random models of the architecture families users run as agents, built from the real `transformers` classes
with SmolLM2's tokenizer (no weights downloaded): two decoder layers, 4 query heads over 2 key/value heads where
the family has grouped-query attention, and each family's own parts switched on where it has them (Gemma's logit
soft-capping and sliding-window layers with a window shorter than the test prompts, Qwen3's and OLMo 2's q/k norms,
Phi-3's and GPT-NeoX's fused QKV with partial rotary).

:func:`build` returns the model, an untouched copy to compute references with (wrapping a model in the bridge stops
it from returning ``attentions``), and the tokenizer.
"""

from __future__ import annotations

import copy
from functools import lru_cache

ARCHITECTURES: dict[str, tuple[str, str, dict]] = {
    # name: (config class, model class, family-specific config)
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 12}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 12,
                                                     "attn_logit_softcapping": 5.0, "final_logit_softcapping": 30.0,
                                                     "layer_types": ["sliding_attention", "full_attention"]}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": 16, "query_pre_attn_scalar": 16,
                                                         "sliding_window": 12,
                                                         "layer_types": ["sliding_attention", "full_attention"]}),
    "qwen2-sliding": ("Qwen2Config", "Qwen2ForCausalLM", {"use_sliding_window": True, "sliding_window": 12,
                                                          "max_window_layers": 1}),  # layer 0 full, layer 1 sliding
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"partial_rotary_factor": 0.5}),
    "phi3-sliding": ("Phi3Config", "Phi3ForCausalLM", {"partial_rotary_factor": 0.5, "sliding_window": 12}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"rotary_pct": 0.5, "num_key_value_heads": None}),
}


@lru_cache(maxsize=1)
def tokenizer():
    from transformers import AutoTokenizer

    from workbench.models.loading import _dequantized_dir
    from workbench.models.registry import get_model_spec

    return AutoTokenizer.from_pretrained(_dequantized_dir(get_model_spec("smollm2-135m-instruct")))


def build(name: str, seed: int = 0, device: str = "cpu"):
    """(model, reference copy, tokenizer) of one architecture, eager attention, float32, eval mode, on ``device``."""
    import torch
    import transformers

    tok = tokenizer()
    cname, mname, extra = ARCHITECTURES[name]
    kw = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=4096, bos_token_id=tok.bos_token_id,
              eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    kw.update(extra)
    kw = {k: v for k, v in kw.items() if v is not None}
    cfg = getattr(transformers, cname)(**kw)
    cfg.architectures = [mname]
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, mname)(cfg).eval()
    with torch.no_grad():  # random norms' weights: away from 1 so a missed norm shows
        for n, p in model.named_parameters():
            if "norm" in n and p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))
    model.to(device)
    return model, copy.deepcopy(model), tok


#: candidate commands the scorer tests score at every step
CANDIDATES = ["go to shelf 2", "put mug 1 in/on shelf 2", "look", "go to desk 1"]


def episode_steps(tok):
    """Three prompts of an ALFWorld-like episode, each extending the last one's prefix (the cache is reused), as
    (prefix, suffix); longer than the sliding windows (12 tokens)."""
    head = tok("You are in the middle of a room. You see a desk 1, a shelf 2 and a drawer 3.\n"
               "Your task is to: put a mug in shelf.\n", add_special_tokens=False).input_ids
    end = tok("<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False).input_ids
    body, out = list(head), []
    for line in ("> go to desk 1\nOn the desk 1, you see a mug 1, a pen 2 and a laptop 1.\n",
                 "> take mug 1 from desk 1\nYou pick up the mug 1 from the desk 1.\n",
                 "> go to shelf 2\nOn the shelf 2, you see nothing.\n"):
        body += tok(line, add_special_tokens=False).input_ids
        out.append((list(body), end))
    return out
