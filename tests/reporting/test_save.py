"""Reports: every table of model results states the dtype the notebook ran in."""

import pandas as pd
import pytest

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


def test_cells_that_would_break_a_pipe_table(tmp_path):
    """A `|` in a label (the parting tables' `arbiter-500|all`) is escaped, integer row labels print as integers
    (`rank 1`), NA / NaT print as a dash, and a row of rates that happen to be 0 and 1 keeps its decimals."""
    from workbench.reporting.save import frame_markdown

    df = pd.DataFrame({"p": [0.5, 1.0], "q": [pd.NA, 0.0]}, index=pd.Index(["arbiter-500|all", "x\ny"]))
    text = frame_markdown(df)
    assert "arbiter-500\\|all" in text and "x y" in text and "<NA>" not in text
    assert all(line.count("|") - line.count("\\|") == 4 for line in text.splitlines())
    assert "1.000" in text  # the 1.0 rate beside 0.5 is a rate
    top = pd.DataFrame({"m": ["L1.H2", "L3.H4"]}, index=pd.RangeIndex(1, 3, name="rank"))
    assert "| 1      | L1.H2 |" in frame_markdown(top) and "1.000" not in frame_markdown(top)


def test_damaged_set_files_are_named_and_kept(tmp_path):
    df = pd.DataFrame({"success": [0.25]}, index=["none"])
    Reports(tmp_path, "01_baselines", parameters={"dtype": "float32"}).table(df, "t")
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="manifest.json: not valid JSON"):
        Reports(tmp_path, "01_baselines").table(df, "u")
    assert (tmp_path / "manifest.json").read_text() == "{not json"  # not overwritten
    (tmp_path / "manifest.json").write_text('{"01_baselines": [{"kind": "table"}]}')
    with pytest.raises(ValueError, match="section '01_baselines' is not a list"):
        Reports(tmp_path, "01_baselines").table(df, "u")


def test_a_new_render_replaces_its_section_of_metrics(tmp_path):
    r = Reports(tmp_path, "05_arbiter", parameters={"dtype": "bfloat16", "verbatim_tasks": "0:134:7"})
    r.metrics({"verbatim": 0.3})
    Reports(tmp_path, "05_arbiter", parameters={"dtype": "bfloat16", "verbatim_tasks": None})
    import json

    assert json.loads((tmp_path / "metrics.json").read_text())["05_arbiter"] == {
        "parameters": {"dtype": "bfloat16", "verbatim_tasks": None}}


def _save_many(root: str, section: str, n: int) -> None:
    df = pd.DataFrame({"success": [0.25]}, index=["none"])
    r = Reports(root, section)
    for i in range(n):
        r.table(df, f"{section}_{i}")
        r.metrics({f"m{i}": i})


def test_two_processes_saving_into_one_set_keep_each_others_entries(tmp_path):
    import json
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_save_many, args=(str(tmp_path), s, 12)) for s in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert {s: len(manifest[s]) for s in "ab"} == {"a": 12, "b": 12}
    assert {s: len(metrics[s]) for s in "ab"} == {"a": 12, "b": 12}
