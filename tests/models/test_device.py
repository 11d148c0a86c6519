"""Devices: one default per process, checked before anything is loaded or written; a run records the accelerator
that played it (not identity: a run may resume elsewhere)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from workbench.models.device import DeviceError, check_dtype, describe_device, resolve_device, set_default_device

NO_CUDA = not torch.cuda.is_available()


def test_names_resolve_and_bad_ones_are_named(monkeypatch):
    monkeypatch.delenv("WORKBENCH_DEVICE", raising=False)
    assert resolve_device() == "cpu" and resolve_device("CPU") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(DeviceError, match="expected cpu, cuda, cuda:N, mps or auto"):
        resolve_device("tpu")
    monkeypatch.setenv("WORKBENCH_DEVICE", "auto")
    assert resolve_device() == resolve_device("auto")  # the process default


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_cuda_on_a_machine_without_it_says_why_and_what_to_do(monkeypatch):
    with pytest.raises(DeviceError, match="CPU-only build|sees no GPU") as e:
        resolve_device("cuda:1")
    assert "TORCH_INDEX" in str(e.value) and "--device cpu" in str(e.value)
    monkeypatch.delenv("WORKBENCH_DEVICE", raising=False)
    with pytest.raises(DeviceError):
        set_default_device("cuda")
    import os

    assert "WORKBENCH_DEVICE" not in os.environ  # a refused device does not become the default


def test_dtype_checks_and_descriptions():
    check_dtype("cpu", "bfloat16")  # the CPU runs bf16
    check_dtype("cpu", "float32")
    assert describe_device("cpu") == "cpu"


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_the_cli_refuses_before_writing(tmp_path):
    out = tmp_path / "run"
    for argv, needle in ((["--device", "cuda"], "--device cuda: "), (["--gpus-per-worker", "1"], "add --workers")):
        p = subprocess.run([sys.executable, "-m", "workbench.cli", "run", "--tasks", "0:1", "--out", str(out), *argv],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 2 and needle in p.stderr and p.stderr.count("\n") == 1, p.stderr
        assert not out.exists()  # nothing written


def test_a_run_records_a_non_cpu_device_beside_its_versions(tmp_path):
    from workbench.eval.config import RunConfig
    from workbench.eval.run_folder import read_config, write_run_config

    cfg = RunConfig(out=str(tmp_path / "gpu"), tasks="0:1")
    write_run_config(cfg, "cuda:0")
    assert read_config(cfg.out).versions["device"].startswith("cuda:0")
    cpu = RunConfig(out=str(tmp_path / "cpu"), tasks="0:1")
    write_run_config(cpu, "cpu")
    assert "device" not in json.loads((tmp_path / "cpu" / "config.json").read_text())["versions"]  # as before


def test_gpus_per_worker_is_read_from_the_process_default(monkeypatch):
    from workbench.eval.executor import GPUS_ENV, default_gpus_per_worker

    monkeypatch.setenv(GPUS_ENV, "0.5")
    assert default_gpus_per_worker() == 0.5
    monkeypatch.setenv(GPUS_ENV, "one")
    with pytest.raises(ValueError, match="expected a number of GPUs"):
        default_gpus_per_worker()
