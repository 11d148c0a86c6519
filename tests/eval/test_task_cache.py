"""A notebook analysis keeps each task's result as it finishes: reopened with the same key it returns them,
another key is another file, a torn last line (a kill mid-write) is dropped, folder None keeps nothing."""

import json

import pytest

from workbench.eval.task_cache import TaskCache


def test_results_survive_a_reopen_and_a_torn_tail(tmp_path):
    cache = TaskCache(tmp_path, "a", {"model": "m", "tasks": [1, 2]})
    assert cache.get("t1") is None
    cache.put("t1", {"rows": [{"u": 1.5}]})
    cache.put("t2", [1, 2])
    with cache.path.open("a") as fh:
        fh.write('{"task_id": "t3", "payl')  # a kill mid-write
    again = TaskCache(tmp_path, "a", {"tasks": [1, 2], "model": "m"})  # key order does not matter
    assert again.path == cache.path and again.get("t1") == {"rows": [{"u": 1.5}]} and again.get("t3") is None
    again.put("t3", 3)
    assert TaskCache(tmp_path, "a", {"model": "m", "tasks": [1, 2]}).done == {"t1": {"rows": [{"u": 1.5}]},
                                                                           "t2": [1, 2], "t3": 3}
    assert json.loads(cache.path.with_name(cache.path.stem + ".key.json").read_text())["model"] == "m"


def test_other_parameters_are_another_file_and_none_keeps_nothing(tmp_path):
    TaskCache(tmp_path, "a", {"model": "m"}).put("t1", 1)
    other = TaskCache(tmp_path, "a", {"model": "m2"})
    assert other.get("t1") is None and len(list(tmp_path.glob("a-*.jsonl"))) == 1
    other.put("t1", 2)
    assert len(list(tmp_path.glob("a-*.jsonl"))) == 2 and TaskCache(tmp_path, "a", {"model": "m"}).get("t1") == 1
    off = TaskCache(None, "a", {"model": "m"})
    off.put("t1", 1)
    assert off.get("t1") == 1 and off.path is None


def test_a_damaged_file_is_a_clear_error(tmp_path):
    cache = TaskCache(tmp_path, "a", {"model": "m"})
    cache.put("t1", 1)
    cache.path.write_text('{"task_id": "t1", "pay\n{"task_id": "t2", "payload": 2}\n')
    with pytest.raises(ValueError, match="line 1: not valid JSON.*delete the file"):
        TaskCache(tmp_path, "a", {"model": "m"})
