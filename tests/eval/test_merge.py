"""Merging runs of disjoint task slices gives the run of their union; mismatches are refused."""

import json

import pytest

from workbench.cli import main
from workbench.eval.merge import merge_runs
from workbench.eval.runner import RunConfig, select_tasks, versions
from workbench.memory.trajectory import Step, Trajectory, append_jsonl, iter_jsonl_dicts


def _part(folder, tasks, memory="traj", success=lambda i: i % 3 == 0):
    cfg = RunConfig(out=str(folder), split="valid_unseen", tasks=tasks, memory=memory, teacher_forcing=False)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"run": cfg.identity(), "versions": versions()}))
    for i, task in enumerate(select_tasks(cfg)):
        n = 5 if success(i) else 50
        append_jsonl(folder / "trajectories.jsonl", Trajectory(
            task_id=task.task_id, task_type=task.task_type, goal="g", success=success(i),
            steps=tuple(Step(observation="o", action="look") for _ in range(n)),
            meta={"steps": [{"memory_tokens": 7, "prompt_tokens": 70}] * n}))
    return folder


def test_even_and_odd_halves_merge_into_the_run_of_all(tmp_path):
    even, odd = _part(tmp_path / "even", "0:10:2"), _part(tmp_path / "odd", "1:10:2")
    m = merge_runs([odd, even], tmp_path / "all", tasks="0:10")
    ids = [d["task_id"] for d in iter_jsonl_dicts(tmp_path / "all" / "trajectories.jsonl")]
    cfg = RunConfig(out="", split="valid_unseen", tasks="0:10", memory="traj", teacher_forcing=False)
    assert ids == [t.task_id for t in select_tasks(cfg)]  # task order, whatever the order of the parts
    assert json.loads((tmp_path / "all" / "config.json").read_text())["run"] == cfg.identity()
    # even: successes at its local indices 0, 3 (tasks 0, 6); odd: 0, 3 (tasks 1, 7) -> 4 of 10
    assert m["n_episodes"] == 10 and m["success_rate"] == 0.4 and m["memory_tokens"] == 7


def test_mismatches_are_refused_and_nothing_is_written(tmp_path):
    even = _part(tmp_path / "even", "0:10:2")
    other = _part(tmp_path / "none", "1:10:2", memory="none")
    with pytest.raises(ValueError, match=r"differs .* in \['memory'\]"):
        merge_runs([even, other], tmp_path / "out", tasks="0:10")
    with pytest.raises(ValueError, match="5 of 10 tasks"):
        merge_runs([even], tmp_path / "out", tasks="0:10")
    with pytest.raises(ValueError, match="outside --tasks"):
        merge_runs([even], tmp_path / "out", tasks="0:4")
    assert not (tmp_path / "out").exists()
    assert merge_runs([even], tmp_path / "out", tasks="0:10", allow_partial=True)["n_episodes"] == 5


def test_cli_merge_runs_reports_a_missing_folder(tmp_path, capsys):
    assert main(["merge-runs", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "no config.json" in capsys.readouterr().err
