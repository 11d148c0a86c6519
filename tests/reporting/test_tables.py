"""workbench.reporting tables: condition rows, paired comparisons, carry-over, dtype, the model card section."""

import json
import shutil
from pathlib import Path

import pytest

from workbench.reporting import (
    PAIRS,
    check_dtypes,
    decode_outcomes,
    encode_outcomes,
    folder_dtype,
    folder_table,
    paired_table,
    read_table,
    rows_markdown,
    table_markdown,
    write_table,
)
from workbench.reporting.cards import write_card

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "workbench" / "assets" / "adapters" / "smollm2-135m-alfworld"


def make_folder(root, model, cond, wins, tf_hits, dtype=None, tf_dtype=None):
    """A run folder with episodes (task i won iff wins[i]) and teacher forcing (step i right iff tf_hits[i]);
    ``dtype`` goes to config.json's run, ``tf_dtype`` to teacher_forced.json's key (absent: an older folder)."""
    folder = root / model / cond
    folder.mkdir(parents=True)
    if dtype is not None:
        (folder / "config.json").write_text(json.dumps({"run": {"model": model, "memory": cond, "dtype": dtype},
                                                        "versions": {}}))
    if wins:
        (folder / "trajectories.jsonl").write_text("".join(
            json.dumps({"task_id": f"t{i}", "goal": "g", "success": w}) + "\n" for i, w in enumerate(wins)))
        (folder / "metrics.json").write_text(json.dumps({
            "n_episodes": len(wins), "success_rate": sum(wins) / len(wins), "avg_steps": 30.0, "memory_tokens": 5,
            "by_task_type": {"pick": {"success_rate": sum(wins) / len(wins)}},
            "sr_at_k": {"10": sum(wins[:2]) / len(wins), "50": sum(wins) / len(wins)},
            "action_patterns": {"oscillation": 0.9, "repeat": 0.0, "distinct_actions": 2.5, "navigation": 0.95,
                                "took_object": sum(wins) / len(wins), "put_back": 0.0, "failed_oscillation": 0.0,
                                "failed_oscillating": 0.0}}))
    if tf_hits:
        steps = [{"task_id": "t0", "step": i, "expert": "a", "chosen": "a" if h else "b", "p_expert": 0.5}
                 for i, h in enumerate(tf_hits)]
        key = {"model": model, "memory": cond} | ({"dtype": tf_dtype} if tf_dtype else {})
        (folder / "teacher_forced.json").write_text(json.dumps({
            "key": key, "per_step": steps,
            "result": {"accuracy": sum(tf_hits) / len(tf_hits), "n_steps": len(tf_hits), "mean_p_expert": 0.5}}))
    return folder


def test_table_rows_and_paired_comparisons_come_from_the_folders(tmp_path):
    make_folder(tmp_path, "m", "none", [False] * 8 + [True, True], [True, False, False, True])
    make_folder(tmp_path, "m", "traj", [True] * 6 + [False, False, False, True], [True, True, True, True])
    rows = folder_table(tmp_path, ["m", "absent"], ["none", "icl", "traj"])
    got = [(r["memory"], r["success_rate"], r["tf_accuracy"], r["dtype"]) for r in rows]
    assert got == [("none", 0.2, 0.5, "float32"), ("traj", 0.7, 1.0, "float32")]  # no dtype recorded: float32
    paired = {(r["a"], r["b"], r["kind"]): r for r in paired_table(tmp_path, ["m"], PAIRS)}
    ep = paired[("traj", "none", "episodes")]
    # traj wins t0..t5 alone, none t8 alone, both t9: 6 vs 1 discordant
    assert (ep["n"], ep["only_a"], ep["only_b"], ep["both"]) == (10, 6, 1, 1)
    assert ep["p_mcnemar"] == pytest.approx(2 * (1 + 7) / 2 ** 7)
    assert paired[("traj", "none", "TF steps")]["only_a"] == 2
    assert ("icl", "none", "episodes") not in paired  # no icl folder: nothing to pair
    md = table_markdown(rows, "T", "cmd", list(paired.values()))
    assert md.startswith("# T\n\ndtype: float32\n\nMeasured with: `cmd`\n\n")
    assert "| m | traj | 10 | 70.0% | 30.0 | 5 | 4 | 100.0% | 0.500 |" in md
    assert "| m | traj vs none (episodes) | 10 | 70.0% | 20.0% | +50.0 pts | 6 | 1 | 0.125 |" in md
    assert "| m | traj | 90.0% | 0.0% | 2.5 | 95.0% | 70.0% |" in md  # how the episodes move
    assert "| model | memory | SR@10 | SR@50 |" in md and "| m | traj | 20.0% | 70.0% |" in md
    assert "| dtype |" not in md


def test_outcomes_round_trip_through_the_table_json():
    outcomes = {("m", "none"): ({"t0": True, "t1": False}, {("t0", 0): True, ("t2", 1): False}),
                ("m", "traj"): ({"t1": True}, {})}
    assert decode_outcomes(json.loads(json.dumps(encode_outcomes(outcomes)))) == outcomes


def test_table_keeps_its_notes_across_regeneration_and_refuses_an_empty_root(tmp_path):
    make_folder(tmp_path / "runs", "m", "none", [False, True], [True, False])
    notes = "Runs: played in halves, merged with `workbench merge-runs`.\n"
    out = tmp_path / "t.md"
    for _ in range(2):  # written twice: the notes are there each time, once
        write_table(out, tmp_path / "runs", ["m"], ["none"], "T", "cmd", notes)
        md = out.read_text()
        assert md.count("Runs: played in halves") == 1
        assert md.index("dtype: float32") < md.index("Measured with:") < md.index("Runs: played") \
            < md.index("| model | memory |")
    assert json.loads(out.with_suffix(".json").read_text())["rows"][0]["success_rate"] == 0.5
    with pytest.raises(FileNotFoundError, match="no run folders"):
        write_table(out, tmp_path / "nothing", ["m"], ["none"], "T", "cmd")


def test_table_keeps_what_the_runs_at_hand_lack(tmp_path):
    """Regenerating a two-model table where only part of the runs are present: with keep_absent a model with no
    folders keeps its rows and paired lines from the previous .json, and a row whose teacher forcing is not here
    keeps its TF columns and TF paired lines; all marked as carried over. Without it: only the runs."""
    first, second = tmp_path / "runs1", tmp_path / "runs2"
    for cond, wins in (("none", [False, False, True]), ("traj", [True, True, False])):
        make_folder(first, "a", cond, wins, [True, False])
        make_folder(first, "b", cond, [False] * 3, [False, True])
    make_folder(second, "b", "none", [True, False, False], [])  # b's episodes played again here, not its TF
    make_folder(second, "b", "traj", [True, True, True], [])
    out = tmp_path / "tables" / "t.md"

    def table(runs, keep_absent=False):
        write_table(out, runs, ["a", "b"], ["none", "traj"], "T", "cmd", keep_absent=keep_absent)
        return json.loads(out.with_suffix(".json").read_text()), out.read_text()

    table(first)
    data, md = table(second, keep_absent=True)
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
    data2, _ = table(second, keep_absent=True)
    assert data2["carried"] == data["carried"] and data2["rows"] == data["rows"]
    data3, md3 = table(second)  # without keep_absent: only what the runs hold
    assert [(r["model"], r["tf_accuracy"]) for r in data3["rows"]] == [("b", None), ("b", None)]
    assert "Carried over" not in md3 and not data3["carried"]
    # b's traj played nowhere here: its row and outcomes are kept, and traj vs none of the episodes is paired
    # from kept traj and fresh none outcomes (old traj lost all 3, fresh none won t0)
    table(first)
    shutil.rmtree(second / "b" / "traj")
    data4, md4 = table(second, keep_absent=True)
    ep = {(r["model"], r["a"], r["b"], r["kind"]): r for r in data4["paired"]}[("b", "traj", "none", "episodes")]
    assert (ep["n"], ep["only_a"], ep["only_b"]) == (3, 0, 1)
    assert "b episodes (traj)" in md4
    # a previous table without outcomes (older tables): its paired lines are kept only where both sides were carried
    legacy = json.loads(out.with_suffix(".json").read_text())
    del legacy["outcomes"]
    out.with_suffix(".json").write_text(json.dumps(legacy))
    data5, _ = table(second, keep_absent=True)
    got = {(r["model"], r["a"], r["b"], r["kind"]) for r in data5["paired"]}
    assert ("a", "traj", "none", "episodes") in got and ("b", "traj", "none", "TF steps") in got
    assert ("b", "traj", "none", "episodes") not in got  # fresh none vs carried traj: nothing to pair from
    out.with_suffix(".json").write_text("{not json")
    with pytest.raises(ValueError, match="t.json is not a table"):
        table(second, keep_absent=True)
    assert out.with_suffix(".json").read_text() == "{not json"  # nothing written on failure


def test_the_dtype_comes_from_config_then_teacher_forcing_then_float32(tmp_path):
    assert folder_dtype(make_folder(tmp_path, "m", "old", [True], [True])) == "float32"
    assert folder_dtype(make_folder(tmp_path, "m", "cfg", [True], [True], dtype="bfloat16")) == "bfloat16"
    assert folder_dtype(make_folder(tmp_path, "m", "tf", [], [True], tf_dtype="bfloat16")) == "bfloat16"
    assert folder_dtype(make_folder(tmp_path, "m", "both", [True], [True], "bfloat16", "bfloat16")) == "bfloat16"
    mixed = make_folder(tmp_path, "m", "mixed", [True], [True], dtype="bfloat16", tf_dtype="float32")
    with pytest.raises(ValueError, match=r"mixed: config.json run.dtype is 'bfloat16' but teacher_forced.json "
                                         r"key.dtype is 'float32'"):
        folder_dtype(mixed)
    (tmp_path / "m" / "old" / "config.json").write_text(json.dumps({"run": {"dtype": 16}}))
    with pytest.raises(ValueError, match=r"old/config.json: field 'run.dtype' is 16"):
        folder_dtype(tmp_path / "m" / "old")


def test_a_table_states_its_dtype_and_refuses_mixed_dtypes(tmp_path):
    make_folder(tmp_path / "runs", "m", "none", [False, True], [True, False], dtype="bfloat16")
    make_folder(tmp_path / "runs", "m", "traj", [True, True], [], dtype="bfloat16")
    out = tmp_path / "t.md"
    md = write_table(out, tmp_path / "runs", ["m"], ["none", "traj"], "T", "cmd")
    assert md.startswith("# T\n\ndtype: bfloat16\n\nMeasured with:")
    data = json.loads(out.with_suffix(".json").read_text())
    assert [r["dtype"] for r in data["rows"]] == ["bfloat16", "bfloat16"] and data["dtypes"] == ["bfloat16"]
    make_folder(tmp_path / "runs", "m", "icl", [True, False], [], dtype="float32")
    before = out.read_text(), out.with_suffix(".json").read_text()
    with pytest.raises(ValueError, match=r"mix dtypes \['bfloat16', 'float32'\].*runs/m/none: bfloat16.*"
                                         r"runs/m/icl: float32.*compare_dtypes=True"):
        write_table(out, tmp_path / "runs", ["m"], ["none", "icl", "traj"], "T", "cmd")
    assert (out.read_text(), out.with_suffix(".json").read_text()) == before  # nothing written on failure
    with pytest.raises(ValueError, match="mix dtypes"):
        table_markdown(folder_table(tmp_path / "runs", ["m"], ["none", "icl"]), "T", "cmd")


def test_a_table_comparing_dtypes_shows_a_dtype_column_and_its_own_pairs(tmp_path):
    make_folder(tmp_path / "runs", "m", "traj-bf16", [True, True, False], [True, True], dtype="bfloat16")
    make_folder(tmp_path / "runs", "m", "traj-fp32", [True, False, False], [True, False], dtype="float32")
    out = tmp_path / "t.md"
    md = write_table(out, tmp_path / "runs", ["m"], ["traj-bf16", "traj-fp32"], "T", "cmd",
                     pairs=[("traj-bf16", "traj-fp32")], compare_dtypes=True)
    assert "dtype: bfloat16, float32 (compared: the dtype column)" in md
    assert "| model | memory | dtype | episodes |" in md and "|---|---|---|---|---|---|---|---|---|---|" in md
    assert "| m | traj-bf16 | bfloat16 | 3 | 66.7% |" in md and "| m | traj-fp32 | float32 | 3 | 33.3% |" in md
    assert "| m | traj-bf16 vs traj-fp32 (episodes) | 3 | 66.7% | 33.3% | +33.3 pts | 1 | 0 | 1 |" in md
    assert json.loads(out.with_suffix(".json").read_text())["dtypes"] == ["bfloat16", "float32"]
    assert "| dtype |" in rows_markdown(folder_table(tmp_path / "runs", ["m"], ["traj-bf16"]), compare_dtypes=True)


def test_rows_carried_from_a_table_without_dtype_count_as_float32(tmp_path):
    first, second = tmp_path / "runs1", tmp_path / "runs2"
    make_folder(first, "a", "none", [True, False], [True, False])
    out = tmp_path / "t.md"
    write_table(out, first, ["a", "b"], ["none"], "T", "cmd")
    old = json.loads(out.with_suffix(".json").read_text())  # as written before tables recorded the dtype
    for r in old["rows"]:
        del r["dtype"]
    del old["dtypes"]
    out.with_suffix(".json").write_text(json.dumps(old))
    assert read_table(out.with_suffix(".json"))["rows"][0]["dtype"] == "float32"
    make_folder(second, "b", "none", [True], [True])  # an older folder too: float32, the table is one dtype
    data = (write_table(out, second, ["a", "b"], ["none"], "T", "cmd", keep_absent=True),
            json.loads(out.with_suffix(".json").read_text()))
    assert "dtype: float32" in data[0] and [r["dtype"] for r in data[1]["rows"]] == ["float32", "float32"]
    out.with_suffix(".json").write_text(json.dumps(old))
    shutil.rmtree(second / "b")
    make_folder(second, "b", "none", [True], [True], dtype="bfloat16")
    with pytest.raises(ValueError, match=r"t.json row a/none: float32; .*runs2/b/none: bfloat16"):
        write_table(out, second, ["a", "b"], ["none"], "T", "cmd", keep_absent=True)
    # one row cannot join bfloat16 episodes played here with float32 teacher forcing carried from before
    make_folder(second, "a", "none", [True], [], dtype="bfloat16")
    with pytest.raises(ValueError, match=r"a/none: the run folder here is bfloat16 but .*t.json holds its teacher "
                                         r"forcing in float32"):
        write_table(out, second, ["a", "b"], ["none"], "T", "cmd", keep_absent=True)


def test_check_dtypes_names_where_each_row_came_from():
    rows = [{"model": "m", "memory": "a", "dtype": "bfloat16"}, {"model": "m", "memory": "b"}]
    assert check_dtypes(rows, compare_dtypes=True) == ["bfloat16", "float32"]
    with pytest.raises(ValueError, match=r"R/m/a: bfloat16; m/b: float32"):
        check_dtypes(rows, where={("m", "a"): "R/m/a"})


def test_card_evaluation_is_written_from_run_folders(tmp_path):
    adapter = tmp_path / "adapter"
    shutil.copytree(ADAPTER, adapter)
    make_folder(tmp_path / "runs", "smollm2-135m-alfworld", "traj", [True, False], [True, False])
    write_card(adapter, [f"valid_unseen, 2 tasks={tmp_path / 'runs'}"], ["smollm2-135m-alfworld"], ["none", "traj"],
               "python agent_eval.py --card x")
    card = (adapter / "MODEL_CARD.md").read_text()
    assert "### valid_unseen, 2 tasks" in card and "| smollm2-135m-alfworld | traj | 2 | 50.0% |" in card
    assert "Written by `python agent_eval.py --card x`." in card and "\n\ndtype: float32\n\n" in card
    assert "## Training" in card  # the rest of the card is rebuilt from training_log.json, not lost
    with pytest.raises(FileNotFoundError, match="no run folders"):
        write_card(adapter, [f"x={tmp_path / 'nothing'}"], ["smollm2-135m-alfworld"], ["traj"], "cmd")
    with pytest.raises(ValueError, match="expected TITLE=RUNS_ROOT or TITLE=TABLE.json"):
        write_card(adapter, ["no title"], ["smollm2-135m-alfworld"], ["traj"], "cmd")
    make_folder(tmp_path / "runs", "smollm2-135m-alfworld", "none", [True], [], dtype="bfloat16")
    with pytest.raises(ValueError, match="mix dtypes"):
        write_card(adapter, [f"x={tmp_path / 'runs'}"], ["smollm2-135m-alfworld"], ["none", "traj"], "cmd")
    assert "### valid_unseen, 2 tasks" in (adapter / "MODEL_CARD.md").read_text()  # left as it was


def test_card_section_renders_a_table_json(tmp_path):
    adapter = tmp_path / "adapter"
    shutil.copytree(ADAPTER, adapter)
    model = "smollm2-135m-alfworld"
    make_folder(tmp_path / "runs", model, "traj", [True, False, False, False], [True, False])
    make_folder(tmp_path / "runs", model, "none", [False] * 4, [False, False])
    table = tmp_path / "t.json"  # rows without dtype, as tables were written before: float32
    table.write_text(json.dumps({"rows": [{k: v for k, v in r.items() if k != "dtype"}
                                          for r in folder_table(tmp_path / "runs", [model], ["none", "traj"])],
                                 "paired": paired_table(tmp_path / "runs", [model], PAIRS)}))
    write_card(adapter, [f"valid_unseen, 4 tasks={table}"], [model], ["traj"], "cmd")
    card = (adapter / "MODEL_CARD.md").read_text()
    assert f"| {model} | traj | 4 | 25.0% |" in card and f"Table: `{table}`" in card
    assert f"| {model} | none |" not in card  # only the conditions asked for
    assert "traj vs none (episodes) | 4 | 25.0% | 0.0% |" in card and "dtype: float32" in card
    write_card(adapter, [f"v={table}"], [model], ["traj"], "cmd", pairs=[("traj", "icl")])
    assert "traj vs none" not in (adapter / "MODEL_CARD.md").read_text()  # only the pairs asked for
    table.write_text("[]")
    with pytest.raises(ValueError, match="not a table written by"):
        write_card(adapter, [f"x={table}"], [model], ["traj"], "cmd")
    with pytest.raises(FileNotFoundError, match="nope.json: no such table"):
        write_card(adapter, [f"x={tmp_path / 'nope.json'}"], [model], ["traj"], "cmd")


def test_models_are_paired_under_each_condition_even_when_one_is_carried(tmp_path):
    """v2 beside v1: the same tasks and steps, McNemar per condition; v1's runs may exist only in the previous
    table's .json (its outcomes are kept), v2's folders are fresh."""
    first, second = tmp_path / "runs1", tmp_path / "runs2"
    make_folder(first, "v1", "traj", [True, False, False, False], [True, False, False])
    make_folder(second, "v2", "traj", [True, True, True, False], [True, True, False])
    out = tmp_path / "t.md"
    write_table(out, first, ["v1"], ["traj"], "T", "cmd")
    md = write_table(out, second, ["v1", "v2"], ["traj"], "T", "cmd", keep_absent=True, model_pairs=[("v2", "v1")])
    across = {r["kind"]: r for r in json.loads(out.with_suffix(".json").read_text())["paired_models"]}
    assert (across["episodes"]["n"], across["episodes"]["only_a"], across["episodes"]["only_b"]) == (4, 2, 0)
    assert across["episodes"]["memory"] == "traj" and across["TF steps"]["only_a"] == 1
    assert "| traj | v2 vs v1 (episodes) | 4 | 75.0% | 25.0% | +50.0 pts | 2 | 0 | 0.5 |" in md
    assert "Paired across models" in md
    section = __import__("workbench.reporting", fromlist=["card_section"]).card_section(
        f"S={out.with_suffix('.json')}", ["v1", "v2"], ["traj"])
    assert "| traj | v2 vs v1 (episodes) |" in section


def test_a_dtype_table_pairs_the_bf16_twin_and_counts_same_choices_right_or_wrong(tmp_path):
    """bfloat16 vs float32 of one agent: a dtype column, paired McNemar, and the share of teacher-forced steps
    where both chose the same action; a change between two wrong actions is a different choice although both
    are wrong."""
    make_folder(tmp_path, "m", "traj", [True, False, True, False], [True, False, False, True], dtype="float32")
    bf = make_folder(tmp_path, "m-bf16", "traj", [True, True, True, False], [True, False, False, False],
                     dtype="bfloat16")
    tf = json.loads((bf / "teacher_forced.json").read_text())
    tf["per_step"][1]["chosen"] = "c"  # wrong in both dtypes, but another wrong action
    (bf / "teacher_forced.json").write_text(json.dumps(tf))
    out = tmp_path / "dtype.md"
    with pytest.raises(ValueError, match="mix dtypes"):
        write_table(out, tmp_path, ["m", "m-bf16"], ["traj"], "T", "cmd", model_pairs=[("m-bf16", "m")])
    md = write_table(out, tmp_path, ["m", "m-bf16"], ["traj"], "T", "cmd", model_pairs=[("m-bf16", "m")],
                     compare_dtypes=True)
    across = {r["kind"]: r for r in json.loads(out.with_suffix(".json").read_text())["paired_models"]}
    assert across["TF steps"]["same_decision"] == 0.5  # steps 0 and 2 the same; 1 (b vs c) and 3 (a vs b) not
    assert "same_decision" not in across["episodes"]
    assert "| traj | m-bf16 vs m (TF steps) | 4 | 25.0% | 50.0% | -25.0 pts | 0 | 1 | 1 | 50.0% |" in md
    assert "| m-bf16 | traj | bfloat16 |" in md and "dtype: bfloat16, float32" in md


def test_a_record_older_than_a_measure_gets_it_from_its_episodes(tmp_path):
    from workbench.memory.trajectory import Step, Trajectory, write_jsonl

    folder = make_folder(tmp_path, "m", "traj", [False, True], None)
    m = json.loads((folder / "metrics.json").read_text())
    for key in ("put_back", "failed_oscillation", "failed_oscillating"):  # a record older than these measures
        del m["action_patterns"][key]
    (folder / "metrics.json").write_text(json.dumps(m))
    acts = [["take mug 1 from desk 1", "put mug 1 in/on desk 1"], ["take mug 1 from desk 1", "go to shelf 1"]]
    write_jsonl(folder / "trajectories.jsonl", [
        Trajectory(task_id=f"t{i}", goal="g", success=bool(i), steps=tuple(Step(observation="o", action=x) for x in a))
        for i, a in enumerate(acts)])
    row = folder_table(tmp_path, ["m"], ["traj"])[0]
    assert row["action_patterns"]["put_back"] == 0.5  # recomputed: the recorded patterns predate put_back
    assert row["action_patterns"]["oscillation"] == 0.0  # and every measure with it, from the same episodes


def test_step_bands_give_accuracy_and_paired_tests_within_each_band(tmp_path):
    # t0's steps 0..5: none right at 1, 2, 3, 5; flat right at 4, 5 only (it loses the early steps)
    make_folder(tmp_path, "m", "none", [], [False, True, True, True, False, True])
    make_folder(tmp_path, "m", "flat", [], [False, False, False, False, True, True])
    out = tmp_path / "t.md"
    md = write_table(out, tmp_path, ["m"], ["none", "flat"], "T", "cmd", pairs=[("flat", "none")],
                     tf_bands=["0", "1-3", "4-"])
    assert "| model | memory | steps 0 | steps 1–3 | steps 4+ |" in md
    assert "| m | none | 1: 0.0% | 3: 100.0% | 2: 50.0% |" in md
    assert "| m | flat | 1: 0.0% | 3: 0.0% | 2: 100.0% |" in md
    lines = [ln for ln in md.splitlines() if ln.startswith("| m | flat vs none")]
    assert lines == ["| m | flat vs none (TF steps) | 6 | 33.3% | 66.7% | -33.3 pts | 1 | 3 | 0.625 |",
                     "| m | flat vs none (TF steps 0) | 1 | 0.0% | 0.0% | +0.0 pts | 0 | 0 | 1 |",
                     "| m | flat vs none (TF steps 1–3) | 3 | 0.0% | 100.0% | -100.0 pts | 0 | 3 | 0.25 |",
                     "| m | flat vs none (TF steps 4+) | 2 | 100.0% | 50.0% | +50.0 pts | 1 | 0 | 1 |"]
    record = read_table(out.with_suffix(".json"))
    assert record["tf_bands"] == ["0", "1–3", "4+"]
    assert {r["memory"]: r["tf_by_step"]["1–3"] for r in record["rows"]} == {"none": [3, 1.0], "flat": [3, 0.0]}
    before = out.read_text()
    for bad, why in ((["1-x"], "expected K, K-L or K-"), (["3-1"], "0 <= K <= L"), (["0-3", "2-"], "overlaps")):
        with pytest.raises(ValueError, match=why):
            write_table(out, tmp_path, ["m"], ["none", "flat"], "T", "cmd", tf_bands=bad)
    assert out.read_text() == before  # a bad band writes nothing
