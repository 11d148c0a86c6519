"""Task selection: a Python-style slice of a split's sorted task list ("0:20", "0:134:7", "all", "none").

The grammar, in ASCII digits only (no signs, no ``1_0``, no other scripts' digits):

- ``all`` or ``:``: every task;
- ``none``: no task (a teacher-forcing-only run);
- ``I``: the one task at index ``I`` (``0 <= I < n``);
- ``START:STOP`` or ``START:STOP:STEP``, each of START and STOP optional, STEP (when its colon is written) at
  least 1.

A slice that selects no task (``5:5``, ``500:`` of 134) is an error, never an empty run; ``strict`` (what a
grid file asks for) also refuses a START or STOP past the split's last task, which Python would silently clip.
"""

from __future__ import annotations

import re

__all__ = ["NO_TASKS", "parse_task_slice"]


NO_TASKS = "none"  # tasks: none -> no episodes (teacher forcing only)

_SLICE = re.compile(r"^([0-9]*):([0-9]*)(?::([0-9]+))?$", re.ASCII)
_INDEX = re.compile(r"^[0-9]+$", re.ASCII)
_EXPECTED = "expected a slice like 0:20, 10:, 0:134:11, all, none, or an index"


def parse_task_slice(spec: str, n: int, *, strict: bool = False) -> list[int]:
    """Indices selected by ``spec`` ("0:20", "10:", "0:134:11", ":", "all", "7") out of ``n`` tasks; ``none``
    selects no task (a run's ``tasks: none`` plays no episode: teacher forcing only).

    Args:
        strict: also refuse a START or STOP past the ``n`` tasks (``0:99999``), instead of clipping it.

    Raises:
        ValueError: not a slice of the grammar above (an empty string, ``::``, a negative number, a step of 0), a
            slice selecting no task, an index out of range, or (``strict``) a bound past the tasks.
    """
    if not isinstance(spec, str):
        raise ValueError(f"--tasks {spec!r}: a {type(spec).__name__}, where a slice string belongs ({_EXPECTED}; "
                         "quote it in YAML: tasks: \"0:20\")")
    spec = spec.strip()
    if spec in ("all", ":"):
        return list(range(n))
    if spec == NO_TASKS:
        return []
    if _INDEX.match(spec):
        i = int(spec)
        if not 0 <= i < n:
            raise ValueError(f"--tasks {i}: out of range for {n} tasks (indices are 0..{n - 1})")
        return [i]
    m = _SLICE.match(spec)
    if not m:
        raise ValueError(f"--tasks '{spec}': {_EXPECTED}")
    start, stop, step = (int(g) if g else None for g in m.groups())
    if step == 0:
        raise ValueError(f"--tasks '{spec}': the step must be at least 1")
    if strict:
        for name, bound in (("start", start), ("stop", stop)):
            limit = n - 1 if name == "start" else n
            if bound is not None and bound > limit:
                raise ValueError(f"--tasks '{spec}': {name} {bound} is past the split's {n} tasks (at most {limit}; "
                                 "leave it out to mean the end, e.g. 0: or all)")
    picked = list(range(n))[slice(start, stop, step)]
    if not picked:
        raise ValueError(f"--tasks '{spec}' selects no task of {n} (write none for no episodes)")
    return picked
