"""What links the test set to the refinement: scenario groups, success by group (Figure 7), the share of test
episodes shown a refined entry, Figure 6's before/after cases and Figure 9."""

from __future__ import annotations

import pytest
from agmr_builders import (
    RIGHT,
    TASK,
    WRONG,
    ScriptedRefiner,
    entry,
    make_base,
    trajectory,
)

from workbench.envs.base import Task
from workbench.memory.trajectory import append_jsonl
from workbench.methods.agmr import recorded_verifier
from workbench.methods.agmr.refine_config import RefineConfig
from workbench.methods.agmr.refine_folder import load_log, prepare, refine_paths
from workbench.studies.agmr_grids import agmr_configs
from workbench.studies.agmr_scenarios import (
    refined_share,
    refinement_cases,
    scenario_groups,
    success_by_scenario,
)
from workbench.viz import (
    refinement_case_figure,
    scenario_distribution_figure,
    scenario_success_figure,
)

OTHER = Task("valid_seen/cup/t3", "valid_seen", "pick", "/none")  # a game of its own


@pytest.fixture
def refined(tmp_path):
    make_base(tmp_path).add_many([entry("valid_train/egg/t3", "put a egg in microwave."),
                                  entry("valid_train/pen/t4", "put a pen in drawer.")])  # BM25 needs an idf
    root = tmp_path / "refined"
    base, _ = prepare(root, RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source")))
    _, log_path, exec_path = refine_paths(root)
    for task, goal, script in ((TASK, "put a apple in fridge.", [(False, WRONG, None), (True, RIGHT, None)]),
                               (OTHER, "put a mug in desk.", [(True, RIGHT, None), (True, RIGHT, None)])):
        r = ScriptedRefiner(base, script)
        r.on_execution = lambda e: append_jsonl(exec_path, e)
        append_jsonl(log_path, r.refine_task(task, goal))
    return root


def _episode(task_id, entry, success):
    t = trajectory(RIGHT if success else WRONG, success)
    return t.model_copy(update={"task_id": task_id, "meta": {"memory_entry": entry}})


def test_groups_shares_and_success_by_scenario(refined):
    groups = scenario_groups(refined)
    assert groups == {"valid_train/tomato/t1": "attended_but_wrong", "valid_train/mug/t2": "success-only"}
    traj = [_episode("u/1", "valid_train/tomato/t1", False), _episode("u/2", "valid_train/tomato/t1", False),
            _episode("u/3", "valid_train/mug/t2", True), _episode("u/4", None, False)]
    agmr = [_episode("u/1", "valid_train/tomato/t1", True), *traj[1:]]
    table = success_by_scenario({"traj": traj, "agmr": agmr}, groups)
    assert table.loc["attended_but_wrong", "n"] == 2
    assert (table.loc["attended_but_wrong", "traj"], table.loc["attended_but_wrong", "agmr"]) == (0.0, 0.5)
    assert table.loc["no memory", "n"] == 1
    share = refined_share(agmr, refined)
    assert share == {"episodes": 4, "shown_refined_entry": 3, "share": 0.75, "entries_refined": 2}


def test_figure_6_cases_mark_the_critical_step_before_and_the_expected_use_after(refined):
    cases = refinement_cases(refined)
    fail = next(c for c in cases if c["record"].branch == "failure")
    assert (fail["before"].critical_step, fail["before"].ideal_segment, fail["before"].pattern) == (
        1, 1, "attended_but_wrong")
    assert fail["after"].critical_step == 1 and fail["after"].success  # 'take apple 1 ...' taken at u1
    prune = next(c for c in cases if c["record"].branch == "success")
    assert prune["segments"] == (6, 5)
    for c in cases:
        fig = refinement_case_figure(c)
        assert len(fig.axes) >= 2
    fig = scenario_distribution_figure(load_log(refined))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][0] == "1: attended but wrong"
    table = success_by_scenario({"traj": [_episode("u/1", "valid_train/tomato/t1", False)]}, scenario_groups(refined))
    assert scenario_success_figure(table).axes


def test_the_recorded_verifier_returns_the_verification_on_record_and_refuses_an_unplayed_candidate(refined):
    from workbench.methods.agmr.refine_folder import load_executions

    verify = recorded_verifier(refined)
    cand = next(e for e in load_executions(refined) if e.candidate and e.task_id == TASK.task_id)
    assert verify(TASK.task_id, cand.memory).id == cand.id
    with pytest.raises(KeyError, match="no verification of this candidate"):
        verify(TASK.task_id, cand.memory.model_copy(update={"segments": cand.memory.segments[:2]}))


def test_table_1_conditions_share_tasks_model_and_dtype(tmp_path, refined):
    cfgs = agmr_configs("smollm2-135m-alfworld", "valid_unseen", "0:5", 50, tmp_path / "runs", {"agmr": str(refined)})
    assert [c.method for c in cfgs] == ["none", "icl", "awm", "dc-rs", "traj", "traj[refined]"]
    assert {(c.tasks, c.model, c.dtype, c.max_steps) for c in cfgs} == {("0:5", "smollm2-135m-alfworld", "float32", 50)}
    assert cfgs[-1].out.endswith("smollm2-135m-alfworld/agmr") and cfgs[2].backend == "offline-alfworld"
