"""What made a result: package versions, the git commit and the CPU's bfloat16 kernels (recorded in run folders, refined bases and reports)."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

__all__ = ["versions"]


_VERSIONED = ("torch", "transformers", "transformer-lens", "textworld", "alfworld", "workbench")


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["cpu"] = _cpu()
    try:
        root = Path(__file__).resolve().parents[1]
        out["git_commit"] = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        out["git_commit"] = None
    return out


def _cpu() -> str | None:
    """The CPU model and its bfloat16 matmul kernels (amx / avx512_bf16 / none): bf16 results differ in the last
    bits between kernels, enough to send a near-tied decision the other way."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or None
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = set(next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), []))
    kernels = [k for k in ("amx_bf16", "avx512_bf16") if k in flags] or ["no native bf16"]
    return f"{model} ({', '.join(kernels)})"
