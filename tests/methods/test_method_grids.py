"""The paper-scale grids of the methods play exactly the folders their notebooks read under PROFILE=full, so a
grid played across sessions leaves the notebook only rendering (grids/arbiter_valid_unseen.yaml: notebook 05;
grids/proactive_valid_unseen.yaml: notebook 06; grids/agmr_valid_unseen.yaml: notebook 04's evaluation)."""

from pathlib import Path

import pytest

from workbench.eval.sweep import load_grid, parse_overrides
from workbench.reporting.profiles import PROFILES
from workbench.studies.arbiter_grids import (
    arbiter_configs,
    budget_pairs,
    reference_configs,
    sensitivity_configs,
)
from workbench.studies.proactive_grids import proactive_configs, silent_pairs

ROOT = Path(__file__).resolve().parents[2]


def notebook_05_configs(model, split, tasks, max_steps, root, dtype):
    """Notebook 05's runs under PROFILE=full: Tables 2 and 4, the budget-sensitivity runs on their slice, and the
    action agent alone (the reference row)."""
    slice_ = PROFILES["full"]["05_arbiter"]["sensitivity_tasks"]
    return (arbiter_configs(model, split, tasks, max_steps, root, dtype=dtype)
            + sensitivity_configs(model, split, slice_, max_steps, root, dtype=dtype)
            + reference_configs(model, split, tasks, max_steps, root, dtype=dtype))


def notebook_06_configs(model, split, tasks, max_steps, root, dtype):
    """Notebook 06's runs under PROFILE=full, at the window its committed runs read (10, not the default 8)."""
    return proactive_configs(model, split, tasks, max_steps, root, dtype=dtype,
                             window=PROFILES["full"]["06_proactive"]["window"])


GRIDS = {"arbiter_valid_unseen.yaml": ("05_arbiter", notebook_05_configs),
         "proactive_valid_unseen.yaml": ("06_proactive", notebook_06_configs)}
PAIRS = {"arbiter_valid_unseen.yaml": budget_pairs, "proactive_valid_unseen.yaml": silent_pairs}


@pytest.mark.parametrize("grid_file", sorted(GRIDS))
@pytest.mark.parametrize("model,dtype,root", [("smollm2-135m-alfworld", "float32", "runs/full"),
                                              ("smollm2-135m-alfworld-v2", "bfloat16", "runs/full-bfloat16")])
def test_the_grid_is_its_notebooks_full_profile(grid_file, model, dtype, root):
    notebook, configs = GRIDS[grid_file]
    grid = load_grid(ROOT / "grids" / grid_file, out=f"{root}/{notebook}/{model}",
                     overrides=parse_overrides([f"model={model}", f"dtype={dtype}"]))
    expected = configs(model, "valid_unseen", "all", 50, f"{root}/{notebook}", dtype=dtype)
    assert {c.out: c.identity() for c in grid.configs} == {c.out: c.identity() for c in expected}
    # the notebook adopts the same same-memory pairs the grid does
    assert sorted(grid.same_memory) == sorted((Path(c.out).name, Path(r.out).name)
                                              for c, r in PAIRS[grid_file](expected))


def test_the_agmr_grid_is_notebook_04s_full_profile():
    """Notebook 04 (runs_dir absolute, as `workbench reproduce` passes it) builds the same runs as the grid played
    from the repository root: a memory base is the same through either path (runner.identity_diff)."""
    from workbench.eval.run_folder import identity_diff
    from workbench.studies.agmr_grids import agmr_configs

    model, root = "smollm2-135m-alfworld-v2", ROOT / "runs/full-bfloat16/04_agmr"
    grid = load_grid(ROOT / "grids" / "agmr_valid_unseen.yaml", out=str(root / model))
    bases = {"agmr": str(root / model / "bases" / "agmr"), "agmr-no-agr": str(root / model / "bases" / "no-agr")}
    expected = {c.out: c for c in agmr_configs(model, "valid_unseen", "all", 50, root, bases, dtype="bfloat16")}
    assert sorted(c.out for c in grid.configs) == sorted(expected)
    for c in grid.configs:
        assert identity_diff(c.identity(), expected[c.out].identity()) == {}, c.out
        if c.memory_base:  # the grid's relative path names the notebook's folder
            assert (ROOT / c.memory_base).resolve() == Path(expected[c.out].memory_base)


@pytest.mark.parametrize("model,dtype,root", [("smollm2-135m-alfworld", "float32", "runs/full"),
                                              ("smollm2-135m-alfworld-v2", "bfloat16", "runs/full-bfloat16")])
def test_the_written_action_grid_is_notebook_05s_full_profile(model, dtype, root):
    """Table 5 (a) in the paper's setting: the grid plays the folders notebook 05 reads (verbatim_tasks of the full
    profile), beside the main grid's in the same model folder."""
    from workbench.reporting.profiles import PROFILES
    from workbench.studies.arbiter_grids import verbatim_configs

    tasks = PROFILES["full"]["05_arbiter"]["verbatim_tasks"]
    grid = load_grid(ROOT / "grids" / "arbiter_verbatim_valid_unseen.yaml", out=f"{root}/05_arbiter/{model}",
                     overrides=parse_overrides([f"model={model}", f"dtype={dtype}"]))
    expected = verbatim_configs(model, "valid_unseen", tasks, 50, f"{root}/05_arbiter", dtype=dtype)
    assert {c.out: c.identity() for c in grid.configs} == {c.out: c.identity() for c in expected}
    assert all(c.decode == "generate-verbatim" and c.budget == (None if c.memory == "none" else 500)
               for c in grid.configs)
    # its reference row is the run notebook 06's written-action grid plays (read from there, not played twice)
    from workbench.studies.proactive_grids import verbatim_configs as proactive_verbatim

    assert PROFILES["full"]["06_proactive"]["verbatim_tasks"] == tasks
    ours = next(c for c in grid.configs if c.memory == "none")
    theirs = next(c for c in proactive_verbatim(model, "valid_unseen", tasks, 50, f"{root}/06_proactive", dtype=dtype)
                  if c.memory == "none")
    assert ours.identity() == theirs.identity() and Path(ours.out).name == Path(theirs.out).name
    main = load_grid(ROOT / "grids" / "arbiter_valid_unseen.yaml", out=f"{root}/05_arbiter/{model}")
    assert not set(grid.names) & set(main.names)  # one model folder, no folder of the other grid's


@pytest.mark.parametrize("model,dtype,root", [("smollm2-135m-alfworld", "float32", "runs/full"),
                                              ("smollm2-135m-alfworld-v2", "bfloat16", "runs/full-bfloat16")])
def test_the_proactive_written_action_grid_is_notebook_06s_full_profile(model, dtype, root):
    """The proactive agent where commands fail: the grid plays the folders notebook 06 reads (verbatim_tasks of the
    full profile) with the same same-memory pair, beside the main grid's in the same model folder."""
    from workbench.studies.proactive_grids import verbatim_configs

    tasks = PROFILES["full"]["06_proactive"]["verbatim_tasks"]
    grid = load_grid(ROOT / "grids" / "proactive_verbatim_valid_unseen.yaml", out=f"{root}/06_proactive/{model}",
                     overrides=parse_overrides([f"model={model}", f"dtype={dtype}"]))
    expected = verbatim_configs(model, "valid_unseen", tasks, 50, f"{root}/06_proactive", dtype=dtype,
                                window=PROFILES["full"]["06_proactive"]["window"])
    assert {c.out: c.identity() for c in grid.configs} == {c.out: c.identity() for c in expected}
    assert all(c.decode == "generate-verbatim" for c in grid.configs)
    assert {c.window for c in grid.configs if c.memory != "none"} == {10}  # what the committed runs read
    assert sorted(grid.same_memory) == sorted((Path(c.out).name, Path(r.out).name) for c, r in silent_pairs(expected))
    main = load_grid(ROOT / "grids" / "proactive_valid_unseen.yaml", out=f"{root}/06_proactive/{model}")
    assert not set(grid.names) & set(main.names)
