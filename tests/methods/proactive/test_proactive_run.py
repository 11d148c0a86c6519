"""`workbench run --memory proactive* [--interval K] [--trigger EVENT]` end to end on real ALFWorld games with a
tiny random model loaded by path: records, reminders in the action prompt of their own step only (a step without
one has no reminder span), teacher forcing."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.memory.trajectory import iter_jsonl_dicts


@pytest.mark.parametrize("memory,extra", [("proactive", ["--interval", "2", "--trigger", "failed"]),
                                          ("proactive-passive", [])])
def test_cli_run(tiny_model_dir, tmp_path, memory, extra):
    out = tmp_path / memory
    assert main(["run", "--model", str(tiny_model_dir), "--split", "valid_unseen", "--tasks", "0:134:67",
                 "--max-steps", "5", "--teacher-forcing-tasks", "0:1", "--memory", memory, *extra,
                 "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())["run"]
    assert cfg["memory"] == memory and cfg["interval"] == (2 if extra else 1)
    shown = 0
    for t in iter_jsonl_dicts(out / "trajectories.jsonl"):
        steps = t["meta"]["steps"]
        shown += sum(bool(s["proactive"]["reminder"]) for s in steps)
        for k, s in enumerate(steps):
            rec = s["proactive"]
            if memory == "proactive":
                assert (rec["trigger"] is not None) == (k % 2 == 0 or rec["trigger"] == "failed")
            if rec["reminder"]:
                assert s["reminder"] == rec["reminder"] and s["reminder_tokens"] > 0
                eff = s["reminder_effect"]  # the same state re-scored without the reminder
                assert eff["p_action"] == pytest.approx(s["p_action"], abs=1e-4)
                assert eff["changed"] == (eff["action_without"] != t["steps"][k]["action"])
            else:
                assert "reminder" not in s and "reminder_effect" not in s
    if memory == "proactive-passive":
        assert shown > 0  # the bank is in the prompt from the first sighting on
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["interventions"]["interventions_per_episode"] == shown / 2
    assert json.loads((out / "teacher_forced.json").read_text())["result"]["n_steps"] > 0
