"""`workbench run --memory arbiter|flat-recency|flat-retrieval --budget B [--ablation ...]` end to end on real
ALFWorld games with a tiny random model loaded by path: the run folder, its per-step records, teacher forcing
in the same layout, resume checks, and the Ray workers writing the same folder as a serial run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.eval.config import RunConfig
from workbench.eval.run import run
from workbench.memory.trajectory import iter_jsonl_dicts

TASKS = "0:134:67"  # 2 tasks


def _args(model: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--model", str(model), "--split", "valid_unseen", "--tasks", TASKS, "--max-steps", "4",
            "--teacher-forcing-tasks", "0:1", "--out", str(out), *extra]


@pytest.mark.parametrize("memory,extra", [("arbiter", ["--ablation", "no-gate", "--budget", "300"]),
                                          ("flat-retrieval", ["--budget", "120"])])
@pytest.mark.game
def test_cli_run_writes_records_within_budget(tiny_model_dir, tmp_path, capsys, memory, extra):
    out = tmp_path / memory
    assert main(_args(tiny_model_dir, out, "--memory", memory, *extra)) == 0
    budget = int(extra[extra.index("--budget") + 1])
    cfg = json.loads((out / "config.json").read_text())["run"]
    assert (cfg["memory"], cfg["budget"]) == (memory, budget)
    trajs = list(iter_jsonl_dicts(out / "trajectories.jsonl"))
    assert len(trajs) == 2
    policy = "arbiter/no-gate" if memory == "arbiter" else memory
    for t in trajs:
        assert t["meta"]["memory_policy"] == policy
        steps = t["meta"]["steps"]
        assert steps and all(s["wm"]["o200k"] <= budget and s["wm"]["budget"] == budget for s in steps)
        assert all(s["truncated_history"] == 0 for s in steps)
        if memory == "arbiter":
            assert all({"state", "demand", "items", "new_items"} <= set(s["arbiter"]) for s in steps)
    tf = json.loads((out / "teacher_forced.json").read_text())
    assert tf["key"]["memory"] == ("arbiter/no-gate@300" if memory == "arbiter" else "flat-retrieval@120")
    assert tf["result"]["n_steps"] > 0
    with pytest.raises(ValueError, match="different parameters"):
        run(RunConfig(out=str(out), model=str(tiny_model_dir), split="valid_unseen", tasks=TASKS, max_steps=4,
                      teacher_forcing_tasks="0:1", memory=memory, budget=budget + 1), resume=True, progress=False)


def test_cli_refuses_an_option_the_policy_does_not_take(tiny_model_dir, tmp_path, capsys):
    assert main(_args(tiny_model_dir, tmp_path / "x", "--memory", "traj", "--budget", "500")) == 2
    assert "--budget does not apply to --memory traj" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # refused before anything was written


@pytest.mark.game
def test_workers_write_what_a_serial_run_writes(tiny_model_dir, tmp_path):
    import torch

    cfgs = {k: RunConfig(out=str(tmp_path / k), model=str(tiny_model_dir), split="valid_unseen", tasks=TASKS,
                         max_steps=4, memory="arbiter", budget=500, teacher_forcing=False) for k in ("serial", "ray")}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run(cfgs["serial"], progress=False)
    finally:
        torch.set_num_threads(threads)
    run(cfgs["ray"], progress=False, workers=2)
    assert (tmp_path / "serial" / "trajectories.jsonl").read_bytes() == (tmp_path / "ray" / "trajectories.jsonl").read_bytes()
