"""The ambient band's bank templates: deterministic, short, and the same whoever wrote the item."""

from __future__ import annotations

from arbiter_builders import cand, state

from workbench.llm import run_stage
from workbench.llm.offline import OfflineALFWorldBackend
from workbench.memory.tokens import count_o200k
from workbench.methods.arbiter.ambient import ambient_form, compress
from workbench.methods.arbiter.banks import FunctionalBanks
from workbench.methods.arbiter.stage_types import WriterInput

ROOM = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 2, "
        "a countertop 1, and a fridge 1.")


def test_templates_per_bank():
    assert ambient_form("goal", "Task goal: put a clean apple in fridge.") == "goal: put clean apple in fridge"
    assert ambient_form("reference", "apple 1 is in/on countertop 1.", ("apple 1", "countertop 1")) == "apple 1 @ countertop 1"
    assert ambient_form("reference", "fridge 1 is closed.", ("fridge 1",)) == "fridge 1: closed"
    assert ambient_form("reference", "The room has: cabinet 1, countertop 2, countertop 1.",
                        ("cabinet 1", "countertop 2", "countertop 1")) == "room: cabinet x1, countertop x2"
    assert ambient_form("episodic", "Step 3: 'open drawer 1' -> Nothing happens.", ("drawer 1",),
                        about="open drawer 1") == "open drawer 1: failed"
    assert ambient_form("episodic", "Step 1: 'go to desk 1' -> On the desk 1, you see a pen 1, and a mug 2.",
                        ("desk 1",), about="go to desk 1") == "go to desk 1: saw pen 1, mug 2"
    assert ambient_form("constraint", "'open drawer 1' does nothing here.", about="open drawer 1") == "avoid: open drawer 1"
    assert compress("The apple must be cleaned with the sinkbasin before it goes in/on the fridge.", 8) == \
        "apple must be cleaned with sinkbasin before it …"


def test_items_of_any_writer_get_the_template_and_it_is_never_longer_than_the_focal():
    offline = OfflineALFWorldBackend()
    banks = FunctionalBanks()
    writes = run_stage(offline, "arbiter_writer", WriterInput(goal="put a clean apple in fridge.", step=0,
                                                               observation=ROOM, state=state())).value
    banks.update(writes.items, 0, state())
    llm_like = cand("reference", "apple 1 is in/on countertop 1.", ambient="an apple sits on the first countertop")
    banks.update([llm_like], 1, state())
    for it in banks.items():
        assert it.ambient == ambient_form(it.bank, it.focal, it.entities, it.about)
        assert count_o200k(it.ambient) <= count_o200k(it.focal)
    assert banks.items()[-1].ambient == "apple 1 @ countertop 1"  # not the writer's suggestion
