"""The paper-scale grids of the methods play exactly the folders their notebooks read under PROFILE=full, so a
grid played across sessions leaves the notebook only rendering (grids/arbiter_valid_unseen.yaml: notebook 05;
grids/proactive_valid_unseen.yaml: notebook 06)."""

from pathlib import Path

import pytest

from workbench.eval.sweep import load_grid, parse_overrides
from workbench.methods.arbiter.experiments import arbiter_configs
from workbench.methods.proactive.experiments import proactive_configs

ROOT = Path(__file__).resolve().parents[2]
GRIDS = {"arbiter_valid_unseen.yaml": ("05_arbiter", arbiter_configs),
         "proactive_valid_unseen.yaml": ("06_proactive", proactive_configs)}


@pytest.mark.parametrize("grid_file", sorted(GRIDS))
@pytest.mark.parametrize("model,dtype,root", [("smollm2-135m-alfworld", "float32", "runs/full"),
                                              ("smollm2-135m-alfworld-v2", "bfloat16", "runs/full-bfloat16")])
def test_the_grid_is_its_notebooks_full_profile(grid_file, model, dtype, root):
    notebook, configs = GRIDS[grid_file]
    grid = load_grid(ROOT / "grids" / grid_file, out=f"{root}/{notebook}/{model}",
                     overrides=parse_overrides([f"model={model}", f"dtype={dtype}"]))
    expected = configs(model, "valid_unseen", "all", 50, f"{root}/{notebook}", dtype=dtype)
    assert {c.out: c.identity() for c in grid.configs} == {c.out: c.identity() for c in expected}
