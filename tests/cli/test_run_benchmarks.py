"""``workbench run``'s defaults follow the benchmark: ALFWorld's as before, ScienceWorld's own where unset."""

import pytest

from workbench.cli._app import build_parser
from workbench.cli.run import run_config


def _cfg(tmp_path, *args):
    return run_config(build_parser().parse_args(["run", "--out", str(tmp_path / "r"), *args]))


def test_alfworld_defaults_are_unchanged(tmp_path):
    cfg = _cfg(tmp_path)
    assert (cfg.env, cfg.split, cfg.decode, cfg.max_steps, cfg.teacher_forcing) == (
        "alfworld", "valid_unseen", "score", 50, True)


def test_scienceworld_defaults(tmp_path):
    cfg = _cfg(tmp_path, "--env", "scienceworld", "--task-types", "boil", "--memory", "none")
    assert (cfg.split, cfg.decode, cfg.max_steps, cfg.teacher_forcing) == ("test@10", "constrained", 300, False)
    cfg = _cfg(tmp_path, "--env", "scienceworld:none", "--split", "dev@2", "--decode", "score", "--max-steps", "20")
    assert (cfg.env, cfg.split, cfg.decode, cfg.max_steps) == ("scienceworld:none", "dev@2", "score", 20)


def test_a_bad_benchmark_or_type_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="unknown benchmark 'webshop'"):
        _cfg(tmp_path, "--env", "webshop")
    with pytest.raises(ValueError, match="scienceworld has no such type"):
        _cfg(tmp_path, "--env", "scienceworld", "--task-types", "pick")
