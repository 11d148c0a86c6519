"""The proactive memory agent's window: the authors' 8 steps by default, an option of the run (``--window``), and
10 for everything recorded before it was one (run folders, training layouts, analysis caches)."""

from __future__ import annotations

import json

import pytest

from workbench.agents.policy import predated_options
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, RunIdentity, policy_for
from workbench.eval.sweep import GridError, load_grid, parse_overrides
from workbench.memory.trajectory import Step
from workbench.methods.proactive import LEGACY_WINDOW, WINDOW, ProactiveOptions, ProactivePolicy, sft_examples
from workbench.studies.reminder_quote import window_key
from workbench.training.layouts import LAYOUTS, layout_policy


def _long_episode(n: int = 14):
    e = next(x for x in expert_trajectories_for("valid_unseen") if x.task_type == "clean")
    steps = [Step(observation=f"You arrive at drawer {k}. The drawer {k} is closed.", action=f"go to drawer {k}")
             for k in range(1, n + 1)]
    return e.model_copy(update={"steps": tuple(steps)})


def _windows_read(policy: ProactivePolicy, traj) -> list[int]:
    """How many steps the memory agent read at each step (the payload both phases render)."""
    policy.begin(None, traj.goal, traj.initial_observation)  # type: ignore[arg-type]
    seen = []
    for k, st in enumerate(traj.steps):
        seen.append(len(policy.payload(k, policy.bank.view()[0]).window))
        policy.observe(st, st.observation)
    return seen


def test_the_default_window_is_the_authors_8_and_a_run_can_set_it():
    assert WINDOW == 8 and LEGACY_WINDOW == 10 and ProactiveOptions().window == 8
    traj = _long_episode()
    default = RunConfig(out="-", memory="proactive")
    assert default.window == 8 and default.options["window"] == 8
    assert _windows_read(policy_for(default), traj) == [min(k, 8) for k in range(traj.n_steps)]
    three = RunConfig(out="-", memory="proactive-advisor", window=3)
    assert _windows_read(policy_for(three), traj) == [min(k, 3) for k in range(traj.n_steps)]


@pytest.mark.parametrize("bad,match", [
    (dict(memory="traj", window=8), "--window does not apply to --memory traj"),
    (dict(memory="proactive", window=0), "window: Input should be greater than or equal to 1"),
    (dict(memory="proactive", window=True), "window"),
])
def test_a_window_that_cannot_apply_is_refused_naming_it(bad, match):
    with pytest.raises(ValueError, match=match):
        RunConfig(out="-", **bad)


def test_an_identity_without_a_window_reads_as_what_it_was_played_with():
    """Only the policies that take a window predate it; others stay without one."""
    assert RunIdentity.model_validate({"memory": "proactive-retrieval"}).window == LEGACY_WINDOW
    assert RunIdentity.model_validate({"memory": "proactive", "window": 8}).window == 8
    assert RunIdentity.model_validate({"memory": "traj"}).window is None
    assert predated_options("traj") == {} and predated_options("proactive") == {"window": 10}


def test_training_layouts_render_the_window_agent_v2_was_trained_with():
    proactive = [lay for lay in LAYOUTS if lay.memory.startswith("proactive")]
    assert len(proactive) == 5
    assert {layout_policy(lay).window for lay in proactive} == {LEGACY_WINDOW}


def test_a_grid_sets_the_window_per_configuration_and_bounds_it(tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("out: o\ndefaults: {tasks: '0:1'}\nconfigurations:\n"
                    "  - {name: none, memory: none}\n  - {name: w6, memory: proactive, window: 6}\n")
    g = load_grid(grid)
    assert {c.memory: c.window for c in g.configs} == {"none": None, "proactive": 6}
    with pytest.raises(GridError, match="window"):
        load_grid(grid, overrides=parse_overrides(["window=0"]))


def test_sft_examples_render_the_window_the_run_read():
    traj = _long_episode()
    pol = ProactivePolicy()
    pol.begin(None, traj.goal, traj.initial_observation)  # type: ignore[arg-type]
    records = []
    for k, st in enumerate(traj.steps):
        records.append({"proactive": pol.memory(k, list(traj.steps[:k])).record["proactive"]})
        pol.observe(st, st.observation)
    traj = traj.model_copy(update={"meta": {"memory_policy": "proactive", "steps": records}})
    last = [ex for ex in sft_examples(traj, 8) if ex["phase"] == 2][-1]
    prompt = json.dumps(last["messages"])
    assert "go to drawer 6" in prompt and "go to drawer 5" not in prompt  # steps 6..13 of 14 (k = 13)
    wider = [ex for ex in sft_examples(traj, 10) if ex["phase"] == 2][-1]
    assert "go to drawer 4" in json.dumps(wider["messages"])


def test_analysis_caches_keep_their_keys_at_the_window_they_were_played_with():
    assert window_key(LEGACY_WINDOW) == {} and window_key(8) == {"window": 8}
    assert window_key(None) == {"window": 8}  # not given: the default, which is not what the old caches played


def test_proactive_sft_refuses_runs_of_different_windows(tmp_path, capsys):
    from pathlib import Path

    from workbench.cli import main

    src = Path(__file__).parents[3] / "runs/full-bfloat16/06_proactive/smollm2-135m-alfworld-v2/proactive"
    for name, window in (("legacy", None), ("eight", 8)):
        run = tmp_path / name
        run.mkdir()
        cfg = json.loads((src / "config.json").read_text())
        if window:
            cfg["run"]["window"] = window
        (run / "config.json").write_text(json.dumps(cfg))
        (run / "trajectories.jsonl").write_text((src / "trajectories.jsonl").read_text().split("\n", 1)[0] + "\n")
    assert main(["proactive-sft", str(tmp_path / "legacy"), str(tmp_path / "eight"), "--out", str(tmp_path / "o")]) == 2
    assert "different windows (8, 10 steps)" in capsys.readouterr().err
    assert not (tmp_path / "o" / "sft.jsonl").exists()  # nothing written
