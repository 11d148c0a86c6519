"""Generate-and-parse decoding: parsing, mapping to admissible commands, and an episode step on a real model."""

import pytest

from workbench.models.generation import (
    closest_admissible,
    generate_action,
    parse_action,
)

ADM = ["go to countertop 1", "go to fridge 1", "take apple 1 from countertop 1", "put apple 1 in/on fridge 1"]


def test_parse_thought_and_action():
    assert parse_action("Thought: the apple is on the counter.\nAction: go to countertop 1") == \
        ("the apple is on the counter.", "go to countertop 1")
    assert parse_action("> take apple 1 from countertop 1.") == (None, "take apple 1 from countertop 1")
    assert parse_action("go to fridge 1\nmore text") == (None, "go to fridge 1")
    assert parse_action("") == (None, "")


def test_closest_admissible_prefers_word_overlap():
    assert closest_admissible("walk to the fridge 1", ADM) == "go to fridge 1"
    assert closest_admissible("", ADM) == ADM[0]


@pytest.mark.integration
def test_generate_action_returns_an_admissible_command(smollm):
    tok = smollm.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": "You see a countertop 1 and a fridge 1. Your task is "
                                     "to: put an apple in fridge. Reply with one action."}], tokenize=False,
                                   add_generation_prompt=True)
    gen = generate_action(smollm, tok(text, add_special_tokens=False).input_ids, ADM, max_new_tokens=16)
    assert gen.action in ADM and isinstance(gen.text, str)


def test_prefix_generator_writes_what_generate_action_writes_and_encodes_only_the_new_tokens(tiny_lm):
    """Along prompts that extend each other (and one that departs in the middle, as a reminder line does), the
    generator with the prefix's KV cache writes token for token what a fresh ``generate_action`` on the whole
    prompt writes, serving the shared prefix from its cache; without reuse it re-encodes every prompt."""
    from workbench.models.generation import PrefixGenerator

    tok = tiny_lm.tokenizer
    enc = lambda s: tok(s, add_special_tokens=False).input_ids  # noqa: E731
    p0 = enc("You are in the middle of a room. Looking quickly around you, you see a countertop 1 and a fridge 1.")
    p1 = p0 + enc(" > go to countertop 1\nOn the countertop 1, you see an apple 1.")
    p2 = p1 + enc(" > take apple 1 from countertop 1\nYou pick up the apple 1 from the countertop 1.")
    p2_reminder = p1 + enc(" Reminder: the fridge is closed.") + p2[len(p1):]
    suffix = enc("<|im_end|>\n<|im_start|>assistant\n")
    cached, fresh = PrefixGenerator(tiny_lm, max_new_tokens=12), PrefixGenerator(tiny_lm, reuse_cache=False,
                                                                                  max_new_tokens=12)
    reused = []
    for prefix in (p0, p1, p2_reminder, p2, p2):
        ref = generate_action(tiny_lm, prefix + suffix, ADM, max_new_tokens=12)
        assert cached.generate(prefix, suffix, ADM) == ref == fresh.generate(prefix, suffix, ADM)
        reused.append(cached.reused_tokens)
        assert fresh.reused_tokens == 0
    assert reused == [0, len(p0), len(p1), len(p1), len(p2)]  # the reminder's prompt departs after p1
    cached.reset()
    assert cached.generate(p2, suffix, ADM) == ref and cached.reused_tokens == 0
    with pytest.raises(ValueError, match="suffix"):
        cached.generate(p2, [], ADM)
