"""benchmarks/agent_eval.py --table / --card: thin callers of workbench.reporting (tested in tests/reporting)."""

import json
import shutil
import sys
from pathlib import Path

import pytest

ADAPTER = Path(__file__).resolve().parents[2] / "workbench" / "assets" / "adapters" / "smollm2-135m-alfworld"


@pytest.fixture(scope="module")
def agent_eval(load_benchmark):
    return load_benchmark("agent_eval")


def make_folder(root, model, cond, wins):
    """A run folder of episodes only (task i won iff wins[i]); tests/reporting/test_tables.py builds fuller ones."""
    folder = root / model / cond
    folder.mkdir(parents=True)
    (folder / "trajectories.jsonl").write_text("".join(
        json.dumps({"task_id": f"t{i}", "goal": "g", "success": w}) + "\n" for i, w in enumerate(wins)))
    (folder / "metrics.json").write_text(json.dumps({"n_episodes": len(wins), "success_rate": sum(wins) / len(wins),
                                                     "avg_steps": 30.0, "memory_tokens": 5, "by_task_type": {}}))


def test_table_flags_reach_the_library_and_its_errors_stop_the_script(agent_eval, tmp_path, monkeypatch, capsys):
    make_folder(tmp_path / "runs", "m", "none", [False, True])
    notes = tmp_path / "notes.md"
    notes.write_text("Runs: played in halves, merged with `workbench merge-runs`.\n")
    (tmp_path / "index.md").write_text("")
    out = tmp_path / "tables" / "t.md"
    argv = ["agent_eval.py", "--table", str(out), "--runs", str(tmp_path / "runs"), "--table-models", "m",
            "--table-conditions", "none", "--table-title", "T", "--table-notes", str(notes), "--table-keep-absent"]
    for _ in range(2):  # written twice: the notes file's text is there each time, once
        monkeypatch.setattr(sys, "argv", argv)
        agent_eval.main()
        md = out.read_text()
        assert md.count("Runs: played in halves") == 1 and md.startswith("# T\n\ndtype: float32\n\n")
        assert f"Measured with: `python {' '.join(argv)}`" in md
    assert capsys.readouterr().out.startswith("# T\n")  # the page is printed
    assert json.loads(out.with_suffix(".json").read_text())["rows"][0]["success_rate"] == 0.5
    assert "tables/t.md" in (tmp_path / "index.md").read_text()  # the reports' index lists the table
    monkeypatch.setattr(sys, "argv", [*argv[:4], str(tmp_path / "nothing"), *argv[5:-1]])
    with pytest.raises(SystemExit, match="--table: no run folders"):
        agent_eval.main()
    make_folder(tmp_path / "runs", "m2", "none", [True, True])
    monkeypatch.setattr(sys, "argv", [*argv[:6], "m", "m2", *argv[7:], "--table-model-pairs", "m2:m"])
    agent_eval.main()
    assert json.loads(out.with_suffix(".json").read_text())["paired_models"][0]["only_a"] == 1
    monkeypatch.setattr(sys, "argv", [*argv, "--table-model-pairs", "m2"])
    with pytest.raises(SystemExit, match="--table-model-pairs m2: expected MODEL_A:MODEL_B"):
        agent_eval.main()
    make_folder(tmp_path / "runs", "m", "traj", [True, True])
    monkeypatch.setattr(sys, "argv", [*argv[:8], "none", "traj", *argv[9:], "--table-pairs", "traj:none"])
    agent_eval.main()
    assert [(r["a"], r["b"], r["only_a"]) for r in json.loads(out.with_suffix(".json").read_text())["paired"]] == [
        ("traj", "none", 1)]
    monkeypatch.setattr(sys, "argv", [*argv, "--table-pairs", "traj"])
    with pytest.raises(SystemExit, match="--table-pairs traj: expected CONDITION_A:CONDITION_B"):
        agent_eval.main()
    monkeypatch.setattr(sys, "argv", [*argv, "--table-tf-bands", "3-1"])
    with pytest.raises(SystemExit, match="--table: step band '3-1'"):
        agent_eval.main()
    out.with_suffix(".json").write_text("{not json")
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match="t.json is not a table"):
        agent_eval.main()


def test_card_flags_reach_the_library(agent_eval, tmp_path, monkeypatch):
    adapter = tmp_path / "adapter"
    shutil.copytree(ADAPTER, adapter)
    make_folder(tmp_path / "runs", "smollm2-135m-alfworld", "traj", [True, False])
    argv = ["agent_eval.py", "--card", str(adapter), "--card-section", f"valid_unseen, 2 tasks={tmp_path / 'runs'}"]
    monkeypatch.setattr(sys, "argv", argv)
    agent_eval.main()
    card = (adapter / "MODEL_CARD.md").read_text()
    assert "### valid_unseen, 2 tasks" in card and "| smollm2-135m-alfworld | traj | 2 | 50.0% |" in card
    assert f"Written by `python {' '.join(argv)}`." in card
    monkeypatch.setattr(sys, "argv", [*argv[:3], "--card-section", f"x={tmp_path / 'nothing'}"])
    with pytest.raises(SystemExit, match="--card: .*no run folders"):
        agent_eval.main()
