"""The allocator thresholds a CPU model load sets (workbench.models.allocator)."""

import sys

import pytest

from workbench.models import allocator


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(allocator, "_state", None)
    for k in ("WORKBENCH_MALLOPT", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
              "GLIBC_TUNABLES"):
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_thresholds_are_raised_once_on_glibc(fresh):
    assert allocator.allocator_state() == "default"
    assert allocator.keep_freed_memory() == "kept"
    assert allocator.keep_freed_memory() == "kept" and allocator.allocator_state() == "kept"


@pytest.mark.parametrize("env,reason", [
    ({"WORKBENCH_MALLOPT": "0"}, "WORKBENCH_MALLOPT=0"),
    ({"MALLOC_TRIM_THRESHOLD_": "100000"}, "set from the environment (MALLOC_TRIM_THRESHOLD_)"),
    ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}, "set from the environment (GLIBC_TUNABLES)"),
])
def test_the_users_settings_win(fresh, env, reason):
    for k, v in env.items():
        fresh.setenv(k, v)
    assert allocator.keep_freed_memory() == reason == allocator.allocator_state()


def test_a_cpu_load_sets_them(fresh):
    from workbench.models import load_model

    load_model("smollm2-135m-instruct")
    assert allocator.allocator_state() in ("kept", "not glibc")
