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


def test_no_pandas_artefacts(tmp_path):
    """Tuple row labels become columns, NaN prints as a dash, a metric row of counts prints as integers in a
    column of rates (the `episodes 4.000` of the old index)."""
    from workbench.reporting.save import frame_markdown

    df = pd.DataFrame({"none": [4.0, 0.25], "traj": [4.0, float("nan")]}, index=["episodes", "success"])
    text = frame_markdown(df)
    assert "| episodes |      4 |      4 |" in text and "0.250" in text and "nan" not in text and "–" in text
    multi = pd.concat({"v2": df}, names=["model", "metric"])
    text = frame_markdown(multi)
    assert "('" not in text and text.splitlines()[0].split("|")[1].strip() == "model"
    assert "| v2      | episodes |" in text


def test_index_groups_by_section_with_captions_in_save_order(tmp_path):
    df = pd.DataFrame({"success": [0.25, 0.5]}, index=["none", "traj"])
    a = Reports(tmp_path, "05_arbiter", parameters={"dtype": "bfloat16", "model": "m", "tasks": "all",
                                                   "profile": "full"})
    a.table(df, "arbiter_table2", caption="Table 2 beside the paper's.")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure()
    a.figure(fig, "arbiter_fig3_sr_at_k", caption="The 750 curves coincide with the 500 ones.")
    b = Reports(tmp_path, "01_baselines", parameters={"dtype": "float32", "models": ["m"], "episode_tasks": "0:4"})
    b.table(df, "baselines")
    text = (tmp_path / "index.md").read_text()
    # sections in notebook order whatever order they were saved in; each with its profile, dtype, model and tasks
    assert text.index("## 01 ·") < text.index("## 05 ·")
    assert "profile **full** · dtype **bfloat16** · model `m` · tasks `all`" in text
    assert text.index("Table 2 beside") < text.index("![arbiter_fig3_sr_at_k]") < text.index("750 curves coincide")
    # a new render of a section starts it afresh: what it no longer saves leaves its section (the file stays,
    # listed as not made by any notebook)
    Reports(tmp_path, "05_arbiter", parameters={"dtype": "bfloat16"}).table(df, "arbiter_table2")
    text = (tmp_path / "index.md").read_text()
    assert "750 curves" not in text and "## Not listed by any notebook" in text
    assert text.index("### arbiter_table2") < text.index("## Not listed")


def test_home_index_lists_every_set(tmp_path):
    from workbench.reporting.save import write_home_index

    df = pd.DataFrame({"success": [0.25]}, index=["none"])
    for name in ("default", "full-bfloat16"):
        Reports(tmp_path / name, "04_agmr", parameters={"dtype": "float32"}).table(df, "t")
    text = write_home_index(tmp_path).read_text()
    assert text.index("[full-bfloat16/]") < text.index("[default/]") and "Paper scale" in text
