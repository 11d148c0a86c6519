"""Every reproduction profile only sets parameters the notebook's ``parameters`` cell declares."""

import json
from pathlib import Path

import pytest

from workbench.reporting.profiles import PROFILES, notebook_parameters

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def declared(notebook: str) -> dict:
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]
    (cell,) = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    names: dict = {}
    exec("".join(cell["source"]), {}, names)
    return names


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_profile_parameters_are_declared_by_the_notebook(profile):
    for notebook in PROFILES[profile]:
        params = notebook_parameters(profile, notebook, "reports", "runs")
        unknown = set(params) - set(declared(notebook))
        assert not unknown, f"{profile}/{notebook}: {sorted(unknown)} not in the notebook's parameters cell"
        assert params["runs_dir"] == f"runs/{profile}"


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        notebook_parameters("huge", "01_baselines", "reports", "runs")


def test_reproduce_json_says_which_profile_rendered_each_notebook(tmp_path, monkeypatch):
    """The default profile renders every notebook, then one is rendered again at paper scale: reproduce.json keeps
    each notebook's own profile, dtype, wall time and commit (a real papermill run of a two-cell notebook)."""
    import importlib

    import nbformat

    rep = importlib.import_module("workbench.reporting.reproduce")  # the package exports the function by that name

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1\nreports_dir = runs_dir = profile = dtype = None",
                                          metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("print(profile, dtype)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for name in ("a", "b"):
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    monkeypatch.setattr(rep, "NOTEBOOKS_DIR", tmp_path)
    monkeypatch.setitem(rep.PROFILES, "default", {"a": {"x": 2}, "b": {}})
    monkeypatch.setitem(rep.PROFILES, "full", {"a": {"x": 3}, "b": {}})
    reports = tmp_path / "reports"
    rep.reproduce("default", str(reports), runs=str(tmp_path / "runs"))
    rep.reproduce("full", str(reports), notebooks=["a"], runs=str(tmp_path / "runs"), dtype="bfloat16")
    record = json.loads((reports / "reproduce.json").read_text())
    assert record["notebooks"]["a"]["profile"] == "full" and record["notebooks"]["a"]["dtype"] == "bfloat16"
    assert record["notebooks"]["b"]["profile"] == "default" and record["notebooks"]["b"]["dtype"] == "float32"
    assert record["profile"] == "full" and set(record["wall_s"]) == {"a", "b"}
    assert all(r["git_commit"] and r["finished"] for r in record["notebooks"].values())
