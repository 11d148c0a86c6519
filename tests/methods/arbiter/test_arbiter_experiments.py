"""Notebook 05's run grid: every method at every budget and the ablations at 500, on one set of tasks."""

from __future__ import annotations

import json

import pytest

from workbench.studies.arbiter_grids import arbiter_configs, condition_name
from workbench.studies.arbiter_tables import behaviour_table


def test_the_grid_names_and_options(tmp_path):
    cfgs = arbiter_configs("smollm2-135m-alfworld", "valid_unseen", "0:4", 50, tmp_path)
    names = [c.out.rsplit("/", 1)[-1] for c in cfgs]
    assert names == ["arbiter-500", "flat-retrieval-500", "flat-recency-500", "arbiter-750", "flat-retrieval-750",
                     "flat-recency-750", "arbiter-no-banks-500", "arbiter-no-signals-500", "arbiter-no-gate-500"]
    assert [c.method for c in cfgs][-1] == "arbiter/no-gate@500" and cfgs[0].backend == "offline-alfworld"
    assert {(c.tasks, c.split, c.max_steps, c.teacher_forcing) for c in cfgs} == {("0:4", "valid_unseen", 50, False)}
    assert condition_name("flat-recency", 750) == "flat-recency-750"


def test_table_5_reads_each_runs_records():
    from workbench.memory.trajectory import Step, Trajectory

    def traj(task, acts, obs):
        steps = tuple(Step(observation=o, action=a) for a, o in zip(acts, obs))
        meta = {"steps": [{"wm": {"o200k": 100, "bank_tokens": {"episodic": 40}}} for _ in acts],
                "final_observation": "done"}
        return Trajectory(task_id=task, goal="g", steps=steps, meta=meta)

    fail = traj("t1", ["open drawer 1", "open drawer 1", "go to desk 1"], ["room", "Nothing happens.", "Nothing happens."])
    table = behaviour_table({"a": [fail], "b": [fail]})
    assert table.loc["a", "common_failure_tasks"] == 1 and table.loc["a", "max_P_t_o200k"] == 100
    assert table.loc["a", "episodic_share_failed"] == 0.4


def test_table_5_common_failure_tasks_are_the_three_methods_at_each_budget():
    from workbench.memory.trajectory import Step, Trajectory
    from workbench.studies.arbiter_tables import common_failure_sets

    def traj(task, failed):
        obs = ["room", "Nothing happens." if failed else "ok", "ok"]
        return Trajectory(task_id=task, goal="g", steps=tuple(Step(observation=o, action="open drawer 1") for o in obs),
                          meta={"final_observation": "ok"})

    tasks = ("t1", "t2", "t3")
    fails = {"arbiter-500": {"t1", "t2"}, "flat-retrieval-500": {"t1", "t2"}, "flat-recency-500": {"t1", "t2", "t3"},
             "arbiter-750": {"t1"}, "flat-retrieval-750": {"t1", "t3"}, "flat-recency-750": {"t1"},
             "arbiter-no-gate-500": {"t3"}}  # an ablation never narrows the set
    runs = {n: [traj(t, t in f) for t in tasks] for n, f in fails.items()}
    sets = common_failure_sets(list(runs))
    assert sets["arbiter-no-gate-500"] == sets["flat-recency-500"] == ("arbiter-500", "flat-retrieval-500", "flat-recency-500")
    table = behaviour_table(runs)
    assert table.loc["arbiter-500", "common_failure_tasks"] == 2 and table.loc["arbiter-750", "common_failure_tasks"] == 1
    assert table.loc["arbiter-no-gate-500", "common_failure_tasks"] == 2  # the 500 set, though it failed only t3
    # the action agent alone sits beside them on the 500 set, and a task only it failed on is not common
    runs["none"] = [traj(t, True) for t in tasks]
    assert common_failure_sets(list(runs))["none"] == sets["arbiter-500"]
    table = behaviour_table(runs)
    assert table.loc["none", "common_failure_tasks"] == 2 and table.loc["arbiter-500", "common_failure_tasks"] == 2
    assert "none" not in table.loc["none", "common_failure_of"]
    assert common_failure_sets(["x", "none"]) == {"x": ("x",), "none": ("x",)}  # no trio: every name but it


def test_the_sensitivity_runs_adopt_from_500():
    """MemArbiter and Flat Retrieval at the budgets that cut their blocks, on a slice; every other budget of a method
    (750 and the sensitivity ones) takes its 500 episodes where the memory is the same; Flat Recency and the
    ablations play everything."""
    from workbench.studies.arbiter_grids import budget_pairs, sensitivity_configs

    main = arbiter_configs("smollm2-135m-alfworld", "valid_unseen", "all", 50, "/r")
    sens = sensitivity_configs("smollm2-135m-alfworld", "valid_unseen", "0:134:4", 50, "/r")
    assert [c.out.rsplit("/", 1)[-1] for c in sens] == ["arbiter-150", "flat-retrieval-150", "arbiter-250",
                                                       "flat-retrieval-250"]
    assert {c.tasks for c in sens} == {"0:134:4"}
    pairs = {c.out.rsplit("/", 1)[-1]: r.out.rsplit("/", 1)[-1] for c, r in budget_pairs(sens + main)}
    assert pairs == {"arbiter-750": "arbiter-500", "flat-retrieval-750": "flat-retrieval-500",
                     "arbiter-150": "arbiter-500", "flat-retrieval-150": "flat-retrieval-500",
                     "arbiter-250": "arbiter-500", "flat-retrieval-250": "flat-retrieval-500"}
    # without a 500 run, the smallest budget is the reference (as before the sensitivity runs)
    only = arbiter_configs("smollm2-135m-alfworld", "valid_unseen", "0:4", 50, "/r", budgets=(750, 1000), ablations=())
    assert {c.out.rsplit("/", 1)[-1]: r.out.rsplit("/", 1)[-1] for c, r in budget_pairs(only)} == {
        "arbiter-1000": "arbiter-750", "flat-retrieval-1000": "flat-retrieval-750"}


def test_the_budget_sensitivity_table_pairs_each_budget_with_500_on_the_slice():
    from workbench.memory.trajectory import Step, Trajectory
    from workbench.studies.arbiter_tables import budget_sensitivity

    def run(memory, budget, outcomes, sizes, ablation=None):
        trajs = [Trajectory(task_id=t, goal="g", success=ok, steps=(Step(observation="o", action="look"),),
                            meta={"steps": [{"wm": {"o200k": sizes[t]}, "arbiter": {"cut": sizes[t] == budget}}]})
                 for t, ok in outcomes.items()]
        return trajs, {}, {"run": {"memory": memory, "budget": budget, "ablation": ablation}}

    big = {"t1": 120, "t2": 300, "t3": 140, "t4": 90}
    runs = {
        "arbiter-500": run("arbiter", 500, {"t1": True, "t2": True, "t3": False, "t4": True}, big),
        "arbiter-750": run("arbiter", 750, {"t1": True, "t2": True, "t3": False, "t4": True}, big),
        "arbiter-150": run("arbiter", 150, {"t1": True, "t2": False}, {"t1": 120, "t2": 150}),  # t2's block cut
        "flat-recency-500": run("flat-recency", 500, {"t1": False, "t2": False}, big),  # not a budget-adopting method
        "arbiter-no-gate-500": run("arbiter", 500, {"t1": False, "t2": False}, big, ablation="no-gate"),
    }
    table = budget_sensitivity(runs, ["arbiter-150"])
    assert list(table.index) == ["arbiter-150", "arbiter-500", "arbiter-750"]  # the slice's tasks: t1, t2
    assert table["tasks"].tolist() == [2, 2, 2]
    assert table.loc["arbiter-150", "success_%"] == 50 and table.loc["arbiter-500", "success_%"] == 100
    row = table.loc["arbiter-150"]
    assert (row["diff_vs_500_pp"], row["only_this"], row["only_500"]) == (-50, 0, 1)
    assert row["same_episode_as_500_%"] == 50 and row["max_P_t_o200k"] == 150 and row["steps_with_items_cut"] == 0.5
    assert table.loc["arbiter-750", "same_episode_as_500_%"] == 100 and table.loc["arbiter-750", "p_mcnemar"] == 1
    assert table.loc["arbiter-500", "max_P_t_o200k"] == 300  # t3, t4 are off the slice

    from workbench.viz import budget_curve_figure

    fig = budget_curve_figure(table)
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == [150, 500, 750] and list(line.get_ydata()) == [50, 100, 100]


@pytest.mark.game
def test_the_analyses_beyond_the_paper_resume_from_their_cache(tiny_lm, tmp_path, monkeypatch):
    """Item attention and band switches keep each task's result: a second render reads them (nothing is played or
    re-scored) and summarises them exactly as the first did."""
    import workbench.studies.band_switches as band_switch_study
    import workbench.studies.item_attention as item_study
    from workbench.attention.items import focal_vs_ambient
    from workbench.studies.band_switches import band_switches, summarize_band_switches
    from workbench.studies.item_attention import item_attention

    heads = [(0, 0), (1, 3)]
    rows, trajs = item_attention(tiny_lm, heads, "valid_unseen", "0:1", max_steps=3, cache_dir=tmp_path)
    switches = band_switches(tiny_lm, "valid_unseen", "0:1", steps_per_task=2, cache_dir=tmp_path)
    assert rows and switches and len(trajs) == 1

    def played(*a, **k):
        raise AssertionError("computed again")

    monkeypatch.setattr(item_study, "episode_item_utilization", played)
    monkeypatch.setattr(band_switch_study, "band_switch_effects", played)
    rows2, trajs2 = item_attention(tiny_lm, heads, "valid_unseen", "0:1", max_steps=3, cache_dir=tmp_path)
    switches2 = band_switches(tiny_lm, "valid_unseen", "0:1", steps_per_task=2, cache_dir=tmp_path)
    assert focal_vs_ambient(rows2) == focal_vs_ambient(rows)
    assert summarize_band_switches(switches2) == summarize_band_switches(switches)
    assert [s.action for s in trajs2[0].steps] == [s.action for s in trajs[0].steps]
    assert trajs2[0].meta["steps"] == json.loads(json.dumps(trajs[0].meta["steps"]))
    with pytest.raises(AssertionError, match="computed again"):  # other parameters: not the cached result
        band_switches(tiny_lm, "valid_unseen", "0:1", steps_per_task=3, cache_dir=tmp_path)


def test_the_written_action_reference_row_is_measured_on_the_methods_common_failure_tasks():
    """``none-verbatim`` sits beside the three methods on their common-failure tasks and defines none of them: a
    task only the reference failed on is not common."""
    from workbench.memory.trajectory import Step, Trajectory
    from workbench.studies.arbiter_tables import verbatim_behaviour_table

    def ep(task, actions, observations):
        return Trajectory(task_id=task, goal="g", success=False, meta={"final_observation": "ok"},
                          steps=tuple(Step(observation=o, action=a) for a, o in zip(actions, observations)))

    nothing = "Nothing happens."
    fail = lambda t: ep(t, ["open x", "open x", "look"], ["start", nothing, nothing])  # noqa: E731
    fine = lambda t: ep(t, ["look", "look"], ["start", "room"])  # noqa: E731
    runs = {m: [fail("t1"), fine("t2")] for m in ("arbiter-500-verbatim", "flat-retrieval-500-verbatim",
                                                  "flat-recency-500-verbatim")}
    runs["none-verbatim"] = [ep("t1", ["open x", "look", "look"], ["start", nothing, "room"]), fail("t2")]
    table = verbatim_behaviour_table(runs)
    assert set(table["common_failure_tasks"]) == {1}  # t1 alone: t2 failed only for the reference
    assert table.loc["none-verbatim", "failed_action_repetition"] == 0.0  # on t1 it did not repeat
    assert table.loc["arbiter-500-verbatim", "failed_action_repetition"] == 0.5
    assert "none-verbatim" not in table.loc["none-verbatim", "common_failure_of"]
