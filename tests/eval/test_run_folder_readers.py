"""Run-folder files are read strictly and every error names the file, the line and the field (issue 43's
findings: `--resume` trusted any line with a task_id; merge-runs and proactive-sft printed raw pydantic errors or
tracebacks and copied out-of-range values)."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.eval.config import RunConfig
from workbench.eval.run_folder import check_resume, load_run, read_config, write_run_config
from workbench.files import FormatError
from workbench.memory.trajectory import Step, Trajectory


def _episode(i: int, steps: int = 2) -> Trajectory:
    return Trajectory(task_id=f"valid_unseen/task-{i}", goal="put a mug in the sink", success=bool(i % 2),
                      steps=tuple(Step(observation=f"obs {k}", action="look") for k in range(steps)))


@pytest.fixture
def run_folder(tmp_path):
    cfg = RunConfig(out=str(tmp_path / "run"), memory="none", tasks="0:2", teacher_forcing=False)
    write_run_config(cfg)
    (tmp_path / "run" / "trajectories.jsonl").write_text("".join(_episode(i).model_dump_json() + "\n" for i in range(2)))
    return cfg


@pytest.mark.parametrize(("line", "says"), [
    ('{"task_id": "valid_unseen/task-9", "goal": "g", "steps": "garbage"}', "line 3: field 'steps'"),
    ("[1, 2]", "line 3: a JSON list, where a Trajectory object belongs"),
    ("42", "line 3: a JSON int"),
    ('"text"', "line 3: a JSON str"),
    ('{"goal": "g"}', "line 3: field 'task_id': Field required"),
    ('{"task_id": "valid_unseen/task-9", "goal": "g", "success": "yes"}', "line 3: field 'success'"),
])
def test_resume_checks_every_episode_line_before_playing(run_folder, line, says):
    path = f"{run_folder.out}/trajectories.jsonl"
    with open(path, "a") as fh:
        fh.write(line + "\n" + _episode(5).model_dump_json() + "\n")
    with pytest.raises(FormatError) as info:
        check_resume(run_folder, resume=True)
    assert str(info.value).startswith(f"{path}: {says}")


def test_a_torn_last_episode_is_the_one_thing_resume_tolerates(run_folder):
    path = f"{run_folder.out}/trajectories.jsonl"
    with open(path, "a") as fh:
        fh.write(_episode(7).model_dump_json()[:40])
    assert check_resume(run_folder, resume=True) == {"valid_unseen/task-0", "valid_unseen/task-1"}


def test_the_same_task_twice_is_an_error(run_folder):
    path = f"{run_folder.out}/trajectories.jsonl"
    with open(path, "a") as fh:
        fh.write(_episode(0).model_dump_json() + "\n")
    with pytest.raises(FormatError, match="line 3: field 'task_id': task 'valid_unseen/task-0' again"):
        check_resume(run_folder, resume=True)


@pytest.mark.parametrize(("edit", "says"), [
    (lambda d: "", "empty"),
    (lambda d: "[1]", "holds a JSON list"),
    (lambda d: json.dumps({**d, "run": {**d["run"], "max_steps": -5}}), "field 'run.max_steps'"),
    (lambda d: json.dumps({**d, "run": {**d["run"], "max_steps": "50"}}), "field 'run.max_steps'"),
    (lambda d: json.dumps({**d, "run": {**d["run"], "max_steps": 1e30}}), "field 'run.max_steps'"),
    (lambda d: json.dumps({**d, "run": {**d["run"], "max_steps": 50.0}}), "field 'run.max_steps'"),
    (lambda d: json.dumps({**d, "run": {**d["run"], "seed": float("nan")}}), "NaN"),
    (lambda d: json.dumps({**d, "run": {**d["run"], "dtype": "float16"}}), "field 'run.dtype'"),
    (lambda d: json.dumps({**d, "run": {**d["run"], "task_types": "pick"}}), "field 'run.task_types'"),
    (lambda d: json.dumps({**d, "run": {**d["run"], "typo": 1}}), "field 'run.typo': Extra inputs"),
    (lambda d: json.dumps({k: v for k, v in d.items() if k != "run"}), "field 'run': Field required"),
])
def test_config_json_is_read_strictly_by_every_command(run_folder, tmp_path, capsys, edit, says):
    path = tmp_path / "run" / "config.json"
    path.write_text(edit(json.loads(path.read_text())))
    with pytest.raises(FormatError, match=says):
        read_config(run_folder.out)
    for argv in (["merge-runs", run_folder.out, "--tasks", "0:2", "--out", str(tmp_path / "merged")],
                 ["proactive-sft", run_folder.out, "--out", str(tmp_path / "sft")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{path}: " in err and "Traceback" not in err and "validation error for" not in err
    assert not (tmp_path / "merged").exists()  # nothing half-written


def test_a_directory_where_a_file_belongs(run_folder, tmp_path, capsys):
    rows = tmp_path / "run" / "trajectories.jsonl"
    rows.unlink()
    rows.mkdir()
    with pytest.raises(FormatError, match="is a directory"):
        load_run(run_folder.out)
    assert main(["proactive-sft", run_folder.out, "--out", str(tmp_path / "sft")]) == 2
    assert "trajectories.jsonl: is a directory" in capsys.readouterr().err


def test_proactive_sft_names_an_episode_whose_records_do_not_fit(run_folder, tmp_path, capsys):
    """Finding: an episode without steps but with proactive records raised IndexError."""
    ep = _episode(3, steps=0).model_copy(update={"meta": {"steps": [{"proactive": {"trigger": "start"}}]}})
    with open(f"{run_folder.out}/trajectories.jsonl", "a") as fh:
        fh.write(ep.model_dump_json() + "\n")
    assert main(["proactive-sft", run_folder.out, "--out", str(tmp_path / "sft")]) == 2
    err = capsys.readouterr().err
    assert "trajectories.jsonl: line 3 (task valid_unseen/task-3): field 'meta.steps': 1 step records" in err


def test_a_bug_is_one_line_without_debug_and_a_traceback_with_it(monkeypatch, capsys, tmp_path):
    import workbench.cli.memory as memory_cli

    def boom(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(memory_cli, "_check", boom)
    assert main(["memory", "check", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError: a bug" in err and "--debug" in err and "Traceback" not in err
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "memory", "check", str(tmp_path)])


def test_an_error_raised_while_a_stop_unwinds_is_the_stop_not_a_bug(monkeypatch, capsys, tmp_path):
    """Finding (2026-12-07): SIGTERM while ScienceWorld's JVM was starting made py4j's half-built connection raise
    AttributeError on the way out, which was reported as an internal error (a bug) instead of the stop it was."""
    import workbench.cli.memory as memory_cli

    def stopped_while_starting(*a, **k):
        try:
            raise KeyboardInterrupt("SIGTERM")
        finally:
            raise AttributeError("'GatewayConnection' object has no attribute 'shutdown_socket'")

    monkeypatch.setattr(memory_cli, "_check", stopped_while_starting)
    with pytest.raises(KeyboardInterrupt):
        main(["memory", "check", str(tmp_path)])
    err = capsys.readouterr().err
    assert "stopped (SIGTERM)" in err and "shutdown_socket" in err and "internal error" not in err

    def ctrl_c_then_os_error(*a, **k):  # a plain Ctrl-C (no message), and an error a user could fix on the way out
        try:
            raise KeyboardInterrupt
        finally:
            raise OSError("socket closed")

    monkeypatch.setattr(memory_cli, "_check", ctrl_c_then_os_error)
    with pytest.raises(KeyboardInterrupt):
        main(["memory", "check", str(tmp_path)])
    err = capsys.readouterr().err
    assert "stopped (interrupt); while stopping: OSError: socket closed" in err and "error:" not in err
