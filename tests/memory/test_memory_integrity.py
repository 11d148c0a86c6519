"""A memory base's entries and history must agree; `workbench memory check` lists what does not and `--repair`
adds what is missing (it never removes a record). The findings of issue 43, each now a named error."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.memory.base import (
    ENTRIES_FILE,
    HISTORY_FILE,
    MemoryBase,
    MemoryBaseIntegrityError,
    read_store,
    repair_store,
)
from workbench.memory.trajectory import MemoryEntry, Segment, TrajectoryFormatError


@pytest.fixture
def base(tmp_path):
    mb = MemoryBase(tmp_path / "base")
    mb.add_many([MemoryEntry(entry_id=f"e{i}", task_id=f"t{i}", goal=f"goal {i}", segments=(Segment(action="look"),))
                 for i in range(3)])
    mb.commit(mb.get("e1").model_copy(update={"goal": "goal 1, edited"}), "edit")
    mb.commit(mb.get("e1").model_copy(update={"goal": "goal 1, edited twice"}), "edit")
    return mb.root


def _lines(path):
    return path.read_text().splitlines()


def test_an_entry_cut_from_entries_is_an_error_and_repair_restores_it(base, capsys):
    """Finding: `sed -i 1d entries.jsonl; workbench memory log BASE` exited 0 and a later write dropped e0's
    history for good."""
    history = (base / HISTORY_FILE).read_text()
    lines = _lines(base / ENTRIES_FILE)  # line 1 is the store header; line 2 is e0
    (base / ENTRIES_FILE).write_text("\n".join(lines[:1] + lines[2:]) + "\n")
    assert main(["memory", "log", str(base)]) == 2
    err = capsys.readouterr().err
    assert "history.jsonl line 1: entry 'e0': a record (version 0) of an entry entries.jsonl lacks" in err
    assert main(["memory", "rollback", str(base), "e1", "--to", "0"]) == 2  # refused: nothing rewritten
    assert (base / HISTORY_FILE).read_text() == history
    assert main(["memory", "check", str(base)]) == 2
    assert main(["memory", "check", str(base), "--repair"]) == 0
    assert "restored entry 'e0'" in capsys.readouterr().out
    mb = MemoryBase(base)
    assert [e.entry_id for e in mb] == ["e0", "e1", "e2"]  # back in its place
    assert (base / HISTORY_FILE).read_text() == history  # nothing removed, nothing needed adding


@pytest.mark.parametrize("damage", ["nul", "half"])
def test_a_damaged_history_is_never_read_as_a_shorter_one(base, damage):
    """Finding: a history of 100 NUL bytes, or cut in half, loaded as an empty or short history, after which
    `memory diff` said versions 0 and 2 were the same."""
    data = (base / HISTORY_FILE).read_bytes()
    (base / HISTORY_FILE).write_bytes(b"\0" * 100 if damage == "nul" else data[: len(data) // 2])
    with pytest.raises((TrajectoryFormatError, MemoryBaseIntegrityError)) as info:
        MemoryBase(base)
    assert str(base) in str(info.value)
    assert main(["memory", "diff", str(base), "e1", "--from", "0", "--to", "2"]) == 2


@pytest.mark.parametrize(("edit", "says"), [
    (lambda h: h[:1] + [h[0]] + h[1:], "version 0 again (an identical copy of line 1)"),
    (lambda h: h[:1] + [h[0].replace('"goal 0"', '"other"')] + h[1:], "version 0 again (a different record of line 1)"),
    (lambda h: [h[0], h[1], h[2], h[4], h[3]], "version 1 after version 2"),
    (lambda h: h[:2] + [h[0].replace('"e0"', '"ghost"')] + h[2:], "a record (version 0) of an entry entries.jsonl lacks"),
    (lambda h: h[:4], "holds 4 records, but entries.jsonl was written after 5"),
])
def test_integrity_problems_are_named(base, edit, says):
    h = _lines(base / HISTORY_FILE)
    (base / HISTORY_FILE).write_text("\n".join(edit(h)) + "\n")
    problems = read_store(base).problems
    assert any(says in str(p) for p in problems), problems
    with pytest.raises(MemoryBaseIntegrityError, match="memory check"):
        MemoryBase(base)


@pytest.mark.parametrize(("bad", "field"), [
    ('"version":-1', "version"), ('"version":1e30', "version"), ('"success":"yes"', "success"),
    ('"entry_id":""', "entry_id"), ('"version":1.0', "version")])
def test_out_of_range_and_mistyped_values_are_refused(base, bad, field):
    h = _lines(base / HISTORY_FILE)
    key = bad.split(":")[0]
    rec = json.loads(h[0])
    rec["entry"][key.strip('"')] = json.loads(bad.split(":", 1)[1])
    (base / ENTRIES_FILE).write_text(json.dumps(rec["entry"]) + "\n" + "\n".join(_lines(base / ENTRIES_FILE)[1:]) + "\n")
    with pytest.raises(TrajectoryFormatError, match=f"entries.jsonl: line 1: field '{field}'"):
        MemoryBase(base)


def test_a_missing_build_record_is_added_by_repair_and_nothing_else_changes(base):
    """A base written before entries.jsonl had its header (or by hand): every history record counts, and an entry
    without its build record gets one from --repair."""
    (base / ENTRIES_FILE).write_text("\n".join(_lines(base / ENTRIES_FILE)[1:]) + "\n")  # no header
    h = _lines(base / HISTORY_FILE)
    (base / HISTORY_FILE).write_text("\n".join(x for x in h if '"entry_id":"e2"' not in x) + "\n")
    assert [p.entry_id for p in read_store(base).problems] == ["e2"]
    before = (base / HISTORY_FILE).read_text()
    assert repair_store(base) == ["added history.jsonl record of 'e2' version 0"]
    after = (base / HISTORY_FILE).read_text()
    assert after.startswith(before) and MemoryBase(base).history("e2")[0].reason.startswith("build record restored")
    assert repair_store(base) == []


def test_repair_refuses_what_adding_cannot_fix_and_writes_nothing(base):
    h = _lines(base / HISTORY_FILE)
    (base / HISTORY_FILE).write_text("\n".join(h[:1] + [h[0]] + h[1:]) + "\n")
    before = (base / HISTORY_FILE).read_text()
    with pytest.raises(MemoryBaseIntegrityError, match="remove line 2"):
        repair_store(base)
    assert (base / HISTORY_FILE).read_text() == before


def test_a_write_killed_between_history_and_entries_is_dropped_not_an_error(base):
    """The commit protocol: history first, then entries by rename. A kill in between leaves one whole write's
    records ahead of entries.jsonl at the end of the history: ignored (logged) and dropped at the next write."""
    entries = (base / ENTRIES_FILE).read_text()
    mb = MemoryBase(base)
    mb.commit(mb.get("e0").model_copy(update={"goal": "never landed"}), "edit")
    (base / ENTRIES_FILE).write_text(entries)  # as if the rename never happened
    st = read_store(base)
    assert len(st.pending) == 1 and not st.problems
    mb = MemoryBase(base)
    assert mb.get("e0").goal == "goal 0"
    mb.commit(mb.get("e2").model_copy(update={"goal": "landed"}), "edit")
    assert "never landed" not in (base / HISTORY_FILE).read_text() and not read_store(base).problems
    assert "never landed" in (base / "history.aborted.jsonl").read_text()  # set aside, never lost


def test_a_hand_deleted_last_entry_of_a_batch_is_no_unfinished_write(base):
    """entries.jsonl's header counts the records its write committed: removing an entry by hand is a problem,
    whichever it is, never an unfinished write to drop (the header, not timestamps, says which records are pending)."""
    lines = _lines(base / ENTRIES_FILE)
    (base / ENTRIES_FILE).write_text("\n".join(lines[:3]) + "\n")  # header, e0, e1: e2 removed
    st = read_store(base)
    assert not st.pending and [p.entry_id for p in st.problems] == ["e2"]


def test_an_emptied_entries_file_is_no_unfinished_write(base, tmp_path):
    """`: > entries.jsonl` on a base built in one write: every entry is reported (and --repair restores them from
    the history); the next write cannot drop the history (the review's counterexample to a timestamp rule)."""
    (base / ENTRIES_FILE).write_text("")
    st = read_store(base)
    assert not st.pending and {p.entry_id for p in st.problems} == {"e0", "e1", "e2"}
    with pytest.raises(MemoryBaseIntegrityError):
        MemoryBase(base)
    repair_store(base)
    mb = MemoryBase(base)
    assert [e.entry_id for e in mb] == ["e0", "e1", "e2"] and mb.get("e1").goal == "goal 1, edited twice"


def test_a_clone_is_whole_or_absent(base, tmp_path, monkeypatch):
    import workbench.memory.base as mbase

    src = MemoryBase(base)
    real = mbase.os.replace
    monkeypatch.setattr(mbase.os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt("killed")))
    with pytest.raises(KeyboardInterrupt):
        src.clone(tmp_path / "copy")
    assert not (tmp_path / "copy").exists() and not list(tmp_path.glob(".copy.clone-*"))
    monkeypatch.setattr(mbase.os, "replace", real)
    copy = src.clone(tmp_path / "copy")
    assert [e for e in copy] == [e for e in src] and len(copy._history) == len(src._history)


def test_a_killed_atomic_write_leaves_a_temp_file_that_check_notes_and_the_next_write_removes(base, capsys):
    stale = base / ".entries.jsonl.abc123.tmp"
    stale.write_text('{"half": ')
    assert main(["memory", "check", str(base)]) == 0
    assert "note: .entries.jsonl.abc123.tmp" in capsys.readouterr().out
    mb = MemoryBase(base)
    mb.commit(mb.get("e0").model_copy(update={"goal": "x"}), "edit")
    assert not stale.exists()
