"""Flat Recency and Flat Retrieval: the paper's baselines under the same budget and layout."""

from __future__ import annotations

import pytest
from rank_bm25 import BM25Okapi

from workbench.memory.tokens import count_o200k
from workbench.memory.trajectory import Step
from workbench.methods.arbiter.assembly import block_text
from workbench.methods.arbiter.flat import (
    BM25_B,
    BM25_K1,
    FlatRecency,
    FlatRetrieval,
    whitespace_tokens,
)

ROOM = "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a desk 1, and a fridge 1."
GOAL = "put a clean apple in fridge."
STEPS = [("go to cabinet 1", "On the cabinet 1, you see a mug 1."),
         ("go to desk 1", "On the desk 1, you see a apple 1, and a pen 2."),
         ("take apple 1 from desk 1", "You pick up the apple 1 from the desk 1."),
         ("go to fridge 1", "The fridge 1 is closed.")]


def feed(policy):
    policy.begin(None, GOAL, ROOM)
    history = []
    for a, o in STEPS:
        history.append(Step(observation="", action=a))
        policy.observe(history[-1], o)
    return policy.memory(len(STEPS), history)


def test_recency_keeps_the_newest_whole_records_oldest_first():
    full = feed(FlatRecency(2000))
    items = [p.text for p in full.working_memory if p.kind == "wm_item"]
    assert items[0] == ROOM + "\n" and items[-1] == "> go to fridge 1\nThe fridge 1 is closed.\n"
    tight_budget = count_o200k("Working memory:\n(End of working memory.)\n" + "".join(items[-2:]))
    tight = feed(FlatRecency(tight_budget))
    assert [p.text for p in tight.working_memory if p.kind == "wm_item"] == items[-2:]
    assert tight.record["wm"]["o200k"] <= tight_budget


def test_retrieval_ranks_observation_lines_by_bm25_on_goal_previous_action_and_latest_observation():
    block = feed(FlatRetrieval(2000))
    lines = [p.text.rstrip("\n") for p in block.working_memory if p.kind == "wm_item"]
    docs = [ROOM] + [o for _, o in STEPS]
    bm = BM25Okapi([whitespace_tokens(d) for d in docs], k1=BM25_K1, b=BM25_B)
    scores = bm.get_scores(whitespace_tokens(f"{GOAL} go to fridge 1 The fridge 1 is closed."))
    expected = [docs[i] for i in sorted(range(len(docs)), key=lambda i: (-scores[i], -i))]
    assert lines == expected
    assert lines[0] == "The fridge 1 is closed."


@pytest.mark.parametrize("cls", [FlatRecency, FlatRetrieval])
@pytest.mark.parametrize("budget", [3, 15, 40, 80, 500])
def test_flat_blocks_never_exceed_the_budget(cls, budget):
    b = feed(cls(budget))
    assert count_o200k(block_text(b.working_memory)) == b.record["wm"]["o200k"] <= budget
    assert b.layout == "working_memory"


def test_whitespace_tokens_are_the_papers():
    assert whitespace_tokens("On the Desk 1, you see") == ["on", "the", "desk", "1,", "you", "see"]
