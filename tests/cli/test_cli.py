"""The ``workbench`` command line as a user meets it: ``--version``, ``list``, closed sets as argparse choices read
from the registries, ``--out`` as a folder (and the older file form of one-file commands), ``run``'s progress bar.
Everything here but the last test runs without loading a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import workbench
import workbench.cli._options as options
import workbench.cli.run as run_command
from workbench.agents.policy import list_policies
from workbench.cli import build_parser, main
from workbench.cli.listing import GRIDS_DIR
from workbench.eval.config import DTYPES
from workbench.llm.registry import list_backends
from workbench.models.registry import list_models


def _exit(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a command that argparse ends with SystemExit."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_version_prints_the_package_version(capsys):
    code, out, _ = _exit(["--version"], capsys)
    assert code == 0 and out.strip() == f"workbench {workbench.__version__}"


def test_list_memory_prints_every_registered_policy(capsys):
    assert main(["list", "memory"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == list_policies()
    # the methods' policies register themselves on import: the listing has them, not just the agents' own
    assert {"none", "icl", "traj", "arbiter", "proactive", "awm", "dc-rs"} <= set(listed)


def test_list_models_backends_and_grids(capsys):
    assert main(["list", "models"]) == 0
    assert capsys.readouterr().out.split() == list_models()
    assert main(["list", "backends"]) == 0
    assert capsys.readouterr().out.split() == list_backends()
    assert main(["list", "grids"]) == 0
    listed = capsys.readouterr().out.split()
    assert [Path(p).name for p in listed] == sorted(p.name for p in GRIDS_DIR.glob("*.yaml"))
    assert "valid_unseen_default_agent.yaml" in {Path(p).name for p in listed}
    assert main(["list", "models", "--long"]) == 0
    assert all("\t" in line for line in capsys.readouterr().out.splitlines())  # name, tab, description


@pytest.mark.parametrize("argv", [
    ["run", "--out", "o"],
    ["refine", "--base-out", "b"],
    ["heads", "score", "--out", "h"],
    ["utilization", "--heads", "1.1", "--out", "u"],
    ["dagger", "rollout", "--iteration", "0"],
    ["reproduce"],
])
def test_an_invalid_dtype_is_refused_naming_the_allowed_values(argv, capsys):
    code, _, err = _exit([*argv, "--dtype", "float16"], capsys)
    assert code == 2 and "argument --dtype: invalid choice: 'float16'" in err
    assert all(f"'{d}'" in err for d in DTYPES)


@pytest.mark.parametrize("argv, flag, bad", [
    (["run", "--out", "o", "--memory"], "--memory", "no-such-policy"),
    (["run", "--out", "o", "--memory", "arbiter", "--ablation"], "--ablation", "no-arbiter"),
    (["run", "--out", "o", "--backend"], "--backend", "gpt"),
    (["run", "--out", "o", "--decode"], "--decode", "sample"),
    (["reproduce", "--profile"], "--profile", "fast"),
    (["heads", "score", "--out", "h", "--analyzer"], "--analyzer", "gpt"),
])
def test_closed_sets_are_choices_that_name_what_is_allowed(argv, flag, bad, capsys):
    code, _, err = _exit([*argv, bad], capsys)
    assert code == 2 and f"argument {flag}: invalid choice: '{bad}'" in err
    if flag == "--memory":
        assert all(f"'{p}'" in err for p in list_policies())


def test_choices_are_read_from_the_registries_when_the_parser_is_built(monkeypatch):
    # a policy or backend registered later (a new method, a user's backend) is offered without editing the CLI
    monkeypatch.setattr(run_command, "list_policies", lambda: [*list_policies(), "my-policy"])
    monkeypatch.setattr(options, "list_backends", lambda: [*list_backends(), "my-backend"])
    a = build_parser().parse_args(["run", "--out", "o", "--memory", "my-policy", "--backend", "my-backend"])
    assert (a.memory, a.backend) == ("my-policy", "my-backend")


@pytest.mark.parametrize("argv", [
    ["run", "--out", "{file}"],
    ["sweep", "grid.yaml", "--out", "{file}"],
    ["merge-runs", "a", "b", "--out", "{file}"],
    ["heads", "ablate", "--heads", "1.1", "--out", "{file}"],
    ["utilization", "--heads", "1.1", "--out", "{file}"],
    ["refine", "--base-out", "{file}"],
    ["proactive-sft", "r", "--out", "{file}"],
    ["experts", "--out", "{file}"],
    ["heads", "score", "--out", "{file}"],
])
def test_out_on_an_existing_file_is_a_clear_error(tmp_path, capsys, argv):
    file = tmp_path / "notes.txt"
    file.write_text("keep me\n")
    code, _, err = _exit([a.format(file=file) for a in argv], capsys)
    assert code == 2 and "argument --out" in err and f"{file} is a file, but --out names a folder" in err
    assert file.read_text() == "keep me\n" and sorted(tmp_path.iterdir()) == [file]


def test_one_file_commands_write_into_the_folder_and_still_take_a_file(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectories.jsonl").write_text("")
    assert main(["proactive-sft", str(run), "--out", str(tmp_path / "sft")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["out"] == str(tmp_path / "sft" / "sft.jsonl") and (tmp_path / "sft" / "sft.jsonl").exists()
    # the older form (a file path, as in the README) writes exactly that file, rewritten on a second run
    for _ in range(2):
        assert main(["proactive-sft", str(run), "--out", str(tmp_path / "mine.jsonl")]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out)["out"] == str(tmp_path / "mine.jsonl") and (tmp_path / "mine.jsonl").is_file()
        assert "--out takes a folder now" in captured.err


def test_tasks_defaults_are_one_per_meaning():
    p = build_parser()
    commands = {"run": [], "heads ablate": [], "utilization": [], "heads score": [], "refine": [], "experts": [],
                "merge-runs": ["a", "b"]}
    defaults = {c: p.parse_args([*c.split(), *rest, "--out", "o"]).tasks for c, rest in commands.items()}
    assert defaults == {"run": options.EPISODE_TASKS, "heads ablate": options.TF_TASKS,
                        "utilization": options.TF_TASKS, "heads score": options.SUPERVISION_TASKS,
                        "refine": "all", "experts": "all", "merge-runs": "all"}


def test_scores_may_name_the_folder_heads_score_wrote(tmp_path):
    (tmp_path / options.SCORES_FILE).write_text("{}")
    assert options.scores_file(str(tmp_path)) == str(tmp_path / options.SCORES_FILE)
    assert options.scores_file(str(tmp_path / "x.json")) == str(tmp_path / "x.json")


def test_run_shows_the_drivers_progress_bar_unless_told_not_to(tiny_model_dir, tmp_path, capsys):
    argv = ["run", "--model", str(tiny_model_dir), "--memory", "none", "--tasks", "none",
            "--teacher-forcing-tasks", "0:2", "--max-steps", "2"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    captured = capsys.readouterr()
    assert "valid_unseen [none]" in captured.err and "2/2" in captured.err  # the bar, on stderr
    summary = json.loads(captured.out)
    assert summary["n_episodes"] == 0 and summary["teacher_forced"]["n_steps"] > 0
    assert main([*argv, "--out", str(tmp_path / "b"), "--no-progress"]) == 0
    assert "valid_unseen [none]" not in capsys.readouterr().err
