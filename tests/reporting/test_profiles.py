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
