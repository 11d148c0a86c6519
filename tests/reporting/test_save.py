"""Reports: every table of model results states the dtype the notebook ran in."""

import pandas as pd

from workbench.reporting import Reports


def test_tables_state_the_dtype_of_the_runs(tmp_path):
    df = pd.DataFrame({"success": [0.25, 0.5]}, index=["none", "traj"])
    reports = Reports(tmp_path, "01_baselines", parameters={"dtype": "bfloat16", "tasks": "0:2"})
    text = reports.table(df, "conditions").with_suffix(".md").read_text()
    assert text.startswith("dtype: bfloat16\n\n|") and "0.250" in text
    assert not reports.table(df, "experts", model_results=False).with_suffix(".md").read_text().startswith("dtype")
    assert "dtype: bfloat16" in (tmp_path / "index.md").read_text()
    assert Reports(tmp_path, "x").table(df, "plain").with_suffix(".md").read_text().startswith("|")


def test_counts_print_as_integers_beside_rates(tmp_path):
    """A row of counts and a rate (AGMR's refinement table): the counts print as counts, the rate with three
    decimals, though pandas hands tabulate one float array."""
    df = pd.DataFrame.from_dict({"agmr": {"tasks": 140, "mean_attempts": 2.754},
                                 "agmr-no-agr": {"tasks": 140, "mean_attempts": 2.8214}}, orient="index")
    text = Reports(tmp_path, "04_agmr").table(df, "refinement").with_suffix(".md").read_text()
    assert "| agmr        |     140 |           2.754 |" in text and "140.000" not in text and "2.821" in text
