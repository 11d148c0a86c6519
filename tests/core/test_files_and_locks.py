"""workbench.files (strict JSON, the torn-last-line rule, named errors) and workbench.locks (one writer per folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from workbench.files import (
    MAX_DEPTH,
    FormatError,
    cut_torn_tail,
    is_torn_prefix,
    iter_jsonl,
    loads_strict,
    read_json,
)
from workbench.locks import HOLDER_FILE, FolderBusyError, folder_lock, holder

RECORD = json.dumps({"task_id": "t", "steps": [{"a": 1, "b": "x\\u00e9"}], "ok": True, "p": -1.5e-3, "n": None})


def test_every_prefix_of_a_record_is_torn_and_the_record_itself_is_not():
    for k in range(1, len(RECORD)):
        assert is_torn_prefix(RECORD[:k]), RECORD[:k]
    assert not is_torn_prefix(RECORD)


@pytest.mark.parametrize("line", ["\0" * 100, "[1, 2", "hello", '{"a": 1}}', '{"a": 1}{"b"', '{"a": "\x01',
                                  "   ", '{"a": NaN'])
def test_what_no_append_leaves_is_not_torn(line):
    assert not is_torn_prefix(line)


@pytest.mark.parametrize(("text", "says"), [
    ('{"a": NaN}', "NaN is not a number JSON allows"),
    ('{"a": Infinity}', "Infinity is not a number JSON allows"),
    ('{"a": 1, "a": 2}', "key 'a' appears twice"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested {MAX_DEPTH + 1} levels deep"),
    ("[" * 5000, "nested 5000 levels deep"),
    ('{"a": 1', "not valid JSON"),
])
def test_strict_json_names_the_file_and_the_problem(text, says):
    with pytest.raises(FormatError, match=says) as info:
        loads_strict(text, "some/file.json", "line 3")
    assert str(info.value).startswith("some/file.json: line 3: ")


def test_a_torn_last_line_is_skipped_and_anything_else_is_an_error(tmp_path, caplog):
    f = tmp_path / "a.jsonl"
    f.write_text(RECORD + "\n" + RECORD[:20])
    assert [i for i, _ in iter_jsonl(f, torn_ok=True)] == [1]
    assert "torn last line" in caplog.text
    with pytest.raises(FormatError, match="line 2"):  # a file written whole tolerates nothing
        list(iter_jsonl(f, torn_ok=False))
    f.write_text(RECORD[:20] + "\n" + RECORD + "\n")  # torn, but not last: damage
    with pytest.raises(FormatError, match="line 1: not valid JSON"):
        list(iter_jsonl(f, torn_ok=True))
    f.write_text(RECORD + "\n" + "\0" * 100)  # NULs at the end are no killed append
    with pytest.raises(FormatError, match="line 2"):
        list(iter_jsonl(f, torn_ok=True))


def test_cut_torn_tail_cuts_only_a_torn_record(tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_text(RECORD + "\n" + RECORD[:33])
    cut = cut_torn_tail(f)
    assert cut.line == 2 and f.read_text() == RECORD + "\n"
    f.write_text(RECORD + "\n" + RECORD)  # a whole record without its newline: kept, its line ended
    assert cut_torn_tail(f) is None and f.read_text() == RECORD + "\n" + RECORD + "\n"
    f.write_text(RECORD + "\ngarbage")
    with pytest.raises(FormatError, match="not a record cut short"):
        cut_torn_tail(f)
    assert f.read_text() == RECORD + "\ngarbage"  # nothing cut


def test_files_that_are_not_files(tmp_path):
    (tmp_path / "d.json").mkdir()
    with pytest.raises(FormatError, match="is a directory"):
        read_json(tmp_path / "d.json")
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(FormatError, match="symlink loop"):
        read_json(loop)
    (tmp_path / "latin.json").write_bytes(b'{"a": "caf\xe9"}')
    with pytest.raises(FormatError, match=r"latin.json: line 1: not UTF-8 text \(byte 0xe9"):
        read_json(tmp_path / "latin.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(FormatError, match="empty"):
        read_json(tmp_path / "empty.json")
    with pytest.raises(FileNotFoundError, match="nope.json"):
        read_json(tmp_path / "nope.json")


def _hold(folder, seconds=60):
    code = (f"from workbench.locks import folder_lock\nimport time\nwith folder_lock({str(folder)!r}, 'the holder'):\n"
            f"    print('held', flush=True)\n    time.sleep({seconds})")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(tmp_path, caplog):
    folder = tmp_path / "run"
    proc = _hold(folder)
    try:
        with pytest.raises(FolderBusyError, match=f"in use by PID {proc.pid} \\(the holder"):
            with folder_lock(folder):
                pass
    finally:
        proc.kill()
        proc.wait()
    assert holder(folder)["pid"] == proc.pid  # a SIGKILL leaves its record behind; the OS lock is gone
    with folder_lock(folder, "the next one"):
        assert holder(folder)["command"] == "the next one"
        with folder_lock(folder):  # re-entrant in one process
            pass
    assert f"took over a stale lock of dead PID {proc.pid}" in caplog.text
    assert not (folder / HOLDER_FILE).exists()  # released cleanly


def test_a_lock_on_a_new_folder_that_nothing_wrote_leaves_no_folder(tmp_path):
    with folder_lock(tmp_path / "new"):
        pass
    assert not (tmp_path / "new").exists()
    with folder_lock(tmp_path / "kept"):
        (tmp_path / "kept" / "x").write_text("1")
    assert (tmp_path / "kept" / "x").exists()


def test_two_concurrent_run_resumes_the_second_refuses_naming_the_first(tmp_path):
    """The finding: two `workbench run --resume` on one folder both proceeded. The second now refuses at once,
    before it loads a model, naming the first's PID."""
    folder = tmp_path / "run"
    proc = _hold(folder)
    try:
        t0 = time.time()
        rc = subprocess.run([sys.executable, "-m", "workbench.cli", "run", "--memory", "none", "--tasks", "0:1",
                             "--resume", "--out", str(folder)], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}, timeout=300)
        assert rc.returncode == 2, rc.stderr
        assert f"workbench run: error: {folder.resolve()}: in use by PID {proc.pid} (the holder" in rc.stderr
        assert "Traceback" not in rc.stderr and time.time() - t0 < 120
    finally:
        proc.kill()
        proc.wait()


def test_another_thread_is_refused_and_a_removed_lock_file_does_not_let_a_second_writer_in(tmp_path):
    import threading

    folder = tmp_path / "f"
    seen = []
    with folder_lock(folder):
        t = threading.Thread(target=lambda: seen.append(_try(folder)))
        t.start()
        t.join()
        (folder / ".workbench.lock").unlink()  # removed by hand while held
        proc = subprocess.run([sys.executable, "-c", f"from workbench.locks import folder_lock\n"
                               f"with folder_lock({str(folder)!r}): pass"], capture_output=True, text=True)
    assert seen == ["refused"]
    assert proc.returncode != 0 and f"in use by PID {os.getpid()}" in proc.stderr


def _try(folder):
    try:
        with folder_lock(folder):
            return "held"
    except FolderBusyError:
        return "refused"


def test_a_malformed_holder_file_is_an_unknown_holder(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / HOLDER_FILE).write_text('{"pid": "12ab"}')
    assert holder(folder) is None
    with folder_lock(folder, "me"):
        assert holder(folder)["command"] == "me"


def test_a_torn_line_cut_inside_a_multibyte_character_is_still_torn(tmp_path, caplog):
    rec = json.dumps({"task_id": "t", "goal": "mettre la tasse sur l'étagère — vite"}, ensure_ascii=False)
    data = (RECORD + "\n").encode() + rec.encode()
    cut = data.index("é".encode()) + 1  # inside the two bytes of é
    f = tmp_path / "a.jsonl"
    f.write_bytes(data[:cut])
    assert [i for i, _ in iter_jsonl(f, torn_ok=True)] == [1]
    assert cut_torn_tail(f).line == 2 and f.read_text() == RECORD + "\n"
    f.write_bytes((RECORD + "\n").encode() + b'{"a": "\xff\xfe x')  # invalid bytes that no cut makes: an error
    with pytest.raises(FormatError, match="not UTF-8"):
        list(iter_jsonl(f, torn_ok=True))
    with pytest.raises(FormatError, match="not UTF-8"):
        cut_torn_tail(f)


def test_a_torn_escape_after_an_escaped_backslash():
    whole = json.dumps({"s": "C:\\\x1f"})  # {"s": "C:\\\u001f"}
    assert all(is_torn_prefix(whole[:k]) for k in range(1, len(whole)))
