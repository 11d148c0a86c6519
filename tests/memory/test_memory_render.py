"""Canonical rendering: exact text, pieces that concatenate to it, and the right kind/segment on every piece."""

from __future__ import annotations

import pytest
from memory_builders import CLEAN_APPLE_STEPS, ROOM, make_entry, make_traj

from workbench.memory import (
    MemoryEntry,
    Segment,
    render_memory,
    render_pieces,
    segment_char_spans,
)


def test_exact_text_of_a_short_trajectory() -> None:
    traj = make_traj(n_steps=3)
    assert render_memory(traj) == (
        f"{ROOM}\n"
        "Your task is to: put a clean apple in fridge.\n"
        "> think: I need a clean apple; apples are usually on the countertop.\nOK.\n"
        "> go to countertop 1\n"
        "On the countertop 1, you see a apple 1, and a knife 2.\n"
        "> think: There is the apple.\nOK.\n"
        "> take apple 1 from countertop 1\n"
        "You pick up the apple 1 from the countertop 1.\n"
        "> go to sinkbasin 1\n"
        "On the sinkbasin 1, you see nothing.\n"  # the final observation, from meta
    )


@pytest.mark.parametrize("thoughts", [True, False])
@pytest.mark.parametrize(
    "item",
    [make_traj(), make_traj(n_steps=2, final=False), make_traj(n_steps=0), make_traj(initial_observation="", n_steps=1),
     make_entry("e", "put a mug in desk.", "pick", n_segments=4),
     MemoryEntry(entry_id="x", task_id="t", goal="g", segments=(Segment(observation="seen first", action="a"),))],
)
def test_pieces_concatenate_to_the_rendering(item, thoughts: bool) -> None:
    pieces = render_pieces(item, thoughts=thoughts)
    assert "".join(p.text for p in pieces) == render_memory(item, thoughts=thoughts)
    assert all(p.text.endswith("\n") for p in pieces)
    assert all(p.kind in {"header", "observation", "thought", "action"} for p in pieces)
    assert thoughts or not any(p.kind == "thought" for p in pieces)


def test_kinds_and_segments() -> None:
    pieces = render_pieces(make_traj(n_steps=3))
    assert [(p.kind, p.segment) for p in pieces] == [
        ("observation", None), ("header", None),
        ("thought", 0), ("action", 0),
        ("observation", 1), ("thought", 1), ("action", 1),
        ("observation", 2), ("action", 2),  # step 2 has no thought
        ("observation", 2),  # the final observation closes the last segment
    ]
    entry = MemoryEntry.from_trajectory(make_traj(n_steps=3))
    # an observation piece of segment k shows segment k's own observation (the one before action k)
    for p in pieces:
        if p.kind == "observation" and p.segment is not None and p is not pieces[-1]:
            assert p.text == entry.segments[p.segment].observation + "\n"
    assert pieces[-1].text == CLEAN_APPLE_STEPS[2][2] + "\n"


def test_observation_after_each_action_is_the_next_one() -> None:
    traj = make_traj()
    text = render_memory(traj, thoughts=False)
    for k, (_, action, obs_after) in enumerate(CLEAN_APPLE_STEPS):
        assert f"> {action}\n{obs_after}\n" in text, k


def test_segment_spans_cover_their_pieces_contiguously() -> None:
    traj = make_traj(n_steps=4)
    pieces = render_pieces(traj)
    text = "".join(p.text for p in pieces)
    spans = segment_char_spans(pieces)
    assert sorted(spans) == [0, 1, 2, 3]
    assert text[: spans[0][0]] == f"{ROOM}\nYour task is to: put a clean apple in fridge.\n"
    for k in range(3):
        assert spans[k][1] == spans[k + 1][0]  # segments tile the text after the header
        seg = text[spans[k][0]: spans[k][1]]
        assert seg.endswith(f"> {CLEAN_APPLE_STEPS[k][1]}\n")
    assert spans[3][1] == len(text)
    assert text[spans[1][0]:].startswith(CLEAN_APPLE_STEPS[0][2])


def test_trajectory_and_its_entry_render_alike() -> None:
    traj = make_traj()
    entry = MemoryEntry.from_trajectory(traj)
    final = traj.meta["final_observation"]
    assert render_memory(traj) == render_memory(entry) + final + "\n"
    assert render_memory(entry, final_observation=final) == render_memory(traj)
    assert render_memory(traj, final_observation="Other.").endswith("> put apple 1 in/on fridge 1\nOther.\n")


def test_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="MemoryEntry or Trajectory"):
        render_pieces("a string")  # type: ignore[arg-type]
