"""The proactive bank: four tools executed call by call, typed errors that leave it untouched, a private
status, tags, access counts and the BM25 prefilter past 50 entries."""

from __future__ import annotations

import pytest

from workbench.llm.protocol import ToolCall
from workbench.methods.proactive.bank import (
    MAX_CONTENT_CHARS,
    MAX_STATUS_CHARS,
    PREFILTER_AT,
    Bank,
)
from workbench.methods.proactive.triggers import Trigger


def call(name, **args):
    return ToolCall(name=name, arguments=args)


def test_calls_execute_in_order_and_saves_overwrite_by_id():
    b = Bank()
    applied, errors = b.apply([call("memory_save_knowledge", id="loc:apple_1", content="apple 1 is on desk 1"),
                               call("memory_save_knowledge", id="loc:apple_1", content="apple 1 is in fridge 1"),
                               call("memory_save_procedural", id="fail:open_drawer_1", content="[fail] open drawer 1 did nothing"),
                               call("memory_update_status", status="looking for the apple")], step=3)
    assert not errors and len(applied) == 4
    e = b.entries["loc:apple_1"]
    assert (e.content, e.kind, e.created, e.updated, e.tags) == ("apple 1 is in fridge 1", "knowledge", 3, 3, ("loc",))
    assert b.entries["fail:open_drawer_1"].tags == ("fail",)
    b.apply([call("memory_delete", id="loc:apple_1")], step=4)
    assert list(b.entries) == ["fail:open_drawer_1"] and b.status == "looking for the apple"


@pytest.mark.parametrize("bad,reason", [
    (call("memory_delete", id="loc:nothing"), "no entry 'loc:nothing'"),
    (call("memory_update_status", status="x" * (MAX_STATUS_CHARS + 1)), "over the limit"),
    (call("memory_update_status", status="   "), "empty status"),
    (call("memory_save_knowledge", id="fail:open_drawer_1", content="now a fact"), "is a procedural entry"),
    (call("memory_save_procedural", id="p:1", content="y" * (MAX_CONTENT_CHARS + 1)), "over the limit"),
    (call("memory_teleport", id="x"), "unknown tool"),
])
def test_an_invalid_call_is_typed_logged_and_leaves_the_bank_as_it_was(bad, reason):
    b = Bank()
    b.apply([call("memory_save_procedural", id="fail:open_drawer_1", content="open drawer 1 did nothing"),
             call("memory_update_status", status="s")], step=1)
    before = b.snapshot()
    applied, errors = b.apply([bad], step=2)
    assert not applied and len(errors) == 1 and reason in errors[0].reason and errors[0].index == 0
    assert b.snapshot() == before


def test_calls_after_a_bad_one_still_apply():
    b = Bank()
    applied, errors = b.apply([call("memory_delete", id="nope"),
                               call("memory_save_knowledge", id="loc:mug_1", content="mug 1 is on desk 1")], step=0)
    assert [e.index for e in errors] == [0] and [a["name"] for a in applied] == ["memory_save_knowledge"]
    assert "loc:mug_1" in b.entries


def test_status_is_private_and_views_count_access():
    b = Bank()
    b.apply([call("memory_update_status", status="SECRET PLAN"),
             call("memory_save_knowledge", id="k:1", content="the fridge is closed")], step=0)
    seen_by_actor = b.render_for_actor()
    assert "SECRET" not in seen_by_actor and "the fridge is closed" in seen_by_actor
    view, shown = b.view()
    assert view.status == "SECRET PLAN" and [e.id for e in shown] == ["k:1"]
    assert b.entries["k:1"].access_count == 2  # once for the actor's render, once for the memory agent's view


def test_prefilter_shows_the_bm25_top_50_past_50_entries():
    b = Bank()
    b.apply([call("memory_save_knowledge", id=f"loc:cup_{i}", content=f"cup {i} is in/on cabinet {i}")
             for i in range(PREFILTER_AT + 10)], step=0)
    b.apply([call("memory_save_knowledge", id="loc:apple_1", content="apple 1 is in/on fridge 1")], step=1)
    assert len(b.visible("where is the apple")) == PREFILTER_AT
    assert "loc:apple_1" in {e.id for e in b.visible("where is the apple")}
    small = Bank()
    small.apply([call("memory_save_knowledge", id="k:1", content="x")], step=0)
    assert [e.id for e in small.visible("anything")] == ["k:1"]


def test_triggers():
    assert [Trigger(1).fires(t) for t in range(3)] == ["interval"] * 3
    assert [bool(Trigger(3).fires(t)) for t in range(7)] == [True, False, False, True, False, False, True]
    assert Trigger(3, ("failed",)).fires(1, failed=True) == "failed"
    assert Trigger(3, ("failed",)).fires(1, repeated=True) is None
    assert Trigger(5, ("new-location", "repeated")).fires(2, new_location=True) == "new-location"
    with pytest.raises(ValueError, match="at least 1"):
        Trigger(0)
    with pytest.raises(ValueError, match="trigger event 'bored'"):
        Trigger(1, ("bored",))
