"""P_t assembly: the o200k budget is never exceeded (property test over random item sets), bank order, focal
first, eta order, hidden items out, giving way by priority."""

from __future__ import annotations

import random

import pytest
from arbiter_builders import item

from workbench.memory.tokens import count_o200k
from workbench.methods.arbiter.assembly import (
    CLOSE,
    OPEN,
    Candidate,
    FixedShares,
    PriorityAllocation,
    assemble,
    block_text,
)
from workbench.methods.arbiter.items import BANK_ORDER, BANK_PREFIX

WORDS = ("apple", "countertop", "fridge", "drawer", "open", "closed", "holding", "nothing", "happens", "go", "to",
         "take", "from", "clean", "with", "sinkbasin", "lamp", "ü", "—", "3", "12", "\t", "  ", "...", "'s")


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) + (str(rng.randint(1, 9)) if rng.random() < 0.3 else "")
                    for _ in range(rng.randint(lo, hi))).strip() or "x"


def _random_candidates(rng: random.Random, n: int) -> list[Candidate]:
    out = []
    for k in range(n):
        bank = rng.choice(BANK_ORDER)
        it = item(f"{BANK_PREFIX[bank]}{k}", bank, _text(rng, 3, 40), _text(rng, 1, 8), ())
        eta = rng.random()
        out.append(Candidate(it, bank, rng.choice("FAH"), eta, eta + rng.choice((0.0, 1.0)), k))
    return out


@pytest.mark.parametrize("allocation", [PriorityAllocation(), FixedShares()], ids=["priority", "fixed-shares"])
def test_budget_is_never_exceeded_over_random_item_sets(allocation):
    rng = random.Random(0)
    cases = 0
    for _ in range(400):
        cands = _random_candidates(rng, rng.randint(0, 60))
        budget = rng.choice([rng.randint(1, 40), rng.randint(40, 300), 500, 750])
        block = assemble(cands, BANK_ORDER, budget, allocation)
        text = block_text(block.pieces)
        assert count_o200k(text) == block.o200k <= budget
        shown = {p.item for p in block.pieces if p.kind == "wm_item"}
        hidden = {c.item.id for c in cands if c.band == "H"}
        assert not shown & hidden
        assert shown | set(block.cut) == {c.item.id for c in cands if c.band != "H"} or budget < count_o200k(OPEN + CLOSE)
        cases += 1
    assert cases == 400


def test_layout_bank_order_focal_first_eta_order():
    cands = [
        Candidate(item("R1", "reference", "fact one is long enough", "f1"), "reference", "A", 0.9, 0.9, 0),
        Candidate(item("E1", "episodic", "event one happened", "e1"), "episodic", "A", 0.2, 0.2, 1),
        Candidate(item("E2", "episodic", "event two happened", "e2"), "episodic", "F", 0.1, 0.1, 2),
        Candidate(item("E3", "episodic", "event three happened", "e3"), "episodic", "A", 0.5, 0.5, 3),
        Candidate(item("G1", "goal", "Task goal: put a mug in desk.", "goal"), "goal", "F", 1.0, 2.0, 4),
        Candidate(item("C1", "constraint", "hidden constraint", "c"), "constraint", "H", 0.0, 0.0, 5),
    ]
    block = assemble(cands, BANK_ORDER, 500)
    assert block_text(block.pieces) == (
        "Working memory:\nGoal:\n- Task goal: put a mug in desk.\n"
        "Episodic:\n- event two happened\n- e3\n- e1\n"
        "Reference:\n- f1\n(End of working memory.)\n")
    assert block.shown == {"G1": "F", "E2": "F", "E3": "A", "E1": "A", "R1": "A"}
    spans = [(p.item, p.bank, p.band) for p in block.pieces if p.kind == "wm_item"]
    assert spans[0] == ("G1", "goal", "F")


def test_tight_budget_gives_way_by_priority_focal_to_ambient_first():
    g = Candidate(item("G1", "goal", "Task goal: put a clean mug in desk 1 please.", "goal: mug"), "goal", "F", 1.0, 2.0, 0)
    e = Candidate(item("E1", "episodic", "Step 3: 'open drawer 1' -> Nothing happens at all here.", "drawer 1: failed"),
                  "episodic", "F", 0.9, 0.5, 1)
    full = assemble([g, e], BANK_ORDER, 500)
    assert full.shown == {"G1": "F", "E1": "F"}
    smaller = assemble([g, e], BANK_ORDER, full.o200k - 1)
    assert smaller.shown == {"G1": "F", "E1": "A"}  # the lower priority item shrinks first
    tiny = assemble([g, e], BANK_ORDER, count_o200k(OPEN + CLOSE + "Goal:\n- goal: mug\n"))
    assert tiny.shown == {"G1": "A"} and tiny.cut == ("E1",)
    assert assemble([g, e], BANK_ORDER, 3).pieces == ()  # not even the wrapper fits: no block


def test_bank_tokens_count_item_lines_by_bank():
    cands = [Candidate(item("E1", "episodic", "event one", "e1"), "episodic", "F", 1, 1, 0),
             Candidate(item("R1", "reference", "fact one", "f1"), "pool", "F", 1, 1, 1)]
    block = assemble(cands, ("episodic", "pool"), 500)
    assert block.bank_tokens == {"episodic": count_o200k("- event one\n"), "reference": count_o200k("- fact one\n")}
    assert "Memory:\n" in block_text(block.pieces)  # the pool's one section
