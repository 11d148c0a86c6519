"""Notebook 05's run grid: every method at every budget and the ablations at 500, on one set of tasks."""

from __future__ import annotations

from workbench.methods.arbiter.experiments import arbiter_configs, behaviour_table, condition_name


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
    from workbench.methods.arbiter.experiments import common_failure_sets

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
