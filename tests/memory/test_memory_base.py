"""MemoryBase: persistence, commits, history, rollback, crash safety, and errors that name file/record/field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memory_builders import make_entry, make_traj

import workbench.memory.base as base_module
from workbench.memory import (
    ENTRIES_FILE,
    HISTORY_FILE,
    MemoryBase,
    MemoryEntry,
    Segment,
    StaleEntryError,
    TrajectoryFormatError,
)


def _edit(entry: MemoryEntry, action: str) -> MemoryEntry:
    """A refiner-like change: replace the first segment's action."""
    segs = (entry.segments[0].model_copy(update={"action": action}),) + entry.segments[1:]
    return entry.model_copy(update={"segments": segs})


@pytest.fixture
def store(tmp_path: Path) -> MemoryBase:
    mb = MemoryBase(tmp_path / "mb")
    mb.add_many([make_entry("a", "put a mug in desk.", "pick"), make_entry("b", "put a hot egg in fridge.", "heat")])
    return mb


def test_add_get_and_reopen(store: MemoryBase) -> None:
    assert len(store) == 2 and "a" in store and "zz" not in store
    assert [e.entry_id for e in store.entries()] == ["a", "b"]
    assert [e.entry_id for e in store.entries(task_type="heat")] == ["b"]
    again = MemoryBase(store.root)
    assert again.entries() == store.entries()
    assert [r.reason for r in again.history("a")] == ["add"]
    with pytest.raises(KeyError, match="no entry 'zz'"):
        store.get("zz")
    with pytest.raises(ValueError, match="already exists; use commit"):
        store.add(make_entry("a", "x", "pick"))


def test_commit_bumps_version_and_keeps_history(store: MemoryBase) -> None:
    rev = store.revision
    v1 = store.commit(_edit(store.get("a"), "go to desk 1"), reason="refine: shorter path")
    v2 = store.commit(_edit(v1, "go to desk 2"), reason="refine again")
    assert (v1.version, v2.version, store.get("a").version) == (1, 2, 2)
    assert store.revision == rev + 2
    hist = MemoryBase(store.root).history("a")
    assert [(r.version, r.reason) for r in hist] == [(0, "add"), (1, "refine: shorter path"), (2, "refine again")]
    assert [r.entry.segments[0].action for r in hist] == ["go to place 0", "go to desk 1", "go to desk 2"]
    assert store.history("b")[-1].entry == store.get("b")  # untouched entries keep one version


def test_stale_and_unknown_commits_are_refused(store: MemoryBase) -> None:
    old = store.get("a")
    store.commit(_edit(old, "go to desk 1"), reason="first")
    with pytest.raises(StaleEntryError, match="based on version 0 but the store holds version 1"):
        store.commit(_edit(old, "go to desk 9"), reason="lost update")
    with pytest.raises(KeyError, match="add\\(\\) creates one"):
        store.commit(make_entry("new", "g", "pick"), reason="x")


def test_rollback_restores_content_as_a_new_version(store: MemoryBase) -> None:
    original = store.get("a")
    store.commit(_edit(original, "go to desk 1"), reason="r1")
    store.commit(_edit(store.get("a"), "go to desk 2"), reason="r2")
    back = store.rollback("a", 0)
    assert back.version == 3 and back.segments == original.segments
    assert store.at_version("a", 1).segments[0].action == "go to desk 1"
    assert [r.reason for r in store.history("a")][-1] == "rollback to version 0"
    assert store.rollback("a", 3) == back  # already current: nothing written
    assert len(store.history("a")) == 4
    with pytest.raises(KeyError, match=r"no version 7 \(versions: \[0, 1, 2, 3\]\)"):
        store.rollback("a", 7)
    assert MemoryBase(store.root).get("a") == back


def test_crash_between_history_and_entries_leaves_previous_state(store: MemoryBase, monkeypatch) -> None:
    before = (store.root / ENTRIES_FILE).read_bytes()
    real = base_module.atomic_write_text

    def crash_on_entries(path, text):
        if Path(path).name == ENTRIES_FILE:
            raise OSError("simulated crash before entries.jsonl was replaced")
        real(path, text)

    monkeypatch.setattr(base_module, "atomic_write_text", crash_on_entries)
    with pytest.raises(OSError, match="simulated crash"):
        store.commit(_edit(store.get("a"), "go to desk 1"), reason="never lands")
    assert store.get("a").version == 0 and len(store.history("a")) == 1  # in-memory state untouched
    monkeypatch.setattr(base_module, "atomic_write_text", real)

    assert (store.root / ENTRIES_FILE).read_bytes() == before
    assert "never lands" in (store.root / HISTORY_FILE).read_text()  # the orphan reached the history file...
    reopened = MemoryBase(store.root)
    assert reopened.get("a").version == 0
    assert [r.reason for r in reopened.history("a")] == ["add"]  # ...and is ignored
    v1 = reopened.commit(_edit(reopened.get("a"), "go to desk 3"), reason="lands")
    assert v1.version == 1
    lines = (store.root / HISTORY_FILE).read_text().splitlines()
    assert "never lands" not in "".join(lines)  # dropped at the next write
    assert sorted((r["entry_id"], r["version"]) for r in map(json.loads, lines)) == [("a", 0), ("a", 1), ("b", 0)]


def test_crash_inside_the_atomic_write_keeps_the_old_file(store: MemoryBase, monkeypatch) -> None:
    import workbench.memory.trajectory as traj_module

    before = (store.root / ENTRIES_FILE).read_bytes()

    def no_rename(src, dst):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(traj_module.os, "replace", no_rename)
    with pytest.raises(OSError):
        store.commit(_edit(store.get("b"), "go to fridge 1"), reason="x")
    monkeypatch.undo()
    assert (store.root / ENTRIES_FILE).read_bytes() == before
    assert not list(store.root.glob(".*.tmp"))  # the temp file was cleaned up
    assert MemoryBase(store.root).get("b").version == 0


def test_torn_history_tail_is_skipped_and_repaired(store: MemoryBase) -> None:
    with (store.root / HISTORY_FILE).open("a") as fh:
        fh.write('{"entry_id": "a", "version": 1, "ent')  # killed mid-append
    reopened = MemoryBase(store.root)
    assert len(reopened.history("a")) == 1
    reopened.commit(_edit(reopened.get("a"), "go to desk 1"), reason="after crash")
    assert [json.loads(line)["reason"] for line in (store.root / HISTORY_FILE).read_text().splitlines()] == [
        "add", "add", "after crash"]


def test_build_from_trajectories_keeps_successes(tmp_path: Path) -> None:
    ok = make_traj()
    failed = make_traj(task_id="train/pick_and_place_simple-Mug-None-Desk-1/trial_T1", success=False)
    mb = MemoryBase(tmp_path / "mb")
    (entry,) = mb.build_from_trajectories([ok, failed])
    assert entry.entry_id == ok.task_id and entry.segments == MemoryEntry.from_trajectory(ok).segments
    with pytest.raises(ValueError, match="duplicates='skip'"):
        mb.build_from_trajectories([ok])
    assert mb.build_from_trajectories([ok], duplicates="skip") == []
    added = mb.build_from_trajectories([ok, ok], duplicates="suffix")
    assert [e.entry_id for e in added] == [f"{ok.task_id}#2", f"{ok.task_id}#3"]


@pytest.mark.parametrize(
    ("filename", "lines", "expected"),
    [
        (ENTRIES_FILE, ['{"entry_id": "a", "task_id": "t", "goal": "g"}', '{"entry_id": "b", "task_id": "t"}'],
         "entries.jsonl: line 2: field 'goal': Field required"),
        (ENTRIES_FILE,
         ['{"entry_id": "a", "task_id": "t", "goal": "g"}', '{"entry_id": "a", "task_id": "t", "goal": "h"}'],
         "entries.jsonl: line 2: field 'entry_id': duplicate id 'a'"),
        (ENTRIES_FILE, ['{"entry_id": "a", "task_id": "t", "goal": "g", "segmnts": []}'],
         "entries.jsonl: line 1: field 'segmnts': Extra inputs"),
        (HISTORY_FILE, ['{"entry_id": "a", "version": 0, "entry": {"entry_id": "a", "task_id": "t", "goal": "g", '
                        '"version": 3}}'],
         "history.jsonl: line 1: field 'entry': Value error, holds ('a', version 3)"),
        (HISTORY_FILE, ["{oops", '{"entry_id": "a"}'], "history.jsonl: line 1: not valid JSON"),
        (HISTORY_FILE, ['{"entry_id": "a", "version": "one", "entry": {}}'],
         "history.jsonl: line 1: field 'version'"),
    ],
)
def test_malformed_store_names_file_record_field(
    tmp_path: Path, filename: str, lines: list[str], expected: str
) -> None:
    root = tmp_path / "mb"
    root.mkdir()
    if filename == HISTORY_FILE:
        (root / ENTRIES_FILE).write_text(MemoryEntry(entry_id="a", task_id="t", goal="g").model_dump_json() + "\n")
    (root / filename).write_text("\n".join(lines) + "\n")
    with pytest.raises(TrajectoryFormatError) as info:
        MemoryBase(root)
    assert expected in str(info.value)
    assert str(root / filename) in str(info.value)


def test_segments_round_trip_through_disk(tmp_path: Path) -> None:
    mb = MemoryBase(tmp_path / "mb")
    entry = MemoryEntry(entry_id="x", task_id="t", goal="g", initial_observation="room",
                        segments=(Segment(thought="hm", action="look"), Segment(observation="o", action="go to x 1")))
    mb.add(entry)
    assert MemoryBase(mb.root).get("x") == entry
