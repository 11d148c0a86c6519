"""tools/reformat_tables.py: a page printed the old way is printed again from its CSV as Reports.table prints it now;
write_table pages are left alone."""

import importlib.util
from pathlib import Path

import pandas as pd

from workbench.reporting import Reports

TOOL = Path(__file__).resolve().parents[2] / "tools" / "reformat_tables.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("reformat_tables", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_old_pages_are_printed_again_from_their_csv(tmp_path):
    tool = load_tool()
    df = pd.concat({"arbiter-500": pd.DataFrame({"n": [134.0, 31.0], "p": [0.0001, float("nan")]},
                                                index=["all|x", "clean"])})
    r = Reports(tmp_path, "05_arbiter", parameters={"dtype": "bfloat16"})
    page = r.table(df, "t").with_suffix(".md")
    now = page.read_text()
    page.write_text("dtype: bfloat16\n\n" + df.to_markdown(floatfmt=".3f") + "\n")  # as pages were printed before
    assert tool.reformat(page) and page.read_text() == now
    titled = tmp_path / "tables" / "w.md"
    titled.write_text("# A table\n\n| a |\n|---|\n| 1 |\n")
    (tmp_path / "tables" / "w.csv").write_text(",a\n0,1\n")
    assert not tool.reformat(titled) and titled.read_text().startswith("# A table")
