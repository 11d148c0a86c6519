"""Where models run: ``cpu``, ``cuda``, ``cuda:N``, ``mps`` or ``auto`` (a GPU when there is one).

One default per process, set by ``--device`` on every command that loads a model, by a notebook's ``device``
parameter (:func:`set_default_device`), or by ``WORKBENCH_DEVICE`` in the environment; worker processes inherit it
(the Ray executor hands it to its workers explicitly, a cluster's included). A device that cannot be used is a
:class:`DeviceError` naming it, what was found and the fix, before anything is loaded or written.
"""

from __future__ import annotations

import os
import re

import torch

__all__ = ["DEVICE_HELP", "DeviceError", "check_dtype", "default_device", "describe_device", "resolve_device",
           "set_default_device"]

DEVICE_HELP = ("where the model runs: cpu, cuda, cuda:N, mps, or auto (a GPU when there is one); default: "
               "$WORKBENCH_DEVICE or cpu")
_ENV = "WORKBENCH_DEVICE"
_FORM = re.compile(r"^(cpu|mps|auto|cuda(:\d+)?)$")


class DeviceError(ValueError):
    """A device this machine cannot use (no CUDA build or no GPU, an index past the GPUs, a dtype it cannot run)."""


def default_device() -> str:
    """This process's device (``WORKBENCH_DEVICE``, else ``cpu``), not yet resolved."""
    return os.environ.get(_ENV) or "cpu"


def set_default_device(device: str) -> str:
    """Check ``device`` and make it this process's default (and its child processes'); returns it resolved.

    Raises:
        DeviceError: the device cannot be used here.
    """
    resolved = resolve_device(device)
    os.environ[_ENV] = resolved
    return resolved


def resolve_device(device: str | None = None) -> str:
    """``device`` (default: :func:`default_device`) as a torch device string this machine can use; ``auto`` takes
    ``cuda`` when CUDA sees a GPU, else ``mps`` on Apple silicon, else ``cpu``.

    Raises:
        DeviceError: not a device name, or one this machine cannot use (the message says why and what to do).
    """
    device = (device or default_device()).strip().lower()
    if not _FORM.match(device):
        raise DeviceError(f"device '{device}': expected cpu, cuda, cuda:N, mps or auto")
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if _mps() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            why = ("this torch is a CPU-only build" if torch.version.cuda is None else
                   f"torch (CUDA {torch.version.cuda}) sees no GPU: no driver, or CUDA_VISIBLE_DEVICES hides them")
            raise DeviceError(f"--device {device}: {why} (torch {torch.__version__}); on a GPU machine install a CUDA "
                              "build of torch (`make install TORCH_INDEX=https://download.pytorch.org/whl/cu128`), "
                              "or run with --device cpu")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise DeviceError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                              f"(cuda:0..cuda:{torch.cuda.device_count() - 1})")
    if device == "mps" and not _mps():
        raise DeviceError("--device mps: this torch has no MPS backend here (Apple silicon with macOS 12.3+ only); "
                          "use --device cpu")
    return device


def check_dtype(device: str, dtype: str) -> None:
    """Refuse a dtype the device cannot run.

    Raises:
        DeviceError: bfloat16 on a GPU without bfloat16 (before Ampere), or bfloat16 on MPS before macOS 14.
    """
    if dtype != "bfloat16":
        return
    if device.startswith("cuda") and torch.cuda.is_available():
        index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
        if torch.cuda.get_device_capability(index) < (8, 0):  # before Ampere: bf16 emulated at best
            raise DeviceError(f"--dtype bfloat16 on {describe_device(device)}: this GPU has no native bfloat16 "
                              "(compute capability below 8.0); use --dtype float32")
    if device == "mps":
        try:
            torch.zeros(1, dtype=torch.bfloat16, device="mps")
        except (RuntimeError, TypeError) as e:
            raise DeviceError(f"--dtype bfloat16 on mps: {e}; use --dtype float32") from None


def describe_device(device: str) -> str:
    """``cpu``, or the accelerator with its name (``cuda:0 (NVIDIA H100 80GB HBM3)``), as runs record it."""
    if device.startswith("cuda") and torch.cuda.is_available():
        index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return device


def _mps() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend and backend.is_available())
