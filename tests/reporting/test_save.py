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
