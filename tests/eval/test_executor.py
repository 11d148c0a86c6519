"""The executor behind the runner: a serial run and N Ray workers (a local instance, or a `ray start --head` cluster)
write the same run folder; a worker killed mid-episode has its episode replayed; a killed driver resumes.

The model is a tiny random Llama saved as a local HF folder, loaded by path in every worker (the real loader);
the games are the real ALFWorld files.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.eval.config import RunConfig
from workbench.eval.driver import drive
from workbench.eval.executor import RayExecutor
from workbench.eval.run import run
from workbench.memory.trajectory import iter_jsonl_dicts

pytestmark = pytest.mark.game  # its runs play real ALFWorld games in Ray worker processes


WB = [sys.executable, "-m", "workbench.cli"]
TASKS = "0:134:45"  # 3 tasks spread over the sorted list (an ALFWorld reset costs ~5 s)
FILES = ("trajectories.jsonl", "teacher_forced.json")


def _cfg(out: Path, model: Path, memory: str = "traj", **kw) -> RunConfig:
    return RunConfig(out=str(out), model=str(model), split="valid_unseen", tasks=TASKS, memory=memory, max_steps=8,
                     **kw)


def _folder(out: Path) -> dict:
    """What must be identical between executors: the files byte for byte, metrics but for wall time."""
    got = {name: (out / name).read_bytes() for name in FILES if (out / name).exists()}
    metrics = json.loads((out / "metrics.json").read_text())
    metrics.pop("wall_s_this_invocation")
    got["metrics.json"] = metrics
    got["run"] = json.loads((out / "config.json").read_text())["run"]
    return got


@pytest.fixture(scope="module")
def serial(tiny_model_dir, tmp_path_factory) -> dict:
    """The serial reference: the same 3 tasks with Traj memory (episodes and teacher forcing), in this process."""
    import torch

    out = tmp_path_factory.mktemp("serial") / "traj"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker plays: bitwise identity is promised at one thread per process
    try:
        run(_cfg(out, tiny_model_dir), progress=False)
    finally:
        torch.set_num_threads(threads)
    return _folder(out)


def test_serial_folder_is_complete(serial):
    rows = [json.loads(ln) for ln in serial["trajectories.jsonl"].decode().splitlines()]
    assert len(rows) == 3 and len({r["task_id"] for r in rows}) == 3
    tf = json.loads(serial["teacher_forced.json"])
    assert tf["key"]["dtype"] == "float32" and tf["result"]["n_tasks"] == 3 and tf["result"]["n_steps"] > 12
    assert serial["metrics.json"]["n_episodes"] == 3 and serial["run"]["dtype"] == "float32"


def test_a_worker_killed_mid_episode_is_replayed(serial, tiny_model_dir, tmp_path):
    out = tmp_path / "traj"
    executor = RayExecutor(workers=2)
    killed = []

    def kill_one(job, result):
        busy = executor.worker_pids(busy=True)  # the other worker, in the middle of its episode
        if not killed and busy:
            os.kill(busy[0], signal.SIGKILL)
            killed.append(busy[0])

    try:
        report = drive([_cfg(out, tiny_model_dir)], executor=executor, progress=False, on_result=kill_one)
        assert killed and executor.deaths == 1 and report.replayed == 1
        assert killed[0] not in executor.worker_pids()  # a fresh worker replaced it
    finally:
        executor.close()
    # two worker processes (three with the replacement) played, and wrote what the serial run wrote:
    # nothing lost, nothing written twice
    assert len(report.workers) >= 2 and all(rss > 100 for rss in report.workers.values())
    assert report.jobs == {"episode": 3, "teacher_forcing": 3}
    assert _folder(out) == serial
    assert not (out / "teacher_forced.parts.jsonl").exists()
    ids = [d["task_id"] for d in iter_jsonl_dicts(out / "trajectories.jsonl")]
    assert len(ids) == len(set(ids)) == 3


def _kill_session(sid: int) -> int:
    """kill -9 every process left in session ``sid`` (a killed driver's Ray instance and workers); how many."""
    ps = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True).stdout.split()
    left = [int(p) for p, s in zip(ps[::2], ps[1::2]) if int(s) == sid]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(left)


def test_driver_killed_then_resumed(serial, tiny_model_dir, tmp_path):
    out = tmp_path / "traj"
    cmd = WB + ["run", "--model", str(tiny_model_dir), "--split", "valid_unseen", "--tasks", TASKS, "--memory",
                "traj", "--max-steps", "8", "--workers", "2", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    rows = out / "trajectories.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and (not rows.exists() or rows.read_text().count("\n") < 1):
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)  # the driver alone; its Ray instance and workers are left to notice
    proc.wait()
    n_before = len(list(iter_jsonl_dicts(rows)))
    assert 1 <= n_before < 3, "the kill should land mid-run"
    assert not (out / "metrics.json").exists()
    try:
        assert subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=300).returncode == 0
    finally:
        _kill_session(proc.pid)  # whatever the killed driver's Ray instance left
    got = _folder(out)
    assert got == serial
    assert n_before < len(list(iter_jsonl_dicts(rows))) == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_existing_ray_cluster(serial, tiny_model_dir, tmp_path):
    import secrets

    port = _free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    # token authentication, as a real cluster would run: the cluster and the command share the token
    env = os.environ | {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                        "RAY_USAGE_STATS_ENABLED": "0"}
    head = subprocess.Popen([str(ray_bin), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                             "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false",
                             "--disable-usage-stats"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=env)
    out = tmp_path / "traj"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        rc = subprocess.run(WB + ["run", "--model", str(tiny_model_dir), "--split", "valid_unseen", "--tasks", TASKS,
                                  "--memory", "traj", "--max-steps", "8", "--ray-address", f"127.0.0.1:{port}",
                                  "--workers", "2", "--out", str(out)], capture_output=True, text=True, timeout=300,
                            env=env)
        assert rc.returncode == 0, rc.stderr[-2000:]
        assert head.poll() is None  # the cluster outlives the command that used it
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the cluster it started
        try:
            head.wait(timeout=60)
        finally:
            _kill_session(head.pid)  # nothing of the cluster outlives the test
            head.wait()
    assert _folder(out) == serial


@pytest.mark.game
def test_resume_refuses_another_dtype_and_old_folders_are_float32(tiny_model_dir, tmp_path):
    out = tmp_path / "none"
    cfg = RunConfig(out=str(out), model=str(tiny_model_dir), tasks="0:1", memory="none", max_steps=2,
                    teacher_forcing=False)
    run(cfg, progress=False)
    with pytest.raises(ValueError, match="dtype"):
        run(RunConfig(**{**cfg.__dict__, "dtype": "bfloat16"}), resume=True, progress=False)
    # a folder written before runs recorded their dtype resumes as the float32 run it was
    config = json.loads((out / "config.json").read_text())
    config["run"].pop("dtype")
    (out / "config.json").write_text(json.dumps(config))
    assert run(cfg, resume=True, progress=False)["n_episodes"] == 1
    with pytest.raises(ValueError, match="dtype 'fp8'"):
        RunConfig(out=str(out), dtype="fp8")
