"""Task selection: a Python-style slice of a split's sorted task list ("0:20", "0:134:7", "all", "none")."""

from __future__ import annotations

__all__ = ["NO_TASKS", "parse_task_slice"]


NO_TASKS = "none"  # tasks: none -> no episodes (teacher forcing only)


def parse_task_slice(spec: str, n: int) -> list[int]:
    """Indices selected by ``spec`` ("0:20", "10:", "0:134:11", ":", "all", "7") out of ``n`` tasks; ``none``
    selects no task (a run's ``tasks: none`` plays no episode: teacher forcing only)."""
    spec = spec.strip()
    if spec in ("all", ":", ""):
        return list(range(n))
    if spec == NO_TASKS:
        return []
    try:
        if ":" in spec:
            parts = [int(p) if p else None for p in spec.split(":")]
            if len(parts) > 3:
                raise ValueError
            return list(range(n))[slice(*parts)]
        i = int(spec)
    except ValueError:
        raise ValueError(f"--tasks '{spec}': expected a slice like 0:20, 10:, 0:134:11, all, or an index") from None
    if not 0 <= i < n:
        raise ValueError(f"--tasks {i}: out of range for {n} tasks")
    return [i]
