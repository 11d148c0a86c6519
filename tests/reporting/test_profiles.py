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
    # one set per profile (and forced dtype): the paper-scale render did not touch the default set
    default = json.loads((reports / "default" / "reproduce.json").read_text())
    full = json.loads((reports / "full-bfloat16" / "reproduce.json").read_text())
    assert set(default) == set(full) == {"notebooks"}  # per notebook only: no set-wide profile
    assert set(default["notebooks"]) == {"a", "b"} and set(full["notebooks"]) == {"a"}
    assert full["notebooks"]["a"]["profile"] == "full" and full["notebooks"]["a"]["dtype"] == "bfloat16"
    assert default["notebooks"]["a"]["dtype"] == "float32"
    assert full["notebooks"]["a"]["command"] == "workbench reproduce --profile full --dtype bfloat16 --notebooks a"
    assert all(r["git_commit"] and r["finished"] and r["versions"]["torch"]
               for r in [*default["notebooks"].values(), *full["notebooks"].values()])
    assert (reports / "default" / "notebooks" / "a.ipynb").exists()
    home = (reports / "index.md").read_text()
    assert "[default/](default/index.md)" in home and "[full-bfloat16/](full-bfloat16/index.md)" in home
    # the parameters the notebook ran with are relative paths, and no output shows this machine's paths
    rendered = (reports / "full-bfloat16" / "notebooks" / "a.ipynb").read_text()
    assert str(tmp_path) not in rendered and "full bfloat16" in rendered


def test_machine_paths_are_stripped_from_rendered_notebooks(tmp_path, monkeypatch):
    import importlib

    rep = importlib.import_module("workbench.reporting.reproduce")
    nb = tmp_path / "n.ipynb"
    nb.write_text(json.dumps({"text": f"{rep.REPO}/runs/x and {rep.REPO} and {Path.home()}/.cache/y"}))
    rep._strip_machine_paths(nb)
    assert json.loads(nb.read_text())["text"] == "runs/x and . and ~/.cache/y"


def test_sibling_folders_and_urls_are_left_alone(tmp_path, monkeypatch):
    import importlib

    rep = importlib.import_module("workbench.reporting.reproduce")
    nb = tmp_path / "n.ipynb"
    nb.write_text(json.dumps({"text": f"{rep.REPO}-old/x, https://example.org and {rep.REPO}"}))
    rep._strip_machine_paths(nb)
    assert json.loads(nb.read_text())["text"] == f"{rep.REPO}-old/x, https://example.org and ."


def test_a_damaged_reproduce_json_stops_before_any_render(tmp_path, monkeypatch):
    import importlib

    rep = importlib.import_module("workbench.reporting.reproduce")
    (tmp_path / "reports" / "default").mkdir(parents=True)
    (tmp_path / "reports" / "default" / "reproduce.json").write_text("{oops")
    rendered = []
    monkeypatch.setattr(rep, "run_notebook", lambda *a, **k: rendered.append(a))
    with pytest.raises(ValueError, match=r"reproduce.json: not valid JSON"):
        rep.reproduce("default", str(tmp_path / "reports"), notebooks=["01_baselines"], runs=str(tmp_path / "runs"))
    assert not rendered and (tmp_path / "reports" / "default" / "reproduce.json").read_text() == "{oops"


def test_declared_parameters_skip_magics_and_read_annotated_defaults(tmp_path):
    import importlib

    import nbformat

    rep = importlib.import_module("workbench.reporting.reproduce")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%matplotlib inline\ndtype: str = 'bfloat16'\nmodel = None",
                                          metadata={"tags": ["parameters"]})]
    nbformat.write(nb, tmp_path / "n.ipynb")
    assert rep.declared_parameters(tmp_path / "n.ipynb") == {"dtype": "bfloat16", "model": None}
