"""ETO conversation import/export: exact round trips, ETO's own layout, and errors that name the spot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from memory_builders import CLEAN_APPLE_ID, CLEAN_APPLE_STEPS, ROOM, make_traj

from workbench.memory import (
    ETO_ALFWORLD_INSTRUCTION,
    Trajectory,
    TrajectoryFormatError,
    export_eto,
    import_eto,
    trajectory_to_eto,
)


def _trajs() -> list[Trajectory]:
    return [
        make_traj(),
        make_traj(n_steps=3, final=False, success=False, source="agent:smollm2", meta={"run": 7, "tags": ["a"]}),
        make_traj(task_id="train/pick_heat_then_place_in_recep-Egg-None-Fridge-5/trial_T2",
                  goal="put a hot egg in fridge.", n_steps=1, task_type="heat",
                  initial_observation="different header text"),
    ]


@pytest.mark.parametrize("style", ["from_value", "role_content"])
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_round_trip_is_exact(tmp_path: Path, style: str, suffix: str) -> None:
    trajs = _trajs()
    path = export_eto(trajs, tmp_path / f"eto{suffix}", style=style)
    assert import_eto(path) == trajs
    raw = path.read_text()
    assert ('"conversations"' in raw) == (style == "from_value")
    assert ('"messages"' in raw) == (style == "role_content")
    assert raw.lstrip().startswith("[") == (suffix == ".json")


def _eto_record() -> dict:
    """A record as ETO's alfworld_sft.json lays it out (no workbench_meta)."""
    conv = [{"from": "human", "value": ETO_ALFWORLD_INSTRUCTION}, {"from": "gpt", "value": "OK"},
            {"from": "human", "value": f"Here is your task. {ROOM}\nYour task is to: put a clean apple in fridge."}]
    for k, (thought, action, obs) in enumerate(CLEAN_APPLE_STEPS[:3]):
        value = f"Thought: {thought}\nAction: {action}" if thought else f"Action: {action}"
        conv.append({"from": "gpt", "value": value})
        if k < 2:
            conv.append({"from": "human", "value": f"Observation: {obs}"})
    return {"id": "eto-17", "game_file": f"json_2.1.1/{CLEAN_APPLE_ID}/game.tw-pddl", "conversations": conv}


def test_imports_eto_layout(tmp_path: Path) -> None:
    record = _eto_record()
    path = tmp_path / "alfworld_sft.json"
    path.write_text(json.dumps([record]))
    (traj,) = import_eto(path)
    assert traj.task_id == CLEAN_APPLE_ID  # from game_file: split/task folder/trial
    assert (traj.task_type, traj.split, traj.source, traj.success) == ("clean", "valid_train", "eto", True)
    assert traj.goal == "put a clean apple in fridge."
    assert traj.initial_observation == ROOM == traj.steps[0].observation
    # step k's observation is what the agent saw before action k
    assert [s.observation for s in traj.steps] == [ROOM] + [obs for _, _, obs in CLEAN_APPLE_STEPS[:2]]
    assert [s.action for s in traj.steps] == [a for _, a, _ in CLEAN_APPLE_STEPS[:3]]
    assert [s.thought for s in traj.steps] == [t for t, _, _ in CLEAN_APPLE_STEPS[:3]]
    assert [s.done for s in traj.steps] == [False, False, True]
    assert "final_observation" not in traj.meta
    assert traj.meta["eto_id"] == "eto-17" and "eto_prefix" not in traj.meta  # default prefix is not stored
    # a pure ETO export gives back the very record
    assert trajectory_to_eto(traj, with_meta=False) == record


def test_role_content_with_icl_prefix_and_final_observation(tmp_path: Path) -> None:
    icl = [{"role": "user", "content": "Interact with a household..."}, {"role": "assistant", "content": "OK"},
           {"role": "user", "content": "You are in a kitchen.\n\nYour task is to: put some cup in sink."},
           {"role": "assistant", "content": "Thought: easy.\nAction: go to sink 1"}]
    task = [{"role": "user",
             "content": "You are in the middle of a room.\nYour task is to: heat some egg and put it in garbagecan."},
            {"role": "assistant", "content": "Thought: find the egg.\nAction: go to fridge 1"},
            {"role": "user", "content": "Observation: The fridge 1 is closed."}]
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"id": 42, "messages": icl + task}) + "\n")
    (traj,) = import_eto(path, source="mine")
    assert traj.task_id == "42" and traj.meta["eto_id"] == 42
    assert traj.task_type == "heat"  # no ALFRED folder in the id: from the goal's wording
    assert traj.goal == "heat some egg and put it in garbagecan."
    assert traj.initial_observation == "You are in the middle of a room."
    assert traj.meta["final_observation"] == "The fridge 1 is closed."
    assert [t["from"] for t in traj.meta["eto_prefix"]] == ["human", "gpt", "human", "gpt"]
    out = trajectory_to_eto(traj, style="role_content", with_meta=False)
    assert out["id"] == 42 and out["messages"][:4] == icl and out["messages"][-1] == task[-1]


def _write(tmp_path: Path, records: list) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(records))
    return path


def _valid(**changes) -> dict:
    rec = _eto_record()
    rec.update(changes)
    return rec


def _with_turn(index: int, turn) -> dict:
    rec = _eto_record()
    rec["conversations"][index] = turn
    return rec


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (_with_turn(4, {"from": "human", "value": 3}),
         "record 1 (id 'eto-17'): conversations[4].value: expected string"),
        (_with_turn(3, {"from": "gpt", "value": "Thought: go\ngo to countertop 1"}),
         "record 1 (id 'eto-17'): conversations[3].value: gpt turn has no 'Action:'"),
        (_with_turn(1, {"from": "robot", "value": "OK"}),
         "record 1 (id 'eto-17'): conversations[1].from: unknown speaker"),
        (_with_turn(2, ["human", "hi"]), "record 1 (id 'eto-17'): conversations[2]: expected an object"),
        (_with_turn(4, {"from": "gpt", "value": "Action: look"}), "record 1 (id 'eto-17'): conversations[4].from: "
                                                                  "expected a human turn"),
        (_with_turn(5, {"from": "gpt"}), "record 1 (id 'eto-17'): conversations[5].value: missing"),
        (_with_turn(2, {"from": "human", "value": "Here is your task. A room."}),
         "record 1 (id 'eto-17'): conversations: no human turn holds the task"),
        ({k: v for k, v in _eto_record().items() if k != "conversations"},
         "record 1 (id 'eto-17'): conversations: missing"),
        ({k: v for k, v in _eto_record().items() if k != "id"}, "record 1: id: missing"),
        (_valid(conversations={"from": "human"}), "record 1 (id 'eto-17'): conversations: expected a list"),
        (_valid(workbench_meta={"task_id": "x", "success": "maybe"}),
         "record 1 (id 'eto-17'): workbench_meta.success:"),
        ("not a record", "record 1: expected an object"),
    ],
)
def test_malformed_records_name_file_record_and_field(tmp_path: Path, record, expected: str) -> None:
    path = _write(tmp_path, [_eto_record(), record])
    with pytest.raises(TrajectoryFormatError) as info:
        import_eto(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    bad = _with_turn(3, {"from": "gpt", "value": "I will go."})
    bad["id"] = "b"
    path.write_text(json.dumps(_eto_record()) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(TrajectoryFormatError, match=r"bad\.jsonl: line 2 \(id 'b'\): conversations\[3\]\.value"):
        import_eto(path)
    path.write_text(json.dumps(_eto_record()) + "\n{not json\n")
    with pytest.raises(TrajectoryFormatError, match=r"bad\.jsonl: line 2: not valid JSON"):
        import_eto(path)


def test_invalid_json_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[{"id": 1,]')
    with pytest.raises(TrajectoryFormatError, match=r"bad\.json: not valid JSON"):
        import_eto(path)
    with pytest.raises(FileNotFoundError, match="nope.json"):
        import_eto(tmp_path / "nope.json")


def test_export_refuses_what_it_cannot_write_back() -> None:
    with pytest.raises(ValueError, match="has no steps"):
        trajectory_to_eto(make_traj(n_steps=0))
    traj = make_traj(n_steps=1)
    bad_action = traj.model_copy(update={"steps": (traj.steps[0].model_copy(update={"action": "go\nto"}),)})
    with pytest.raises(ValueError, match=r"steps\[0\]\.action"):
        trajectory_to_eto(bad_action)
    bad_thought = traj.model_copy(update={"steps": (traj.steps[0].model_copy(update={"thought": "x\nAction: y"}),)})
    with pytest.raises(ValueError, match=r"steps\[0\]\.thought"):
        trajectory_to_eto(bad_thought)
    with pytest.raises(ValueError, match="style"):
        trajectory_to_eto(traj, style="chatml")  # type: ignore[arg-type]


# ---- strict reading (issue 43) ----

from workbench.files import FormatError  # noqa: E402


@pytest.mark.parametrize(("rec_id", "shown"), [(None, "null"), ([1], "[1]"), ("", "''"), ("  ", "'  '"),
                                                (True, "true"), (1.5, "1.5"), ({"a": 1}, '{"a": 1}')])
def test_a_record_id_must_be_a_non_empty_string_or_an_integer(tmp_path: Path, rec_id, shown: str) -> None:
    path = _write(tmp_path, [_eto_record(), _valid(id=rec_id)])
    with pytest.raises(FormatError) as info:
        import_eto(path)
    assert f"{path}: record 1: id: {shown}: expected a non-empty string (or an integer)" in str(info.value)


def test_an_integer_id_is_read_as_its_string(tmp_path: Path) -> None:
    rec = _valid(id=17)
    del rec["game_file"]
    (traj,) = import_eto(_write(tmp_path, [rec]))
    assert traj.task_id == "17" and traj.meta["eto_id"] == 17


def test_two_records_with_one_id_are_named(tmp_path: Path) -> None:
    path = _write(tmp_path, [_eto_record(), _valid(id="other"), _eto_record()])
    with pytest.raises(FormatError, match=r"bad\.json: record 2: id 'eto-17' appears twice \(record 0 and record 2\)"):
        import_eto(path)
    path = _write(tmp_path, [_valid(id=5), _valid(id="5")])  # the same id once read as a string
    with pytest.raises(FormatError, match=r"id '5' appears twice \(record 0 and record 1\)"):
        import_eto(path)
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text(json.dumps(_eto_record()) + "\n\n" + json.dumps(_eto_record()) + "\n")
    with pytest.raises(FormatError, match=r"bad\.jsonl: line 3: id 'eto-17' appears twice \(line 1 and line 3\)"):
        import_eto(jsonl)


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("one.json", json.dumps(_eto_record()), "holds a single JSON object, where a list of records belongs"),
    ("one.json", json.dumps(_eto_record(), indent=2), "holds a single JSON object, where a list of records belongs"),
    ("empty.json", "[]", "an empty list: no ETO records"),
    ("empty.json", "", "empty, where ETO records belong"),
    ("empty.jsonl", "\n  \n", "empty, where ETO records belong"),
    ("num.json", "5", "holds a JSON number, where a list of ETO records belongs"),
    ("null.json", "null", "holds a JSON null"),
    ("nan.json", '[{"id": NaN}]', "NaN is not a number JSON allows"),
    ("dup.json", '[{"id": "a", "id": "b"}]', "key 'id' appears twice in one object"),
    ("deep.json", "[" * 5000 + "]" * 5000, "nested 5000 levels deep"),
    ("dup.jsonl", '{"id": "a", "id": "b"}\n', "line 1: key 'id' appears twice"),
    ("list.jsonl", "[1]\n", "line 1: expected an object with 'id' and 'conversations', got list"),
])
def test_what_is_not_a_list_of_records_is_named(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(FormatError) as info:
        import_eto(path)
    assert str(path) in str(info.value) and expected in str(info.value), str(info.value)


def test_one_record_per_line_is_fine_in_a_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(_eto_record()) + "\n")
    assert len(import_eto(path)) == 1
    path = tmp_path / "two.json"  # JSONL under a .json name: one record per line still reads
    path.write_text(json.dumps(_eto_record()) + "\n" + json.dumps(_valid(id="b")) + "\n")
    assert len(import_eto(path)) == 2


def test_a_directory_a_symlink_loop_and_latin1_are_named(tmp_path: Path) -> None:
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(FormatError, match=r"dir\.json: is a directory"):
        import_eto(tmp_path / "dir.json")
    (tmp_path / "loop.json").symlink_to(tmp_path / "loop.json")
    with pytest.raises(FormatError, match=r"loop\.json: a symlink loop"):
        import_eto(tmp_path / "loop.json")
    (tmp_path / "latin.json").write_bytes(json.dumps([_valid(id="caf\u00e9")], ensure_ascii=False).encode("latin-1"))
    with pytest.raises(FormatError, match=r"latin\.json: line 1: not UTF-8"):
        import_eto(tmp_path / "latin.json")


def test_workbench_meta_is_read_strictly(tmp_path: Path) -> None:
    for meta, field in (({"task_id": "x", "success": "true"}, "workbench_meta.success"),
                        ({"task_id": ""}, "workbench_meta.task_id"),
                        ({"task_id": "x", "dones": [1]}, "workbench_meta.dones.0")):
        path = _write(tmp_path, [_valid(workbench_meta=meta)])
        with pytest.raises(FormatError, match=rf"record 0 \(id 'eto-17'\): {re.escape(field)}"):
            import_eto(path)


def test_several_trajectories_of_one_task_export_distinct_ids(tmp_path: Path) -> None:
    trajs = [make_traj(), make_traj(success=False), make_traj(n_steps=2)]
    path = export_eto(trajs, tmp_path / "eto.json")
    ids = [r["id"] for r in json.loads(path.read_text())]
    assert ids == [CLEAN_APPLE_ID, f"{CLEAN_APPLE_ID}#2", f"{CLEAN_APPLE_ID}#3"]
    assert import_eto(path) == trajs
    bare = export_eto(trajs, tmp_path / "bare.json", with_meta=False)  # no workbench_meta: the id names the task
    assert [t.task_id for t in import_eto(bare)] == [CLEAN_APPLE_ID] * 3
    clash = make_traj(meta={"eto_id": f"{CLEAN_APPLE_ID}#2"}, task_id="valid_train/other-A-B-C-1/trial_T1")
    with pytest.raises(ValueError, match="would share the record id"):
        export_eto([*trajs[:2], clash], tmp_path / "clash.json")
    with pytest.raises(ValueError, match="no trajectories"):
        export_eto([], tmp_path / "none.json")
