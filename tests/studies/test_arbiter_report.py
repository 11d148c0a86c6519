"""Notebook 05's report: the pages' notes and pairs as the notebook wrote them, and captions that say the nulls."""

from __future__ import annotations

import pandas as pd
import pytest
from study_builders import outcomes, run

from workbench.studies import arbiter_report as ar

SETTING = ar.ArbiterSetting("valid_unseen", "all", 50, "full")


def grid(same_750: bool = True) -> dict:
    """The grid at 500 and 750 with one ablation: MemArbiter ahead of both flat baselines; 750 adopted from 500."""
    adopted = [{"episodes": 3, "rule": "same memory", "source": "../arbiter-500"},
               {"episodes": 2, "rule": "same memory", "source": "../arbiter-500"}]
    return {"arbiter-500": run(outcomes(30, set(range(20))), "arbiter", 500),
            "flat-retrieval-500": run(outcomes(30, {0}), "flat-retrieval", 500),
            "flat-recency-500": run(outcomes(30, {1}), "flat-recency", 500),
            "arbiter-750": run(outcomes(30, set(range(20)) if same_750 else set(range(5))), "arbiter", 750,
                               adopted=adopted),
            "flat-retrieval-750": run(outcomes(30, {2}), "flat-retrieval", 750),
            "flat-recency-750": run(outcomes(30, {1, 3}), "flat-recency", 750),
            "arbiter-no-gate-500": run(outcomes(30, set(range(18))), "arbiter", 500)}


def test_setting_notes_are_the_notebooks():
    assert SETTING.command == "make reproduce (notebook 05, profile full)"
    assert SETTING.notes == ("Working-memory layout (goal, P_t, current observation); state parser and writer on "
                             "`offline-alfworld`; actions decoded `score`; episodes limited to 50 steps.")
    assert ar.table2_conditions([500]) == ["arbiter-500", "flat-retrieval-500", "flat-recency-500"]
    assert ar.ablation_conditions(["no-gate"]) == ["arbiter-500", "arbiter-no-gate-500"]


def test_table2_page_notes_the_adopted_episodes_and_says_750_is_500():
    page = ar.table2_page(grid(), SETTING, [500, 750])
    assert page.name == "arbiter_table2_valid_unseen" and page.title == "MemArbiter Table 2 (valid_unseen, all)"
    assert page.conds == tuple(ar.table2_conditions([500, 750]))
    assert page.pairs == (("arbiter-500", "flat-retrieval-500"), ("arbiter-500", "flat-recency-500"),
                          ("arbiter-750", "flat-retrieval-750"), ("arbiter-750", "flat-recency-750"))
    assert page.notes == SETTING.notes + (" `arbiter-750`: 5 episodes are `arbiter-500`'s, whose memory was the same "
                                          "at every step (the budget did not bind): adopted, not played.")
    assert "MemArbiter is ahead in every pair" in page.caption
    assert "`arbiter-500` and `arbiter-750` succeed on exactly the same tasks" in page.caption
    other = ar.table2_page(grid(same_750=False), SETTING, [500, 750]).caption
    assert "exactly the same" not in other and "not significant" in other  # 750 no longer ahead of its baselines


def test_reference_page_reads_notebook_01_and_sorts_the_methods_around_it():
    reference = run(outcomes(30, set(range(8))), adopted=[{"episodes": 30, "source": "../../01/none"}])
    page = ar.reference_page(grid(), reference, SETTING, [500])
    assert page.conds == ("none", "arbiter-500", "flat-retrieval-500", "flat-recency-500")
    assert page.pairs == (("arbiter-500", "none"), ("flat-retrieval-500", "none"), ("flat-recency-500", "none"))
    assert page.notes.endswith("`none`: the action agent alone, the raw history in its prompt (ReAct layout, no P_t); "
                               "30 episodes read from notebook 01's run of the same parameters.")
    assert "Significantly above it: `arbiter-500`; significantly below it: `flat-retrieval-500` and " \
           "`flat-recency-500`." in page.caption
    assert ar.reference_page(grid(), run(outcomes(30, {0})), SETTING, [500]).notes.endswith("(ReAct layout, no P_t).")


def test_table4_and_its_sr_table():
    runs = grid()
    page = ar.table4_page(runs, SETTING, ["no-gate"])
    assert page.pairs == (("arbiter-500", "arbiter-no-gate-500"),) and page.notes == SETTING.notes
    assert "`arbiter-no-gate-500` -6.7 pts (p = 0.5, not significant)" in page.caption
    sr = ar.table4_sr(runs, ["no-gate"])
    assert list(sr.columns) == ["success_%", "SR@15_%", "SR@50_%", "Δ success (pts)"]
    assert sr.loc["arbiter-no-gate-500", "Δ success (pts)"] == pytest.approx(-20 / 3)
    caption = ar.table4_sr_caption(sr)
    assert caption.endswith("`arbiter-no-gate-500` costs the most (-6.7 pts).")


def test_verbatim_page_says_the_actions_are_written_and_where_the_reference_came_from():
    vruns = {"arbiter-500-verbatim": run(outcomes(4, {0}), "arbiter", 500),
             "flat-retrieval-500-verbatim": run(outcomes(4, set()), "flat-retrieval", 500),
             "flat-recency-500-verbatim": run(outcomes(4, set()), "flat-recency", 500),
             "none-verbatim": run(outcomes(4, {0}), adopted=[{"episodes": 4, "source": "../../06/none-verbatim"}])}
    page = ar.verbatim_page(vruns, SETTING, "0:134:7")
    assert "actions written by the agent and executed as written" in page.notes and "decoded" not in page.notes
    assert page.notes.endswith("`none-verbatim`: the action agent alone, its raw history in the prompt (ReAct "
                               "layout), written too; read from notebook 06's run of the same parameters.")
    assert page.pairs[-1] == ("arbiter-500-verbatim", "none-verbatim")
    assert page.title == "MemArbiter with written actions (valid_unseen, 0:134:7)"
    assert "`none-verbatim` the same tasks solved" in page.caption


def test_a_block_over_its_budget_is_an_error():
    table = pd.DataFrame({"max_P_t_o200k": [490.0, float("nan"), 510.0]}, index=["a-500", "none", "b-500"])
    ar.check_budgets(table, {"a-500": 500, "none": None})
    with pytest.raises(ValueError, match="b-500: 510.0 > 500"):
        ar.check_budgets(table, {"a-500": 500, "b-500": 500})


def test_identical_curves_are_one_curve():
    curves = {"arbiter-500": {"5": 0.1, "10": 0.5}, "arbiter-750": {"5": 0.1, "10": 0.5}, "none": {"5": 0.0, "10": 0.2}}
    assert "`arbiter-500` and `arbiter-750` are one curve" in ar.sr_at_k_caption(curves)
    assert "one curve" not in ar.sr_at_k_caption({k: v for k, v in curves.items() if k != "arbiter-750"})


def test_table5_caption_says_a_scoring_agent_fails_nothing():
    table = pd.DataFrame({"failed_executions": [0, 0], "steps_with_items_cut": [float("nan"), 0.0003]},
                         index=["none", "arbiter-500"])
    caption = ar.table5_caption(table, {"arbiter-500": None})
    assert "empty by construction" in caption and "`arbiter-500` <0.1%" in caption
    assert "empty by construction" not in ar.table5_caption(table.assign(failed_executions=[0, 3]), {})


def test_sensitivity_and_budget_curve_captions():
    table = pd.DataFrame({"method": ["arbiter"] * 3, "budget": [150, 500, 750], "tasks": [34] * 3,
                          "success_%": [20.0, 50.0, 50.0], "diff_vs_500_pp": [-30.0, float("nan"), 0.0],
                          "p_mcnemar": [0.002, float("nan"), 1.0], "only_this": [0, None, 0],
                          "only_500": [10, None, 0],
                          "same_episode_as_500_%": [8.8, float("nan"), 100.0]},
                         index=["arbiter-150", "arbiter-500", "arbiter-750"])
    caption = ar.sensitivity_caption(table, "0:134:4")
    assert "on the same 34 tasks (`0:134:4`)" in caption
    assert "`arbiter-150` -30.0 pts (p = 0.002); `arbiter-750` is 500 on every task." in caption
    assert "`arbiter` is flat from 500 tokens up" in ar.budget_curve_caption(table)
    rising = table.assign(**{"success_%": [20.0, 40.0, 50.0]})
    assert "flat" not in ar.budget_curve_caption(rising).split("uncut.")[1]


def test_study_captions_name_what_could_not_be_compared():
    fva = pd.DataFrame({"steps": [0, 38], "focal_higher": [float("nan"), 0.684]}, index=["goal", "reference"])
    caption = ar.focal_vs_ambient_caption(fva)
    assert "`reference` (38 steps): focal items read more per token at 68.4%" in caption
    assert "`goal` never showed both bands at one step: no comparison." in caption
    switches = pd.DataFrame({"n": [10, 4, 6], "mean_delta_p": [0.01, -0.02, 0.0], "flipped": [0.2, 0.5, 0.1]},
                            index=["all|A->H", "reference|A->H", "goal|F->A"])
    assert "`reference|A->H` flips the choice most often (50.0% of 4); the mean change in p(chosen) stays within " \
           "±0.020 in every row." in ar.band_switch_caption(switches)
    loop = ar.loop_switch_table([{"noop": False, "replayed_same": True, "p": 0.1, "p_cf": 0.2, "flipped": True,
                                  "leaves_loop": False}, {"noop": True, "replayed_same": True}])
    assert list(loop.index) == ["arbiter-500"]
    assert "(2 states, 2 replayed to the same choice" in ar.loop_switch_caption(loop)
    assert "from 0.100 as shown to 0.200" in ar.loop_switch_caption(loop)


def test_first_step_and_failure_ablation_captions():
    first = pd.DataFrame({"states": [10, 6, 10, 10, 10], "keeps": [1.0, 1.0, 0.8, 0.5, 0.1],
                          "reverts": [0.0, 0.0, 0.2, 0.4, 0.9]},
                         index=["as shown|all", "as shown|won", "no goal|all", "no reference|all", "react|all"])
    caption = ar.first_step_caption(first)
    assert caption.startswith("At the 10 states") and "as the ReAct prompt 90.0% revert" in caption
    assert "leaving out the reference bank reverts the most (40.0%)" in caption
    fail = ar.failure_ablation_table([{"as shown": "x", "as shown|repeats": True, "no constraint": "y",
                                       "no constraint|repeats": False, "no episodic": "x", "no episodic|repeats": True,
                                       "neither": "y", "neither|repeats": False, "unquoted": "x",
                                       "unquoted|repeats": True}])
    assert fail.loc["as shown", "repeats_failed"] == 1
    caption = ar.failure_ablation_caption(fail)
    assert "As shown it repeats at 100.0%; `no constraint` lowers it most, to 0.0%." in caption


def test_parting_tables_and_rows_by_task():
    runs = grid()
    reference = run(outcomes(30, {25}), actions=("look", "go to desk 1"))  # parts from the methods at step 1
    table = ar.parting_vs_react(runs, reference)
    assert table.index[0] == "arbiter-500|all" and table.loc["arbiter-500|all", "only method"] == 20
    assert table.loc["arbiter-500|all", "only method, parted at 1-3"] == 20
    assert "`arbiter-500` 20 (0) / 1 (0); `flat-retrieval-500` 1 (0) / 1 (0)" in ar.parting_vs_react_caption(table)
    assert ar.rows_by_task([{"task_id": "a", "u": 1}, {"task_id": "b"}, {"task_id": "a", "u": 2}]) == {
        "a": [{"task_id": "a", "u": 1}, {"task_id": "a", "u": 2}], "b": [{"task_id": "b"}]}
