"""ScienceWorld's tables: per-type score and success over the tasks every run played, the AGMR paper's 17 types and
the 7 long ones apart."""

import pandas as pd
import pytest

from workbench.memory.trajectory import Step, Trajectory
from workbench.studies import scienceworld_tables as swt


def _traj(task_type: str, variation: int, score: float) -> Trajectory:
    return Trajectory(task_id=f"test/{task_type}/{variation}", task_type=task_type, goal="g", initial_observation="r",
                      steps=(Step(observation="o", action="look around"),), success=score >= 100, source="agent:x",
                      split="test", meta={"score": score, "steps": [{"memory_tokens": 10 * variation}]})


def test_per_type_and_summary_tables(monkeypatch):
    runs = {
        "none": [_traj("find-animal", 225, 0), _traj("find-animal", 226, 100), _traj("boil", 21, 10)],
        "traj": [_traj("find-animal", 225, 50), _traj("find-animal", 226, 100), _traj("boil", 21, 30),
                 _traj("melt", 21, 100)],  # melt: played by one run only, left out
    }
    monkeypatch.setattr(swt, "read_episodes", lambda folder: runs[folder])
    table = swt.per_type_table({"none": "none", "traj": "traj"})
    assert list(table["task type"]) == ["boil", "find-animal"]
    row = table.set_index("task type").loc["find-animal"]
    assert row["n"] == 2 and row["none score"] == 50 and row["traj score"] == 75
    assert row["none success_%"] == 50 and row["set"] == "AGMR 17"
    assert table.set_index("task type").loc["boil", "set"] == "long (AGMR drops)"
    summary = swt.summary_table({"none": "none", "traj": "traj"}).set_index(["condition", "set"])
    assert summary.loc[("traj", "AGMR's 17 types"), "score"] == 75
    assert summary.loc[("traj", "the 7 long types"), "score"] == 30 and summary.loc[("traj", "the 7 long types"), "n"] == 1
    assert summary.loc[("none", "ETO's 24 types"), "n"] == 3
    assert summary.loc[("traj", "the 7 long types"), "memory_tokens"] == 210  # the step's memory block, per episode


def test_a_run_without_scores_is_a_clear_error(monkeypatch):
    t = _traj("boil", 21, 0).model_copy(update={"meta": {}})
    monkeypatch.setattr(swt, "read_episodes", lambda folder: [t])
    with pytest.raises(ValueError, match="no score.*not a ScienceWorld run"):
        swt.episode_scores("x")


def test_the_agmr_set_is_etos_less_the_long_types():
    assert len(swt.AGMR_TYPES) == 17 and not set(swt.AGMR_TYPES) & set(swt.LONG_TYPES)


def _episode(task: str, start: str, actions: list[tuple[str, float]], score: float, steps_meta=None) -> Trajectory:
    task_type = task.split("/")[1]
    return Trajectory(task_id=task, task_type=task_type, goal="g", initial_observation=start,
                      steps=tuple(Step(observation="o", action=a, reward=r) for a, r in actions), success=False,
                      source="agent:x", split="test", meta={"score": score, "steps": steps_meta or []})


def test_the_divergence_table_finds_the_step_two_episodes_part_at_and_its_points(monkeypatch):
    runs = {
        "react": [_episode("test/find-animal/225", "cups: blue, red", [("go to hallway", 0.17), ("go to door", 0.08),
                                                                      ("look", 0.0)], 25),
                  _episode("test/boil/21", "pot", [("look", 0.0), ("go to kitchen", 0.1)], 10),
                  _episode("test/melt/21", "ice", [("look", 0.0)], 0)],
        "arbiter": [_episode("test/find-animal/225", "cups: red, blue", [("go to hallway", 0.17),
                                                                        ("go to kitchen", 0.0), ("look", 0.0)], 17),
                    _episode("test/boil/21", "pot", [("look", 0.0), ("go to kitchen", 0.1)], 10),
                    _episode("test/melt/21", "ice", [("look", 0.0), ("wait", 0.0)], 0)],
    }
    monkeypatch.setattr(swt, "read_episodes", lambda folder: runs[folder])
    table = swt.divergence_table({"ReAct": "react", "MemArbiter": "arbiter"}, "ReAct").set_index("task")
    assert list(table["condition"].unique()) == ["MemArbiter"]
    row = table.loc["test/find-animal/225"]
    assert not row["same start"] and row["parts at step"] == 2
    assert (row["ReAct action"], row["action"]) == ("go to door", "go to kitchen")
    assert (row["ReAct points there"], row["points there"], row["score difference"]) == (8.0, 0.0, -8.0)
    same = table.loc["test/boil/21"]
    assert same["same start"] and same["parts at step"] is pd.NA and same["score difference"] == 0
    longer = table.loc["test/melt/21"]  # the same actions, one episode went on
    assert longer["parts at step"] == 2 and pd.isna(longer["ReAct action"]) and longer["action"] == "wait"
    with pytest.raises(ValueError, match="reference 'x' is not one of the runs"):
        swt.divergence_table({"ReAct": "react"}, "x")


def test_the_reminder_table_counts_reminders_and_those_that_moved_the_action(monkeypatch):
    meta = [{"reminder": "go to the kitchen", "reminder_effect": {"changed": True}},
            {"reminder": "", "reminder_effect": None},
            {"reminder": "look", "reminder_effect": {"changed": False}}, {}]
    ep = _episode("test/find-plant/225", "r", [("look", 0.0)] * 4, 25, steps_meta=meta)
    monkeypatch.setattr(swt, "read_episodes", lambda folder: [ep])
    row = swt.reminder_table("x").iloc[0]
    assert (row["steps"], row["reminders"], row["moved the action"], row["score"]) == (4, 2, 1, 25)
