"""``benchmarks/kv_reuse.py``: both decodes play the same episode with and without the prefix cache, side by side."""

import sys

import pytest


@pytest.mark.game
@pytest.mark.parametrize("decode", ["score", "generate"])
def test_the_benchmark_plays_both_agents_and_reports_the_ratio(load_benchmark, tiny_model_dir, monkeypatch, capsys,
                                                               decode):
    bench = load_benchmark("kv_reuse")
    monkeypatch.setattr(sys, "argv", ["kv_reuse.py", "--model", str(tiny_model_dir), "--memory", "none",
                                      "--decode", decode, "--steps", "4"])
    bench.main()
    lines = capsys.readouterr().out.strip().splitlines()
    assert f"decode={decode} dtype=float32" in lines[-3]
    ratio = lines[-1].split()[0]
    assert ratio.startswith("kv_ratio=") and float(ratio.split("=")[1]) > 0
    if decode == "generate":  # fp32: the cached prefix writes what the whole prompt writes, every step
        assert lines[-1].split()[1] == "identical=4/4"
