"""The caption sentences: rates, paired verdicts, and the null results a reader would otherwise have to find."""

from __future__ import annotations

import inspect

from study_builders import outcomes, run

from workbench.reporting import write_table
from workbench.studies.captions import (
    adopted_episodes,
    code_list,
    identical_groups,
    identical_sentence,
    paired_sentence,
    pct,
    pts,
    upper_first,
    versus,
)
from workbench.studies.table_pages import TablePage


def test_rates_print_like_the_tables_and_a_small_rate_is_not_zero():
    assert pct(0.537313) == "53.7%" and pct(0) == "0.0%" and pct(None) == "–"
    assert pct(0.000274) == "<0.1%" and pct(1) == "100.0%"
    assert pts(-0.0224) == "-2.2 pts" and pts(0.0) == "+0.0 pts"
    assert upper_first("`a` and b") == "`a` and b" and upper_first("significantly B") == "Significantly B"
    assert code_list(["a"]) == "`a`" and code_list(["a", "b", "c"]) == "`a`, `b` and `c`"


def test_identical_outcomes_are_found_and_said():
    runs = {"a": run(outcomes(6, {0, 1})), "b": run(outcomes(6, {0, 1})), "c": run(outcomes(6, {0, 2})),
            "d": run(outcomes(5, {0, 1}))}  # the same successes on fewer tasks is not the same run
    assert identical_groups(runs, list(runs)) == [["a", "b"]]
    assert identical_sentence(runs, list(runs)) == "`a` and `b` succeed on exactly the same tasks."
    assert identical_sentence(runs, ["a", "c"]) == ""


def test_paired_sentences_state_the_verdict():
    runs = {"a": run(outcomes(20, set(range(12)))), "b": run(outcomes(20, {0})), "c": run(outcomes(20, {1, 2})),
            "d": run(outcomes(20, set(range(12))))}
    assert "11 tasks only `a` solves, 0 only `b`" in paired_sentence(runs, "a", "b")
    assert paired_sentence(runs, "a", "b").endswith("significant)") and "not" not in paired_sentence(runs, "a", "b")
    assert paired_sentence(runs, "b", "c").endswith("not significant)")
    assert paired_sentence(runs, "a", "d") == "`a` 60.0% vs `d` 60.0%: the same tasks solved"
    assert versus(runs, "a", ["b", "d"]) == "`b` -55.0 pts (p = 0.00098), `d` the same tasks solved"


def test_adopted_episodes_by_rule_or_read():
    config = {"adopted": [{"episodes": 3, "source": "../x"}, {"episodes": 2, "rule": "same memory", "source": "../y"},
                          {"episodes": 1, "rule": "same memory", "source": "../y"}]}
    assert adopted_episodes(config, read=True) == 3 and adopted_episodes(config, rule="same memory") == 3
    assert adopted_episodes(config) == 6 and adopted_episodes({}) == 0


def test_a_page_hands_the_renderer_exactly_its_arguments(tmp_path):
    page = TablePage("t_valid_unseen", ("a", "b"), "T", "make x", "notes", (("a", "b"),), "caption")
    assert page.path(tmp_path) == tmp_path / "tables" / "t_valid_unseen.md"
    assert page.kwargs == {"conds": ["a", "b"], "title": "T", "command": "make x", "notes": "notes",
                           "pairs": [("a", "b")]}
    assert set(page.kwargs) <= set(inspect.signature(write_table).parameters)
