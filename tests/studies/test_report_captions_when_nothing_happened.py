"""Every caption over the frames a one-task, three-step render makes (the smoke profile): empty studies, rates of
nothing. A caption then says that nothing was there to measure; it never fails or prints ``nan``."""

from __future__ import annotations

import pandas as pd
import pytest
from study_builders import outcomes, run

from workbench.studies import agmr_report as ag
from workbench.studies import arbiter_report as ar
from workbench.studies import proactive_report as pr

NAN = float("nan")


def states_table(index, columns, **attrs):
    table = pd.DataFrame({"states": [0] * len(index), **{c: [NAN] * len(index) for c in columns}}, index=index)
    table.attrs.update(attrs)
    return table


CASES = {
    "failure ablation": (ar.failure_ablation_caption, states_table(
        ["as shown", "no constraint", "neither"], ["repeats_failed", "changed_vs_shown"]), "nothing to score"),
    "first step": (ar.first_step_caption, pd.DataFrame(
        {"states": [1, 0, 1, 0], "keeps": [1.0, NAN, 1.0, NAN], "reverts": [0.0, NAN, 0.0, NAN]},
        index=["as shown|all", "as shown|won", "no goal|all", "no constraint|all"]), "At the 1 states"),
    "focal vs ambient": (ar.focal_vs_ambient_caption, pd.DataFrame(
        {"steps": [0.0, 0.0], "focal_higher": [NAN, NAN]}, index=["goal", "reference"]), "no comparison"),
    "loop switch": (ar.loop_switch_caption, pd.DataFrame(
        [{"states": 0, "replayed_same": 0, "with_hidden_episodic": 0, "p_chosen": None, "p_chosen_shown": None,
          "flipped": None, "leaves_loop": None}], index=["arbiter-500"]), "(0 states had one)"),
    "band switches": (ar.band_switch_caption, pd.DataFrame(columns=["n", "mean_delta_p", "flipped"]), "flips"),
    "verbatim table 5": (ar.verbatim_table5_caption, pd.DataFrame(
        {"common_failure_tasks": [0, 0], "failed_action_repetition_own": [NAN, 0.0]},
        index=["arbiter-500-verbatim", "none-verbatim"]), "common-failure columns are empty"),
    "warning pull": (pr.warning_pull_caption, states_table(
        ["as played", "unnamed", "without"], ["pulled vs without", "pushed vs without", "p_mcnemar"],
        replayed_same=0).assign(episodes=0), "nothing to score"),
    "reminder quote": (pr.reminder_quote_caption, states_table(
        ["as played", "unquoted", "placebo", "without"], ["repeats the failed command"], replayed_same=0),
        "nothing to score"),
    "spoken tasks": (pr.spoken_caption, pd.DataFrame(
        {"tasks": [1], "shown something": [0], "success_% where shown": [NAN], "none success_% there": [NAN],
         "only this": [0], "only none": [0], "p_mcnemar": [1.0]}, index=["proactive"]), "showed nothing"),
    "interventions": (pr.interventions_caption, pd.DataFrame(
        {"silence_rate": [NAN, 1.0], "mean Δp(action)": [NAN, NAN], "changed": [NAN, NAN]},
        index=["none", "proactive"]), "No reminder was re-scored"),
    "reminder kinds": (pr.kinds_caption, pd.DataFrame(), "The re-scored reminders by kind"),
    "written actions": (pr.written_caption, pd.DataFrame(
        {"reminders after a failure": [0, 0], "repeats the failed command with the reminder": [NAN, NAN],
         "without it": [NAN, NAN]}, index=["none-verbatim", "proactive-verbatim"]), "Per written-action run"),
    "scenario": (lambda t: ag.scenario_caption(t, "valid_unseen"), pd.DataFrame(
        {"n": [1], "traj": [0.0], "agmr": [0.0]}, index=["not refined"]), ": in every group."),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_caption_of_nothing_says_so(name):
    caption_of, table, expected = CASES[name]
    caption = caption_of(table)
    assert expected in caption and "nan" not in caption.lower()


def test_pages_over_one_unsolved_task():
    nothing = {c: run(outcomes(1, set()), c.rsplit("-", 1)[0], int(c.rsplit("-", 1)[1]))
               for c in ar.table2_conditions([500, 750]) + ["arbiter-no-gate-500"]}
    setting = ar.ArbiterSetting("valid_unseen", "0:1", 3, "smoke")
    for page in (ar.table2_page(nothing, setting, [500, 750]), ar.table4_page(nothing, setting, ["no-gate"])):
        assert "nan" not in page.caption.lower() and "the same tasks" in page.caption
    page = ar.reference_page(nothing, run(outcomes(1, set())), setting, [500])
    assert page.caption.endswith("Not distinguishable from it: `arbiter-500`, `flat-retrieval-500` and "
                                 "`flat-recency-500`.")
    assert "`arbiter-500` and `arbiter-750` are one curve" in ar.sr_at_k_caption(
        {"arbiter-500": {"5": 0.0}, "arbiter-750": {"5": 0.0}, "none": {"5": None}})
    agmr = {"none": run(outcomes(1, set())), "traj": run(outcomes(1, set())), "agmr": run(outcomes(1, set()))}
    table1, table2 = ag.table_pages(agmr, ag.AgmrSetting("valid_seen", "0:1", "valid_unseen", "0:1", 3, "smoke",
                                                          "offline-alfworld"), ["none", "traj"])
    assert "the same tasks solved" in table1.caption and table2.conds == ("agmr",)
