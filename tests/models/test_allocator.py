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
    import ctypes

    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version"):
        pytest.skip("not glibc")
    assert allocator.allocator_state() == "default"
    assert allocator.keep_freed_memory() == "kept"
    assert allocator.keep_freed_memory() == "kept" and allocator.allocator_state() == "kept"
    if not hasattr(libc, "mallinfo2"):
        return

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                    "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    mapped = libc.mallinfo2().hblkhd
    block = libc.malloc(100 << 20)  # a block the size of a long prompt's scores: from the heap now, not an mmap
    try:
        assert libc.mallinfo2().hblkhd == mapped
    finally:
        libc.free(block)


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
