"""Where a sweep stands (read from its folders), and a second sweep refused while a live one plays the same
configuration folders -- a live sweep is a real process, identified by host, pid and start time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from workbench.cli import main
from workbench.eval.config import select_tasks
from workbench.eval.sweep import load_grid, run_sweep
from workbench.eval.sweep_status import (
    ConcurrentSweepError,
    refuse_concurrent,
    sweep_status,
)

GRID = """
out: {out}
defaults: {{model: smollm2-135m-alfworld, split: valid_unseen, tasks: "0:4", max_steps: 3, teacher_forcing: false}}
configurations:
  - {{name: a, memory: none}}
  - {{name: b, memory: traj}}
"""


@pytest.fixture
def grid(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(GRID.format(out=tmp_path / "o"))
    return load_grid(path)


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def episode(task_id: str, success: bool) -> str:
    return json.dumps({"task_id": task_id, "goal": "g", "success": success})


def invocation(pid: int, names: list[str], **kw) -> dict:
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 100)), "finished": None,
            "configurations": names, "host": socket.gethostname(), "pid": pid,
            "pid_started": psutil.Process(pid).create_time()} | kw


def test_status_counts_each_planned_task_once(grid):
    ids = [t.task_id for t in select_tasks(grid.configs[0])]
    other = select_tasks(grid.configs[0], "10:11")[0].task_id  # played by another slice: not this grid's
    a = Path(grid.configs[0].out)
    a.mkdir(parents=True)
    (a / "trajectories.jsonl").write_text("\n".join([episode(ids[0], True), episode(ids[1], False),
                                                     episode(ids[1], False), episode(other, True)])
                                          + '\n{"task_id": "valid_un')  # the torn tail of a kill mid-append
    rows = {r.name: r for r in sweep_status(grid)}
    assert (rows["a"].planned, rows["a"].played, rows["a"].solved, rows["a"].left) == (4, 2, 1, 2)
    assert (rows["b"].played, rows["b"].complete, rows["a"].running) == (0, False, None)


def test_a_live_sweep_is_refused_and_shown_with_its_eta(grid, sleeper):
    out = Path(grid.out)
    ids = [t.task_id for t in select_tasks(grid.configs[0])]
    (out / "a").mkdir(parents=True)
    (out / "a" / "trajectories.jsonl").write_text(episode(ids[0], True) + "\n" + episode(ids[1], True) + "\n")
    record = {"grid": "grid.yaml", "invocations": [invocation(sleeper.pid, ["a"], played_at_start={"a": 1})]}
    (out / "sweep.json").write_text(json.dumps(record))
    before = (out / "sweep.json").read_text()

    with pytest.raises(ConcurrentSweepError, match=rf"pid {sleeper.pid} .* is playing a in"):
        run_sweep(grid)
    assert (out / "sweep.json").read_text() == before  # refused before anything was written
    refuse_concurrent(out, ["b"])  # another configuration of the same folder may play beside it

    assert main(["sweep", grid.path]) == 2  # the CLI: a one-line error, no traceback
    assert (out / "sweep.json").read_text() == before

    rows = {r.name: r for r in sweep_status(grid)}
    assert rows["a"].running == sleeper.pid and rows["b"].running is None
    assert rows["a"].eta_s == pytest.approx(2 * 100, rel=0.2)  # 1 episode in ~100 s, 2 left

    sleeper.kill()
    sleeper.wait()
    refuse_concurrent(out, ["a"])  # a killed sweep never wrote `finished`; its process is gone: not live
    assert sweep_status(grid)[0].running is None


@pytest.mark.game
def test_a_run_or_a_notebook_does_not_play_folders_a_live_sweep_plays(grid, sleeper, tmp_path, capsys):
    """`workbench run --resume` and a notebook's drive / adopt_runs into a folder a background sweep is playing
    stop before writing: they would append the same tasks a second time."""
    from workbench.eval.adoption import adopt_runs
    from workbench.eval.driver import drive

    out = Path(grid.out)
    out.mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({"grid": "grid.yaml", "invocations": [invocation(sleeper.pid, ["a"])]}))
    a, b = grid.configs
    with pytest.raises(ConcurrentSweepError, match="a second player of the same folders"):
        drive([a], resume=True, progress=False)
    with pytest.raises(ConcurrentSweepError):
        adopt_runs([b, a], tmp_path / "elsewhere")
    assert main(["run", "--tasks", "0:1", "--max-steps", "3", "--out", a.out, "--resume", "--no-teacher-forcing"]) == 2
    assert f"the sweep of pid {sleeper.pid}" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["sweep.json"]  # nothing written
    drive([b], resume=True, progress=False)  # another configuration of the folder plays beside the sweep
    assert (Path(b.out) / "metrics.json").exists()


def test_the_eta_counts_played_episodes_not_adopted_ones(grid, sleeper):
    """Same-memory adoptions are copies made in a moment: 1 played + 2 adopted in ~100 s is 1 episode per 100 s."""
    out = Path(grid.out)
    ids = [t.task_id for t in select_tasks(grid.configs[0])]
    for name, done in (("a", ids[:1]), ("b", ids[:2])):
        (out / name).mkdir(parents=True)
        (out / name / "trajectories.jsonl").write_text("".join(episode(t, False) + "\n" for t in done))
    (out / "sweep.json").write_text(json.dumps({"grid": "grid.yaml", "invocations": [invocation(
        sleeper.pid, ["a", "b"], played_at_start={"a": 0, "b": 0}, adopted_same_memory={"b": 2})]}))
    rows = {r.name: r for r in sweep_status(grid)}
    assert rows["a"].eta_s == pytest.approx(5 * 100, rel=0.2)  # 3 + 2 left at one episode per ~100 s


def test_a_reused_pid_or_a_finished_invocation_is_not_live(grid, sleeper):
    out = Path(grid.out)
    out.mkdir(parents=True)

    def recorded(*invocations):
        (out / "sweep.json").write_text(json.dumps({"invocations": list(invocations)}))

    recorded(invocation(sleeper.pid, ["a"]))  # the control: the same process, unfinished, is live and refuses
    with pytest.raises(ConcurrentSweepError):
        refuse_concurrent(out, ["a"])
    for stale in (invocation(sleeper.pid, ["a"], pid_started=psutil.Process(sleeper.pid).create_time() - 3600),
                  invocation(sleeper.pid, ["a"], finished="2026-12-04T00:00:00"),
                  {"started": "2026-12-01T00:00:00", "finished": None, "configurations": ["a"]}):  # no pid recorded
        recorded(stale)
        refuse_concurrent(out, ["a"])  # raises ConcurrentSweepError if this one were taken for live


def test_the_cli_prints_the_table(grid, capsys):
    assert main(["sweep", grid.path, "--status"]) == 0
    text = capsys.readouterr().out
    assert "configuration" in text and "0 of 8 episodes played, 8 left; no sweep playing now" in text
    assert os.path.exists(grid.path) and not Path(grid.out).exists()  # read only


def test_tasks_waiting_for_a_same_memory_reference_are_counted_apart(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(GRID.format(out=tmp_path / "o") + "adopt_same_memory: {b: a}\n")
    grid = load_grid(path)
    ids = [t.task_id for t in select_tasks(grid.configs[0])]
    for name, played in (("a", ids[:2]), ("b", ids[2:3])):
        (tmp_path / "o" / name).mkdir(parents=True)
        (tmp_path / "o" / name / "trajectories.jsonl").write_text("".join(episode(t, False) + "\n" for t in played))
    rows = {r.name: r for r in sweep_status(grid)}
    assert (rows["a"].waiting, rows["b"].waiting, rows["b"].left) == (0, 1, 3)  # b: 1 played, 2 adoptable, 1 waits
    from workbench.eval.sweep_status import format_status

    assert "1 of those wait for a same-memory reference" in format_status(list(rows.values()))


def test_a_malformed_sweep_record_is_named_not_skipped(grid, sleeper):
    """A record that cannot be read could hide a live sweep: it is an error naming the file, the invocation and
    the field, where it used to be skipped."""
    from workbench.files import FormatError

    out = Path(grid.out)
    out.mkdir(parents=True)
    live = invocation(sleeper.pid, ["a"])
    for record, message in (
            ({"invocations": [live, live | {"pid": str(sleeper.pid)}]}, "invocation 1: field 'pid'"),
            ({"invocations": [live | {"pid_started": "now"}]}, "invocation 0: field 'pid_started'"),
            ({"invocations": [live | {"started": "2026-13-45T99:00:00"}]}, "invocation 0: field 'started'"),
            ({"invocations": [live | {"configurations": "a"}]}, "invocation 0: field 'configurations'"),
            ({"invocations": [live | {"pids": 3}]}, "invocation 0: field 'pids': Extra inputs"),
            ({"invocations": [live | {"finished": 5}]}, "invocation 0: field 'finished'"),
            ({"invocations": live}, "field 'invocations'"),
            ({"invocation": [live]}, "field 'invocation': Extra inputs"),
            ([live], "holds a JSON list")):
        (out / "sweep.json").write_text(json.dumps(record))
        for call in (lambda: refuse_concurrent(out, ["a"]), lambda: sweep_status(grid)):
            with pytest.raises(FormatError) as err:
                call()
            assert str(out / "sweep.json") in str(err.value) and message in str(err.value), str(err.value)
    (out / "sweep.json").write_text(json.dumps({"invocations": [live]})[:-5])  # cut short
    with pytest.raises(FormatError, match=r"sweep\.json: not valid JSON"):
        refuse_concurrent(out, ["a"])
    (out / "sweep.json").unlink()
    (out / "sweep.json").mkdir()
    with pytest.raises(FormatError, match=r"sweep\.json: is a directory"):
        refuse_concurrent(out, ["a"])
    (out / "sweep.json").rmdir()
    (out / "sweeping-notes.json").write_text("not a record")  # not a sweep record's name: not read
    refuse_concurrent(out, ["a"])


def test_an_episode_line_that_is_not_a_record_is_named(grid):
    from workbench.files import FormatError

    ids = [t.task_id for t in select_tasks(grid.configs[0])]
    a = Path(grid.configs[0].out)
    a.mkdir(parents=True)
    good = episode(ids[0], True)
    for text, message in ((good + "\n{torn in the middle\n" + good + "\n", "line 2"),
                          (good + "\n" + json.dumps({"goal": "g", "success": True}) + "\n",
                           "line 2: field 'task_id': Field required"),
                          (good + "\n" + json.dumps({"task_id": ids[1], "success": "yes"}) + "\n",
                           "line 2: field 'success'"),
                          (good + "\n" + json.dumps({"task_id": "", "success": True}) + "\n",
                           "line 2: field 'task_id'"),
                          (good + "\n[1, 2]\n", "line 2: a JSON list"),
                          (good + "\n" + good[:-1] + ', "success": false}\n', "line 2: key 'success' appears twice"),
                          (good + "\n\x00\x00\x00", "line 2")):  # not a torn record: refused, even last
        (a / "trajectories.jsonl").write_text(text)
        with pytest.raises(FormatError) as err:
            sweep_status(grid)
        assert str(a / "trajectories.jsonl") in str(err.value) and message in str(err.value), str(err.value)
    (a / "trajectories.jsonl").write_text(good + "\n" + good[:20])  # a torn last line: skipped
    assert {r.name: r.played for r in sweep_status(grid)}["a"] == 1
