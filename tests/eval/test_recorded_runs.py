"""Every run folder committed under runs/ still loads as the run it recorded: its config.json (flat option fields,
written before memory policies validated their own options) gives a RunConfig whose identity is the recorded one,
so ``--resume`` and adoption accept it, and its condition keeps the name the tables print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.eval.config import RunConfig
from workbench.agents.policy import predated_options
from workbench.eval.run_folder import check_resume, identity_diff, load_run, read_config

ROOT = Path(__file__).resolve().parents[2]
TRACKED = ("full", "full-bfloat16", "dagger")  # the run folders git keeps (.gitignore); the rest of runs/ is scratch
RUNS = sorted(p.parent for root in TRACKED for p in (ROOT / "runs" / root).rglob("config.json")
              if "run" in json.loads(p.read_text()) and (p.parent / "trajectories.jsonl").exists())


def test_the_repository_holds_recorded_runs():
    assert len(RUNS) >= 60  # paper-scale folders of notebooks 01 and 04-06, the DAgger rollouts, layouts_tf


@pytest.mark.parametrize("folder", RUNS, ids=[str(p.relative_to(ROOT / "runs")) for p in RUNS])
def test_a_recorded_run_loads_with_its_identity_and_resumes(folder):
    saved = json.loads((folder / "config.json").read_text())["run"]
    if saved.get("memory_base"):  # a refined base is recorded relative to where the sweep ran (the repo root)
        saved["memory_base"] = str(ROOT / saved["memory_base"]) if not Path(saved["memory_base"]).is_absolute() \
            else saved["memory_base"]
    # an option the folder predates at the value it was played with (the proactive agent's window: 10)
    saved |= {k: v for k, v in predated_options(saved.get("memory", "traj")).items() if k not in saved}
    cfg = RunConfig(out=str(folder), **saved)
    # what --resume compares: the recorded identity (with today's defaults for fields added since) and this one
    assert identity_diff(RunConfig(out="").identity() | saved, cfg.identity()) == {}
    assert identity_diff(read_config(folder).run.model_dump(), cfg.identity()) == {}
    done = check_resume(cfg, resume=True)
    trajs, _, _ = load_run(folder)
    assert done == {t.task_id for t in trajs}


def test_a_proactive_run_recorded_before_the_window_option_reads_as_window_10_and_refuses_8():
    """The paper-scale proactive runs were played with a 10-step window before ``window`` was an option (the
    default is now the authors' 8): their identity reads 10, and resuming them at the new default is refused,
    naming the window, instead of mixing two windows in one folder."""
    folder = ROOT / "runs/full-bfloat16/06_proactive/smollm2-135m-alfworld-v2/proactive"
    saved = json.loads((folder / "config.json").read_text())["run"]
    assert "window" not in saved and read_config(folder).run.window == 10
    with pytest.raises(ValueError, match="different parameters.*'window': \\(10, 8\\).*--window 10: pass that"):
        check_resume(RunConfig(out=str(folder), **saved), resume=True)
    assert check_resume(RunConfig(out=str(folder), **saved, window=10), resume=True)
