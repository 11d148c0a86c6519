"""Merging runs of disjoint task slices gives the run of their union; mismatches are refused."""

import json

import pytest

from workbench.cli import main
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.merge import merge_runs
from workbench.memory.trajectory import Step, Trajectory, append_jsonl, iter_jsonl_dicts
from workbench.provenance import versions


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
    assert "nope: no such run folder" in capsys.readouterr().err


def _tf_part(folder, tasks, memory="traj", model="m"):
    """A teacher_forced.json as teacher_forced_for writes it: task i has i % 4 + 1 steps, the first one right."""
    cfg = RunConfig(out="", split="valid_unseen", tasks=tasks)
    per_task, per_step = {}, []
    for i, task in enumerate(select_tasks(cfg)):
        n = i % 4 + 1
        per_task[task.task_id] = [1, n]
        per_step += [{"task_id": task.task_id, "step": k, "expert": "a", "chosen": "a" if k == 0 else "b",
                      "p_expert": 0.5 if k == 0 else 0.25, "memory_entry": None} for k in range(n)]
    folder.mkdir(parents=True, exist_ok=True)
    result = {"accuracy": len(per_task) / len(per_step), "n_steps": len(per_step), "n_tasks": len(per_task),
              "mean_p_expert": sum(r["p_expert"] for r in per_step) / len(per_step)}
    (folder / "teacher_forced.json").write_text(json.dumps({
        "key": {"model": model, "memory": memory, "split": "valid_unseen", "tasks": tasks},
        "result": result, "per_task": per_task, "per_step": per_step}))
    return folder


def test_teacher_forcing_of_halves_merges_into_that_of_all(tmp_path):
    from workbench.eval.merge import merge_teacher_forced

    whole = json.loads((_tf_part(tmp_path / "all", "0:10") / "teacher_forced.json").read_text())
    # the halves score the same tasks (different local indices, so rebuild them from the whole's records)
    for name, sl in (("even", slice(0, 10, 2)), ("odd", slice(1, 10, 2))):
        ids = list(whole["per_task"])[sl]
        steps = [r for r in whole["per_step"] if r["task_id"] in ids]
        (tmp_path / name).mkdir()
        n = sum(whole["per_task"][t][1] for t in ids)
        result = {"accuracy": sum(whole["per_task"][t][0] for t in ids) / n, "n_steps": n, "n_tasks": len(ids),
                  "mean_p_expert": sum(r["p_expert"] for r in steps) / n}
        (tmp_path / name / "teacher_forced.json").write_text(json.dumps({
            "key": {**whole["key"], "tasks": f"{sl.start}:10:2"}, "result": result,
            "per_task": {t: whole["per_task"][t] for t in ids}, "per_step": steps}))
    res = merge_teacher_forced([tmp_path / "odd", tmp_path / "even"], tmp_path / "merged", tasks="0:10")
    merged = json.loads((tmp_path / "merged" / "teacher_forced.json").read_text())
    assert res == pytest.approx(whole["result"])
    assert merged["per_step"] == whole["per_step"] and merged["key"] == whole["key"]
    # merge-runs on folders holding only teacher forcing merges that
    assert main(["merge-runs", str(tmp_path / "even"), str(tmp_path / "odd"), "--tasks", "0:10",
                 "--out", str(tmp_path / "cli")]) == 0
    assert json.loads((tmp_path / "cli" / "teacher_forced.json").read_text())["result"] == merged["result"]


def test_teacher_forcing_merge_refuses_mismatches(tmp_path):
    from workbench.eval.merge import merge_teacher_forced

    even = _tf_part(tmp_path / "even", "0:10:2")
    other = _tf_part(tmp_path / "odd", "1:10:2", memory="none")
    with pytest.raises(ValueError, match="differs from the first part"):
        merge_teacher_forced([even, other], tmp_path / "out", tasks="0:10")
    with pytest.raises(ValueError, match="5 of 10 tasks"):
        merge_teacher_forced([even], tmp_path / "out", tasks="0:10")
    assert not (tmp_path / "out").exists()


def test_run_merge_carries_teacher_forcing_along(tmp_path):
    even, odd = _part(tmp_path / "even", "0:10:2"), _part(tmp_path / "odd", "1:10:2")
    _tf_part(even, "0:10:2", model="smollm2-135m-instruct")
    _tf_part(odd, "1:10:2", model="smollm2-135m-instruct")
    m = merge_runs([even, odd], tmp_path / "all", tasks="0:10")
    tf = json.loads((tmp_path / "all" / "teacher_forced.json").read_text())
    assert tf["key"]["tasks"] == "0:10" and m["teacher_forced"]["n_tasks"] == 10
    assert m["teacher_forced"]["n_steps"] == len(tf["per_step"]) == 22  # per half: 1+2+3+4+1 steps


def test_run_merge_leaves_teacher_forcing_alone_unless_every_part_has_it(tmp_path):
    even, odd = _part(tmp_path / "even", "0:10:2"), _part(tmp_path / "odd", "1:10:2")
    _tf_part(even, "0:10:2")
    whole = _tf_part(tmp_path / "all", "0:10")  # e.g. computed on all tasks in one go
    before = (whole / "teacher_forced.json").read_text()
    m = merge_runs([even, odd], whole, tasks="0:10")
    assert "teacher_forced" not in m and (whole / "teacher_forced.json").read_text() == before


def test_parts_played_compiled_merge_as_compiled_and_never_with_eager_ones(tmp_path, monkeypatch):
    """A compiled step's scores are not eager's (workbench.models.compiled): the merged run says how its episodes were
    played, whatever the merging process's forward, and parts of the two are refused."""
    monkeypatch.setenv("WORKBENCH_FORWARD", "auto")
    even, odd = _part(tmp_path / "even", "0:10:2"), _part(tmp_path / "odd", "1:10:2")
    for part in (even, odd):
        record = json.loads((part / "config.json").read_text())
        record["versions"]["forward"] = "compiled"
        (part / "config.json").write_text(json.dumps(record))
    merge_runs([even, odd], tmp_path / "all", tasks="0:10")
    assert json.loads((tmp_path / "all" / "config.json").read_text())["versions"]["forward"] == "compiled"
    eager = _part(tmp_path / "eager", "1:10:2")
    with pytest.raises(ValueError, match="different forwards"):
        merge_runs([even, eager], tmp_path / "mixed", tasks="0:10")
    assert not (tmp_path / "mixed").exists()
