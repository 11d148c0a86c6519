"""Notebook 06's report: the pages' notes and pairs as the notebook wrote them, and captions that say the nulls."""

from __future__ import annotations

import pandas as pd
from study_builders import outcomes, run

from workbench.studies import proactive_report as pr

SETTING = pr.ProactiveSetting("valid_unseen", "all", 50, "full")


def conditions() -> dict:
    silent = [{"episodes": 4, "rule": "same memory", "source": "../none"}]
    return {"none": run(outcomes(30, set(range(10))), adopted=[{"episodes": 30, "source": "../../01/none"}]),
            "proactive": run(outcomes(30, set(range(9))), "proactive", adopted=silent),
            "proactive-passive": run(outcomes(30, set()), "proactive-passive"),
            "proactive-advisor": run(outcomes(30, set(range(9))), "proactive-advisor", adopted=silent)}


def test_conditions_page_is_the_notebooks_and_says_which_conditions_are_one():
    page = pr.conditions_page(conditions(), SETTING)
    assert page.title == "Proactive memory agent (valid_unseen, all)" and page.conds[0] == "none"
    assert page.pairs == (("proactive", "none"), ("proactive", "proactive-passive"),
                          ("proactive", "proactive-advisor"), ("proactive-passive", "none"),
                          ("proactive-advisor", "none"))
    assert page.notes == (
        "ReAct layout with the full history; memory agent on `offline-alfworld`, triggered at step 0 and every 1 "
        "step(s); episodes limited to 50 steps. `none`: 30 episodes read from notebook 01's run of the same "
        "parameters. `proactive`: on 4 tasks the memory agent stayed silent throughout, so the prompts were ReAct's at "
        "every step and the episode is `none`'s (adopted, not played). `proactive-advisor`: on 4 tasks the memory "
        "agent stayed silent throughout, so the prompts were ReAct's at every step and the episode is `none`'s "
        "(adopted, not played).")
    assert "`proactive` -3.3 pts (p = 1, not significant)" in page.caption
    assert "`proactive-passive` -33.3 pts (p = 0.002)" in page.caption
    assert page.caption.endswith("`proactive` and `proactive-advisor` succeed on exactly the same tasks.")
    triggered = pr.ProactiveSetting("valid_unseen", "all", 50, "full", interval=2, triggers=("failure",))
    assert "every 2 step(s) and on failure;" in pr.conditions_page(conditions(), triggered).notes


def test_verbatim_page():
    vruns = {"none-verbatim": run(outcomes(5, {0})),
             "proactive-verbatim": run(outcomes(5, {1}), "proactive",
                                       adopted=[{"episodes": 2, "rule": "same memory", "source": "../none-verbatim"}])}
    page = pr.verbatim_page(vruns, SETTING, "0:134:7")
    assert page.pairs == (("proactive-verbatim", "none-verbatim"),)
    assert page.notes.endswith("`proactive-verbatim`: on 2 tasks the memory agent stayed silent throughout, so the "
                               "episode is `none-verbatim`'s (adopted, not played).")
    assert "actions written by the agent and executed as written" in page.notes
    assert "`proactive-verbatim` +0.0 pts (p = 1, not significant)" in page.caption


def test_interventions_caption_says_how_little_p_moves_or_that_there_is_no_distribution():
    scored = pd.DataFrame({"silence_rate": [float("nan"), 0.58], "mean Δp(action)": [float("nan"), -0.001],
                           "changed": [float("nan"), 0.41]}, index=["none", "proactive"])
    caption = pr.interventions_caption(scored)
    assert "within ±0.001 in every condition" in caption and "silent at 58.0%" in caption
    written = pd.DataFrame({"silence_rate": [0.6], "mean Δp(action)": [None], "changed": [0.6]},
                           index=["proactive-verbatim"])
    assert "no distribution to compare" in pr.interventions_caption(written)


def test_spoken_and_kinds_captions():
    spoken = pd.DataFrame({"tasks": [30, 30], "shown something": [20, 30], "success_% where shown": [10.0, 0.0],
                           "none success_% there": [12.0, 30.0], "only this": [2, 0], "only none": [3, 9],
                           "p_mcnemar": [1.0, 0.004]}, index=["proactive", "proactive-passive"])
    caption = pr.spoken_caption(spoken)
    assert "Significantly below it there: `proactive-passive`." in caption
    assert "Not distinguishable from it there: `proactive`." in caption
    assert "showed something on 20 of 30 tasks (10.0% vs 12.0% for `none`" in caption
    kinds = pd.DataFrame({"share": [0.9, 0.1, 0.2, 0.8], "mean TV": [None] * 4},
                         index=pd.MultiIndex.from_tuples([("p", "warning"), ("p", "fact"), ("q", "directive"),
                                                          ("q", "fact")]))
    caption = pr.kinds_caption(kinds)
    assert "Mostly: `p` 90.0% warnings, `q` 80.0% facts." in caption and "Mean TV is empty" in caption


def test_warning_pull_caption_decides_whether_naming_pulls():
    table = pd.DataFrame({"states": [40, 40, 40], "episodes": [5, 5, 5], "pulled vs without": [12, 14, 0],
                          "pushed vs without": [2, 1, 0], "p_mcnemar": [0.01, 0.001, None]},
                         index=["as played", "unnamed", "without"])
    table.attrs["replayed_same"] = 39
    caption = pr.warning_pull_caption(table)
    assert "(40 states of 5 episodes; 39 replayed to the recorded action)" in caption
    assert caption.endswith("naming the command is not what pulls.")
    table.loc["unnamed", ["pulled vs without", "p_mcnemar"]] = [3, 0.6]
    assert pr.warning_pull_caption(table).endswith("naming the command is what pulls.")
    table.loc["as played", "p_mcnemar"] = 0.3  # as played not significant: no cause read into it
    assert pr.warning_pull_caption(table).endswith("nothing to attribute to naming the command.")
    table.loc["as played", ["pulled vs without", "pushed vs without", "p_mcnemar"]] = [1, 12, 0.01]
    assert pr.warning_pull_caption(table).endswith("pushes away from the warned commands.")


def test_reminder_quote_caption_decides_whether_the_quote_is_copied():
    table = pd.DataFrame({"states": [30, 30, 30, 30], "repeats the failed command": [0.4, 0.5, 0.2, 0.1]},
                         index=["as played", "unquoted", "placebo", "without"])
    caption = pr.reminder_quote_caption(table)
    assert "`as played` 40.0%, `unquoted` 50.0%, `placebo` 20.0%, `without` 10.0%." in caption
    assert caption.endswith("the quote alone does not explain the repetition.")
    table.loc["unquoted", "repeats the failed command"] = 0.12
    assert pr.reminder_quote_caption(table).endswith("the quote is what the agent copies.")
    table["states"] = 3
    assert pr.reminder_quote_caption(table).endswith("3 states are too few to say whether the quote or the warning "
                                                     "is copied.")


def test_written_caption_and_metrics():
    written = pd.DataFrame({"common (3 tasks): one_step_recovery": [0.5, 0.4], "reminders after a failure": [0, 12],
                            "repeats the failed command with the reminder": [None, 0.5], "without it": [None, 0.25]},
                           index=["none-verbatim", "proactive-verbatim"])
    caption = pr.written_caption(written)
    assert "every run failed a command on (3 tasks)" in caption
    assert caption.endswith("`proactive-verbatim`: 50.0% with the reminder, 25.0% without it, over 12 steps.")
    table = pd.DataFrame({"states": [3]})
    table.attrs["replayed_same"] = 2
    assert pr.state_metrics([{}, {}, {}, {}], table) == {"states": 4, "replayed_same": 2}
    runs = conditions()
    metrics = pr.condition_metrics(runs, {"steps": 3, "rows": [1, 2]})
    assert metrics["reminder_attention"] == {"steps": 3} and set(metrics["conditions"]) == set(runs)
    assert list(pr.reminder_summary({"steps": 3, "rows": []}).index) == ["proactive"]
