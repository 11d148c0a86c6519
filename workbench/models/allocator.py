"""Big freed blocks kept in the process's heap, not handed back to the kernel: a CPU forward's page faults.

glibc's ``malloc`` serves a block above its mmap threshold (128 KiB at start, then the largest block freed so far,
up to 32 MiB) with a fresh ``mmap`` and returns it to the kernel on ``free``; it also gives the top of the heap back
whenever more than the trim threshold (twice the mmap threshold) lies free there. A CPU forward allocates and frees
the same large temporaries at every layer (a prefill's attention scores and their fp32 softmax: 9 heads x 900 x 900
x 4 bytes = 29 MiB for SmolLM2; the fp32 log-softmax of the unembedded rows), so each of them is paid again as page
faults on first touch, which on these machines (a virtual machine) cost more than the arithmetic: measured on one
core, an ~900-token prefill step of SmolLM2 in bf16 took 2.9 s with glibc's defaults and 1.9 s with the thresholds
below, the same tokens and bit-identical scores (a profile of 30 teacher-forced states; ``benchmarks/step_limit.py
--glibc-defaults`` compares the median step, where the typical ~140-token step has no large temporary).

:func:`keep_freed_memory` raises both thresholds once per process, through ``mallopt`` (what ``MALLOC_MMAP_THRESHOLD_``
and ``MALLOC_TRIM_THRESHOLD_`` do from the environment, and the reason PyTorch's CPU tuning guide suggests jemalloc
or tcmalloc): blocks up to :data:`MMAP_THRESHOLD` come from the heap and up to :data:`TRIM_THRESHOLD` of freed heap
stays mapped for the next step. The price is a resident size that does not shrink back after the largest step (up to
the trim threshold above what is in use, per malloc arena, and freed blocks below the heap's top stay mapped).
:func:`workbench.models.load_model` calls it for a model on the CPU once its weights are loaded (so the weights
themselves are mapped as before and handed back when the model is dropped), as does the trainer.

Left alone where it cannot or should not act: not glibc (macOS, musl), ``WORKBENCH_MALLOPT=0``, or the allocator
already tuned from the environment (another allocator preloaded with ``LD_PRELOAD`` is not detected: its own
settings govern) (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_`` or a
``glibc.malloc`` tunable in ``GLIBC_TUNABLES``: the user's settings win).
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory", "allocator_state"]

#: Blocks up to this size come from the heap (glibc: ``M_MMAP_THRESHOLD``). Ours, not glibc's default.
MMAP_THRESHOLD = 256 << 20
#: Freed heap kept mapped up to this size (glibc: ``M_TRIM_THRESHOLD``). Ours, not glibc's default.
TRIM_THRESHOLD = 512 << 20

_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3
_ENV = "WORKBENCH_MALLOPT"
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
_state: str | None = None


def _why_not() -> str | None:
    if os.environ.get(_ENV, "1").strip() == "0":
        return f"{_ENV}=0"
    user = [k for k in _USER_SETTINGS if k in os.environ]
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        user.append("GLIBC_TUNABLES")
    if user:
        return f"set from the environment ({', '.join(user)})"
    return None


def keep_freed_memory() -> str:
    """Raise glibc's mmap and trim thresholds for this process (module docstring); once per process.

    Returns:
        What the allocator runs with: ``"kept"`` (thresholds raised now or earlier), or why it was left alone
        (``"not glibc"``, ``"WORKBENCH_MALLOPT=0"``, ``"set from the environment (...)"``, ``"refused by mallopt"``).
    """
    global _state
    if _state is not None:
        return _state
    reason = _why_not()
    if reason is not None:
        _state = reason
        return _state
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only: musl's mallopt accepts and ignores everything
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        _state = "not glibc"
        return _state
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    _state = "kept" if ok else "refused by mallopt"
    return _state


def allocator_state() -> str:
    """What :func:`keep_freed_memory` did in this process (``"default"`` when it has not been called)."""
    return _state or "default"
