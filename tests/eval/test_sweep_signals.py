"""A sweep started in the background by a script (SIGINT ignored, as a non-interactive shell starts background
jobs) stops cleanly on `kill -INT` and on `kill -TERM`: its Ray workers are gone, and its record says it was
interrupted (a real `workbench sweep` process over two Ray workers)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

pytestmark = pytest.mark.game  # a background sweep plays real ALFWorld games in its own process


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_background_sweep_stops_cleanly(tiny_model_dir, tmp_path, sig):
    out = tmp_path / "o"
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"out: {out}\ndefaults: {{model: {tiny_model_dir}, split: valid_unseen, tasks: '0:30', "
                    "max_steps: 50, teacher_forcing: false}\nconfigurations:\n  - {name: a, memory: none}\n")
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "sweep", str(grid), "--workers", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 240
        while not (out / "a" / "trajectories.jsonl").exists():  # the workers play
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the sweep never played an episode"
            time.sleep(1)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children  # the Ray instance and its workers
        proc.send_signal(sig)
        proc.wait(timeout=120)
        _, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, [p.cmdline()[:2] for p in alive]
        record = json.loads((out / "sweep.json").read_text())["invocations"][-1]
        # ray.init's own SIGTERM handler (sys.exit) does not replace the CLI's: the record says interrupted
        assert record["finished"] and record["error"].startswith("KeyboardInterrupt"), record["error"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
