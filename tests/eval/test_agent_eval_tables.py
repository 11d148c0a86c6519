"""benchmarks/agent_eval.py: the memory-condition table, paired comparisons and the model card from run folders."""

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "workbench" / "assets" / "adapters" / "smollm2-135m-alfworld"


@pytest.fixture(scope="module")
def agent_eval(load_benchmark):
    return load_benchmark("agent_eval")


def _folder(root, model, cond, wins, tf_hits):
    """A run folder with episodes (task i won iff wins[i]) and teacher forcing (step i right iff tf_hits[i])."""
    folder = root / model / cond
    folder.mkdir(parents=True)
    (folder / "trajectories.jsonl").write_text("".join(
        json.dumps({"task_id": f"t{i}", "success": w}) + "\n" for i, w in enumerate(wins)))
    (folder / "metrics.json").write_text(json.dumps({
        "n_episodes": len(wins), "success_rate": sum(wins) / len(wins), "avg_steps": 30.0, "memory_tokens": 5,
        "by_task_type": {"pick": {"success_rate": sum(wins) / len(wins)}},
        "action_patterns": {"oscillation": 0.9, "repeat": 0.0, "distinct_actions": 2.5, "navigation": 0.95,
                            "took_object": sum(wins) / len(wins)}}))
    steps = [{"task_id": "t0", "step": i, "expert": "a", "chosen": "a" if h else "b", "p_expert": 0.5}
             for i, h in enumerate(tf_hits)]
    (folder / "teacher_forced.json").write_text(json.dumps({
        "key": {"model": model, "memory": cond}, "per_step": steps,
        "result": {"accuracy": sum(tf_hits) / len(tf_hits), "n_steps": len(tf_hits), "mean_p_expert": 0.5}}))


def test_table_rows_and_paired_comparisons_come_from_the_folders(agent_eval, tmp_path):
    _folder(tmp_path, "m", "none", [False] * 8 + [True, True], [True, False, False, True])
    _folder(tmp_path, "m", "traj", [True] * 6 + [False, False, False, True], [True, True, True, True])
    rows = agent_eval.folder_table(tmp_path, ["m", "absent"], ["none", "icl", "traj"])
    got = [(r["memory"], r["success_rate"], r["tf_accuracy"]) for r in rows]
    assert got == [("none", 0.2, 0.5), ("traj", 0.7, 1.0)]
    paired = {(r["a"], r["b"], r["kind"]): r for r in agent_eval.paired_table(tmp_path, ["m"], agent_eval.PAIRS)}
    ep = paired[("traj", "none", "episodes")]
    # traj wins t0..t5 alone, none t8 alone, both t9: 6 vs 1 discordant
    assert (ep["n"], ep["only_a"], ep["only_b"], ep["both"]) == (10, 6, 1, 1)
    assert ep["p_mcnemar"] == pytest.approx(2 * (1 + 7) / 2 ** 7)
    assert paired[("traj", "none", "TF steps")]["only_a"] == 2
    assert ("icl", "none", "episodes") not in paired  # no icl folder: nothing to pair
    md = agent_eval.table_markdown(rows, "T", "cmd", list(paired.values()))
    assert "| m | traj | 10 | 70.0% | 30.0 | 5 | 4 | 100.0% | 0.500 |" in md
    assert "| m | traj vs none (episodes) | 10 | 70.0% | 20.0% | +50.0 pts | 6 | 1 | 0.125 |" in md
    assert "| m | traj | 90.0% | 0.0% | 2.5 | 95.0% | 70.0% |" in md  # how the episodes move


def test_card_evaluation_is_written_from_run_folders(agent_eval, tmp_path, monkeypatch):
    adapter = tmp_path / "adapter"
    shutil.copytree(ADAPTER, adapter)
    _folder(tmp_path / "runs", "smollm2-135m-alfworld", "traj", [True, False], [True, False])
    monkeypatch.setattr(sys, "argv", ["agent_eval.py", "--card", str(adapter)])
    agent_eval.write_card(str(adapter), [f"valid_unseen, 2 tasks={tmp_path / 'runs'}"],
                          ["smollm2-135m-alfworld"], ["none", "traj"])
    card = (adapter / "MODEL_CARD.md").read_text()
    assert "### valid_unseen, 2 tasks" in card and "| smollm2-135m-alfworld | traj | 2 | 50.0% |" in card
    assert "## Training" in card  # the rest of the card is rebuilt from training_log.json, not lost
    with pytest.raises(SystemExit, match="no run folders"):
        agent_eval.write_card(str(adapter), [f"x={tmp_path / 'nothing'}"], ["smollm2-135m-alfworld"], ["traj"])


def test_table_keeps_its_notes_file_across_regeneration(agent_eval, tmp_path, monkeypatch, capsys):
    _folder(tmp_path / "runs", "m", "none", [False, True], [True, False])
    notes = tmp_path / "notes.md"
    notes.write_text("Runs: played in halves, merged with `workbench merge-runs`.\n")
    out = tmp_path / "t.md"
    argv = ["agent_eval.py", "--table", str(out), "--runs", str(tmp_path / "runs"), "--table-models", "m",
            "--table-conditions", "none", "--table-title", "T", "--table-notes", str(notes)]
    for _ in range(2):  # written twice: the notes are there each time, once
        monkeypatch.setattr(sys, "argv", argv)
        agent_eval.main()
        md = out.read_text()
        assert md.count("Runs: played in halves") == 1
        assert md.index("Measured with:") < md.index("Runs: played") < md.index("| model | memory |")
    assert json.loads(out.with_suffix(".json").read_text())["rows"][0]["success_rate"] == 0.5
    monkeypatch.setattr(sys, "argv", [*argv[:4], str(tmp_path / "nothing")])
    with pytest.raises(SystemExit, match="no run folders"):
        agent_eval.main()
    capsys.readouterr()


def test_table_keeps_what_the_runs_at_hand_lack(agent_eval, tmp_path, monkeypatch, capsys):
    """Regenerating a two-model table where only part of the runs are present: with --table-keep-absent a model
    with no folders keeps its rows and paired lines from the previous .json, and a row whose teacher forcing is
    not here keeps its TF columns and TF paired lines; all marked as carried over. Without the flag: only the runs."""
    first, second = tmp_path / "runs1", tmp_path / "runs2"
    for cond, wins in (("none", [False, False, True]), ("traj", [True, True, False])):
        _folder(first, "a", cond, wins, [True, False])
        _folder(first, "b", cond, [False] * 3, [False, True])
    _folder(second, "b", "none", [True, False, False], [True, True])
    _folder(second, "b", "traj", [True, True, True], [True, True])
    for cond in ("none", "traj"):  # b's episodes were played again here, its teacher forcing was not
        (second / "b" / cond / "teacher_forced.json").unlink()
    out = tmp_path / "tables" / "t.md"

    def table(runs, *extra):
        monkeypatch.setattr(sys, "argv", ["agent_eval.py", "--table", str(out), "--runs", str(runs), "--table-models",
                                          "a", "b", "--table-conditions", "none", "traj", *extra])
        agent_eval.main()
        capsys.readouterr()
        return json.loads(out.with_suffix(".json").read_text()), out.read_text()

    table(first)
    data, md = table(second, "--table-keep-absent")
    assert [(r["model"], r["memory"], r["success_rate"], r["tf_accuracy"]) for r in data["rows"]] == [
        ("a", "none", 1 / 3, 0.5), ("a", "traj", 2 / 3, 0.5), ("b", "none", 1 / 3, 0.5), ("b", "traj", 1.0, 0.5)]
    src = f"run folders under `{first}`, table written {data['written']}"
    assert data["carried"] == {f"{m}: {part}: {c}": src for m, part in (("a", "episodes"), ("a", "teacher forcing"),
                                                                         ("b", "teacher forcing"))
                               for c in ("none", "traj")}
    assert f"Carried over from the previous version of this table (no run folders for them where this one was " \
           f"written), from {src}: a episodes (none, traj); a teacher forcing (none, traj); b teacher forcing " \
           f"(none, traj)." in md
    kinds = {(r["model"], r["a"], r["b"], r["kind"]): r for r in data["paired"]}
    assert kinds[("b", "traj", "none", "episodes")]["only_a"] == 2  # from the runs here
    assert kinds[("b", "traj", "none", "TF steps")]["n"] == 2  # kept: both conditions' TF carried
    assert "| a | traj vs none (episodes) | 3 | 66.7% | 33.3% | +33.3 pts | 2 | 1 | 1 |" in md
    # carried again: the provenance stays the original one, not the table that carried it
    data2, _ = table(second, "--table-keep-absent")
    assert data2["carried"] == data["carried"] and data2["rows"] == data["rows"]
    data3, md3 = table(second)  # without the flag: only what the runs hold
    assert [(r["model"], r["tf_accuracy"]) for r in data3["rows"]] == [("b", None), ("b", None)]
    assert "Carried over" not in md3 and not data3["carried"]
    # b's traj played nowhere here: its row and outcomes are kept, and traj vs none of the episodes is paired
    # from kept traj and fresh none outcomes (old traj lost all 3, fresh none won t0)
    table(first)
    shutil.rmtree(second / "b" / "traj")
    data4, md4 = table(second, "--table-keep-absent")
    ep = {(r["model"], r["a"], r["b"], r["kind"]): r for r in data4["paired"]}[("b", "traj", "none", "episodes")]
    assert (ep["n"], ep["only_a"], ep["only_b"]) == (3, 0, 1)
    assert "b episodes (traj)" in md4
    # a previous table without outcomes (older tables): its paired lines are kept only where both sides were carried
    legacy = json.loads(out.with_suffix(".json").read_text())
    del legacy["outcomes"]
    out.with_suffix(".json").write_text(json.dumps(legacy))
    data5, _ = table(second, "--table-keep-absent")
    got = {(r["model"], r["a"], r["b"], r["kind"]) for r in data5["paired"]}
    assert ("a", "traj", "none", "episodes") in got and ("b", "traj", "none", "TF steps") in got
    assert ("b", "traj", "none", "episodes") not in got  # fresh none vs carried traj: nothing to pair from
    out.with_suffix(".json").write_text("{not json")
    with pytest.raises(SystemExit, match="t.json is not a table"):
        table(second, "--table-keep-absent")
    assert out.with_suffix(".json").read_text() == "{not json"  # nothing written on failure


def test_outcomes_round_trip_through_the_table_json(agent_eval):
    outcomes = {("m", "none"): ({"t0": True, "t1": False}, {("t0", 0): True, ("t2", 1): False}),
                ("m", "traj"): ({"t1": True}, {})}
    back = agent_eval.decode_outcomes(json.loads(json.dumps(agent_eval.encode_outcomes(outcomes))))
    assert back == outcomes


def test_card_section_renders_a_table_json(agent_eval, tmp_path, monkeypatch):
    adapter = tmp_path / "adapter"
    shutil.copytree(ADAPTER, adapter)
    _folder(tmp_path / "runs", "smollm2-135m-alfworld", "traj", [True, False, False, False], [True, False])
    _folder(tmp_path / "runs", "smollm2-135m-alfworld", "none", [False] * 4, [False, False])
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"rows": agent_eval.folder_table(tmp_path / "runs", ["smollm2-135m-alfworld"],
                                                                 ["none", "traj"]),
                                 "paired": agent_eval.paired_table(tmp_path / "runs", ["smollm2-135m-alfworld"],
                                                                   agent_eval.PAIRS)}))
    monkeypatch.setattr(sys, "argv", ["agent_eval.py", "--card", str(adapter)])
    agent_eval.write_card(str(adapter), [f"valid_unseen, 4 tasks={table}"], ["smollm2-135m-alfworld"], ["traj"])
    card = (adapter / "MODEL_CARD.md").read_text()
    assert "| smollm2-135m-alfworld | traj | 4 | 25.0% |" in card and f"Table: `{table}`" in card
    assert "| smollm2-135m-alfworld | none |" not in card  # only the conditions asked for
    assert "traj vs none (episodes) | 4 | 25.0% | 0.0% |" in card
    table.write_text("[]")
    with pytest.raises(SystemExit, match="not a table written by --table"):
        agent_eval.write_card(str(adapter), [f"x={table}"], ["smollm2-135m-alfworld"], ["traj"])
