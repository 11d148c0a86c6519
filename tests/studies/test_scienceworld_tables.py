"""ScienceWorld's tables: per-type score and success over the tasks every run played, the AGMR paper's 17 types and
the 7 long ones apart."""

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
