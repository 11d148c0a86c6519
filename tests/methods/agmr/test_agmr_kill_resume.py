"""`workbench refine` killed with SIGKILL mid-run, then run again: every task is refined once, execution ids stay
unique, and the base reads as before or after each commit (real ALFWorld games, a tiny random model by path)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from workbench.memory.base import MemoryBase
from workbench.methods.agmr.refine_folder import load_executions, load_log, refine_stats

pytestmark = pytest.mark.integration


def test_a_killed_refinement_resumes_without_losing_or_repeating_work(tiny_model_dir, tmp_path):
    out = tmp_path / "base"
    argv = [sys.executable, "-m", "workbench.cli", "refine", "--model", str(tiny_model_dir), "--heads", "0.0", "1.2",
            "--tasks", "0:140:35", "--max-steps", "3", "--retriever", "bm25", "--base-out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    log = out / "refine" / "log.jsonl"
    deadline = time.time() + 600
    while not (log.exists() and log.read_text().count("\n") >= 1):
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.time() < deadline, "no task finished in 10 minutes"
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-run: the next task is being played
    proc.wait()
    done_before = len(load_log(out))
    assert 1 <= done_before < 4
    rc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert rc.returncode == 0, rc.stderr[-3000:]
    records = load_log(out)
    assert len(records) == 4 and len({r.task_id for r in records}) == 4
    ids = [e.id for e in load_executions(out)]
    assert len(ids) == len(set(ids)) and {i.split("#")[0] for i in ids} == {r.task_id for r in records}
    base = MemoryBase(out)
    assert len(base) == 200  # none lost
    for r in records:  # each record's executions are on disk, and commits are versions of their entries
        assert set(r.executions) <= set(ids)
        if r.outcome == "committed":
            assert base.at_version(r.entry_id, r.committed_version).version == r.committed_version
    stats = refine_stats(out)
    assert stats["tasks"] == 4 and stats["entries_before"] == stats["entries_after"] == 200
    assert json.loads(rc.stdout.strip().splitlines()[-1])["tasks"] == 4
