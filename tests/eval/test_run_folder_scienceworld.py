"""A ScienceWorld run's config.json records the protocol constants its episodes were played under (informational,
not the identity): the simulator's version, the constrained decode's beam, the prompt budget and its history drop."""

import json

from workbench.eval import run_folder
from workbench.eval.config import RunConfig


def test_a_scienceworld_runs_config_records_its_prompt_budget_and_history_drop(tmp_path, monkeypatch):
    monkeypatch.setattr(run_folder, "memory_base_digest", lambda cfg: None)  # no gold-path base built here
    cfg = RunConfig(out=str(tmp_path / "run"), env="scienceworld", memory="none", tasks="0:1")
    run_folder.write_run_config(cfg)
    versions = json.loads((tmp_path / "run" / "config.json").read_text())["versions"]
    assert (versions["prompt_budget"], versions["history_chunk"]) == ("4096", "10")
    assert versions["beam"] == "16" and "scienceworld" in versions
    alf = RunConfig(out=str(tmp_path / "alf"), memory="none", tasks="0:1")
    run_folder.write_run_config(alf)
    assert "history_chunk" not in json.loads((tmp_path / "alf" / "config.json").read_text())["versions"]
