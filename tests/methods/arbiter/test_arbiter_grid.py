"""grids/arbiter_valid_unseen.yaml plays exactly the folders notebook 05 reads (so the notebook only renders them)."""

from pathlib import Path

import pytest

from workbench.eval.sweep import load_grid, parse_overrides
from workbench.methods.arbiter.experiments import arbiter_configs

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("model,dtype,root", [("smollm2-135m-alfworld", "float32", "runs/full"),
                                              ("smollm2-135m-alfworld-v2", "bfloat16", "runs/full-bfloat16")])
def test_the_grid_is_notebook_05s_full_profile(model, dtype, root):
    out = f"{root}/05_arbiter/{model}"
    grid = load_grid(ROOT / "grids" / "arbiter_valid_unseen.yaml", out=out,
                     overrides=parse_overrides([f"model={model}", f"dtype={dtype}"]))
    notebook = arbiter_configs(model, "valid_unseen", "all", 50, f"{root}/05_arbiter", dtype=dtype)
    assert {c.out: c.identity() for c in grid.configs} == {c.out: c.identity() for c in notebook}
