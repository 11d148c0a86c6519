"""Prompt spans are exact, segments exclude observations, the prefix only grows, overflow has a policy."""

import pytest

from workbench.memory.render import render_pieces
from workbench.memory.trajectory import MemoryEntry, Segment, Step
from workbench.prompts.layout import PromptBuilder, PromptTooLongError

ENTRY = MemoryEntry(
    entry_id="e1", task_id="valid_train/x/t1", task_type="pick", goal="put a apple in fridge.",
    initial_observation="You are in the middle of a room. You see a countertop 1 and a fridge 1.",
    segments=(
        Segment(action="go to countertop 1"),
        Segment(observation="On the countertop 1, you see a apple 1.", action="take apple 1 from countertop 1"),
        Segment(observation="You pick up the apple 1 from the countertop 1.", action="go to fridge 1"),
    ),
)
ROOM = "You are in the middle of a room. Looking quickly around you, you see a desk 1 and a shelf 1."
GOAL = "put a pen in shelf."


@pytest.fixture(scope="module")
def builder(tiny_lm):
    return PromptBuilder(tiny_lm.tokenizer, max_tokens=4096)


def _history(n):
    return [Step(observation=ROOM if k == 0 else f"On the desk {k}, you see a pen {k}.", action=f"go to desk {k + 1}")
            for k in range(n)]


def test_every_span_decodes_to_its_piece(builder):
    p = builder.build(ROOM, GOAL, _history(2), memory=render_pieces(ENTRY), final_observation="Nothing happens.")
    tok = builder.tokenizer
    toks = p.tokens
    text = tok.decode(toks)
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
    seg_kinds = [s for s in p.spans if s.segment is not None and s.kind in ("observation", "action", "thought")]
    for s in seg_kinds:
        piece = tok.decode(toks[s.start:s.end])
        assert piece.strip(), s
    # the action of segment 1 is exactly its action line
    act1 = [s for s in p.spans if s.kind == "action" and s.segment == 1][0]
    assert "take apple 1 from countertop 1" in tok.decode(toks[act1.start:act1.end])
    assert p.n_segments == 3
    assert p.memory_span[0] < p.task_span[0] < p.history_span[0] < p.spans[-1].start


def test_segment_positions_exclude_observation_tokens(builder):
    p = builder.build(ROOM, GOAL, memory=render_pieces(ENTRY))
    with_obs = p.segment_positions(exclude_observation=False)
    without = p.segment_positions()
    obs1 = [s for s in p.spans if s.kind == "observation" and s.segment == 1][0]
    assert set(range(obs1.start, obs1.end)) <= set(with_obs[1])
    assert not set(range(obs1.start, obs1.end)) & set(without[1])
    assert all(without)  # every segment keeps its action tokens


def test_prefix_of_a_step_is_a_prefix_of_the_next(builder):
    prev = None
    for t in range(4):
        h = _history(t)
        p = builder.build(ROOM, GOAL, h, memory=render_pieces(ENTRY), final_observation=f"On the desk {t}, you see a pen {t}." if t else None)
        if prev is not None:
            assert p.prefix[: len(prev.prefix)] == prev.prefix
        prev = p


def test_overflow_drops_history_then_memory_then_errors(tiny_lm):
    full = PromptBuilder(tiny_lm.tokenizer, max_tokens=10_000).build(ROOM, GOAL, _history(6), memory=render_pieces(ENTRY))
    no_mem = PromptBuilder(tiny_lm.tokenizer, max_tokens=10_000).build(ROOM, GOAL)
    # a budget that fits memory + task but not the whole history
    b = PromptBuilder(tiny_lm.tokenizer, max_tokens=full.n_tokens - 10 + 48)
    p = b.build(ROOM, GOAL, _history(6), memory=render_pieces(ENTRY))
    assert 0 < p.truncated_history < 6 and p.truncated_memory == 0 and p.n_tokens <= full.n_tokens - 10
    assert "(Earlier steps omitted.)" in b.decode(p)
    # a budget below the memory block drops segments too
    b2 = PromptBuilder(tiny_lm.tokenizer, max_tokens=no_mem.n_tokens + 20 + 48)
    p2 = b2.build(ROOM, GOAL, _history(6), memory=render_pieces(ENTRY))
    assert p2.truncated_history == 6 and p2.truncated_memory >= 1
    with pytest.raises(PromptTooLongError, match="task alone"):
        PromptBuilder(tiny_lm.tokenizer, max_tokens=no_mem.n_tokens - 5 + 48).build(ROOM, GOAL, _history(2))


def test_a_history_chunk_drops_steps_several_at_a_time_so_overflowing_prompts_extend_one_another(tiny_lm):
    def build(builder, t):
        return builder.build(ROOM, GOAL, _history(t), memory=render_pieces(ENTRY),
                             final_observation=f"On the desk {t}, you see a pen {t}.")

    whole = build(PromptBuilder(tiny_lm.tokenizer, max_tokens=10_000), 12)
    budget = whole.n_tokens - 60 + 48  # the last few steps overflow it
    one, chunk = (PromptBuilder(tiny_lm.tokenizer, max_tokens=budget, history_chunk=c) for c in (1, 4))
    dropped = {c: [build(b, t).truncated_history for t in range(13)] for c, b in ((1, one), (4, chunk))}
    assert max(dropped[1]) > 0 and all(d % 4 == 0 or d == t for t, d in enumerate(dropped[4]))
    assert all(d4 >= d1 for d1, d4 in zip(dropped[1], dropped[4]))  # never less than it must, the fit unchanged
    assert all(build(chunk, t).n_tokens <= budget - 48 for t in range(13))
    # where the chunked drop stays put, each prompt extends the one before (one prefix: KV reuse, one packed forward)
    for t in range(1, 13):
        if dropped[4][t] == dropped[4][t - 1] > 0:
            assert build(chunk, t).prefix[: len(build(chunk, t - 1).prefix)] == build(chunk, t - 1).prefix
    assert sum(a == b > 0 for a, b in zip(dropped[4], dropped[4][1:])) >= 1
    with pytest.raises(ValueError, match="history_chunk 0"):
        PromptBuilder(tiny_lm.tokenizer, max_tokens=budget, history_chunk=0)
