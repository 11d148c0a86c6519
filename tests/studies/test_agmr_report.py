"""Notebook 04's report: the refinement tables, Table 1 / Table 2 pages as the notebook wrote them, the captions."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
from study_builders import outcomes, run

from workbench.studies import agmr_report as ag

SETTING = ag.AgmrSetting("valid_seen", "all", "valid_unseen", "all", 50, "full", "offline-alfworld", True)


def stats(commits: dict) -> dict:
    base = {k: i for i, k in enumerate(ag.REFINEMENT_KEYS)}
    return {**base, "commits": sum(commits.values()), "entries_refined": sum(commits.values()), "entries_before": 200,
            "commits_by_branch_pattern": commits, "outcomes": {}, "failure_patterns": {}, "failure_rule_patterns": {}}


def test_refinement_tables():
    s = {"agmr": stats({"failure/missed_relevant": 2, "failure/attended_but_wrong": 1}),
         "agmr-no-agr": {**stats({"failure/edit": 3}), "config": {"reflector_sees_plan": False}}}
    table = ag.refinement_table(s, "offline-alfworld")
    assert list(table.columns) == ["backend", "reflector", *ag.REFINEMENT_KEYS]
    assert list(table.index) == ["agmr", "agmr-no-agr"]
    # a base without the parameter predates it: its reflector read the plan
    assert list(table["reflector"]) == ["sees the expert plan (oracle)", "m*, tau only (paper)"]
    commits = ag.commits_by_pattern(s)
    assert commits.loc["failure/edit", "agmr"] == 0 and commits.loc["failure/missed_relevant", "agmr"] == 2
    assert set(ag.refinement_metrics(s)["refinement"]["agmr"]) == {*ag.REFINEMENT_KEYS, "outcomes",
                                                                   "commits_by_branch_pattern", "failure_patterns",
                                                                   "failure_rule_patterns"}
    caption = ag.refinement_caption(table, SETTING)
    assert "`agmr` committed 3 edits (3 of 200 entries refined)" in caption and "No edit" not in caption
    none = ag.refinement_table({"agmr": stats({})}, "offline-alfworld")
    assert ag.refinement_caption(none, SETTING).endswith("No edit was verified: every refined base is the default one.")
    caption = ag.commits_caption(commits)
    assert "`agmr`: 2 of 3 on `failure/missed_relevant`." in caption and "No success-branch pruning" in caption
    assert ag.refined_bases("/r", "m", ["no-agr"]) == {"agmr-no-agr": "/r/m/bases/no-agr"}


def evaluation() -> dict:
    return {"none": run(outcomes(20, {0}), adopted=[{"episodes": 20, "source": "../../01/none"}]),
            "traj": run(outcomes(20, set(range(10)))),
            "agmr": run(outcomes(20, set(range(10))), adopted=[{"episodes": 18, "rule": "same memory",
                                                                "source": "../traj"}]),
            "agmr-no-agr": run(outcomes(20, set(range(9)) | {15}))}


def test_table_pages_note_every_adoption_and_say_when_agmr_is_traj():
    table1, table2 = ag.table_pages(evaluation(), SETTING, ["none", "traj"])
    assert table1.conds == ("none", "traj", "agmr") and table1.pairs == (("agmr", "traj"), ("traj", "none"))
    assert table1.title == "AGMR Table 1 (valid_unseen, all)"
    assert table1.command == "make reproduce (notebook 04, profile full; LLM stages: offline-alfworld)"
    assert table1.notes == (
        "Refined on valid_seen all with the LLM stages on `offline-alfworld` (the deterministic offline algorithm, "
        "which reads each refinement task's expert plan); episodes limited to 50 steps. `none`: 20 episodes read from "
        "`../../01/none` (the same parameters). `agmr`: 18 episodes are Traj's (the refinement left their memory the "
        "same at every step).") == table2.notes
    assert "`agmr` 50.0% vs `traj` 50.0%: the same tasks solved" in table1.caption
    assert "18 of `agmr`'s 20 episodes are Traj's" in table1.caption
    assert table1.caption.endswith("`traj` and `agmr` succeed on exactly the same tasks.")
    assert table2.conds == ("agmr-no-agr", "agmr") and table2.pairs == (("agmr", "agmr-no-agr"),)
    assert "The refiner leaves the success rate unchanged here." in table2.caption
    online = ag.AgmrSetting("valid_seen", "0:2", "valid_unseen", "0:2", 5, "default", "openai")
    assert "deterministic" not in ag.table_pages(evaluation(), online, ["none", "traj"])[0].notes
    assert "sees m* and tau only, as in the paper" in ag.table_pages(evaluation(), online, ["none", "traj"])[0].notes
    paper = ag.AgmrSetting("valid_seen", "0:2", "valid_unseen", "0:2", 5, "default", "offline-alfworld")
    assert "the memory's own actions as its reference" in ag.table_pages(evaluation(), paper, ["none"])[0].notes


def test_scenario_captions():
    table = pd.DataFrame({"n": [3, 5], "traj": [0.5, 0.6], "agmr": [0.5, 0.4]},
                         index=["missed_relevant", "not refined"])
    assert ag.scenario_caption(table, "valid_unseen").endswith("AGMR equals Traj in `missed_relevant`.")
    assert ag.scenario_figure_caption(table).endswith("differs from Traj's only in `not refined`.")
    same = table.assign(agmr=table["traj"])
    assert ag.scenario_caption(same, "valid_unseen").endswith(": in every group.")
    assert ag.scenario_figure_caption(same).endswith("AGMR's bars are Traj's in every group.")


def test_figure_captions():
    rec = lambda p, q: SimpleNamespace(branch="failure", final_pattern=p, final_rule_pattern=q)  # noqa: E731
    records = [rec("missed_relevant", "missed_relevant"), rec("attended_but_wrong", None),
               SimpleNamespace(branch="success", final_pattern=None, final_rule_pattern=None)]
    caption = ag.scenario_distribution_caption(records)
    assert caption.startswith("Figure 9: how the 2 failed refinement tasks")
    assert "attended but wrong 1 / 0, missed relevant 1 / 1" in caption
    assert caption.endswith("1 tasks have no diagnosis.")
    agree = [rec("missed_relevant", "missed_relevant")]
    assert "by construction" in ag.scenario_distribution_caption(agree, "offline-alfworld")
    assert "by construction" not in ag.scenario_distribution_caption(agree, "openai")
    record = SimpleNamespace(task_id="valid_seen/x", branch="failure", committed_pattern="missed_relevant",
                             first_rule_pattern="missed_relevant", entry_id="e1")
    case = {"record": record, "before": SimpleNamespace(success=False, critical_step=3),
            "after": SimpleNamespace(success=True, critical_step=None), "segments": (4, 4)}
    caption = ag.case_caption(case)
    assert "`valid_seen/x` (failure branch, missed_relevant, entry `e1`)" in caption
    assert "left: failure, 4 segments" in caption and "the corrected action was never taken" in caption
    pruned = {**case, "record": SimpleNamespace(**{**vars(record), "branch": "success", "committed_pattern": None,
                                                   "first_rule_pattern": None}), "segments": (5, 4)}
    assert "pruned m' (right: success, 4 segments)" in ag.case_caption(pruned)
