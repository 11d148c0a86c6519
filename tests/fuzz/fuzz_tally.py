"""The fuzz suite's tally: outcome classes per reader (printed at the end by conftest.py, and written to
$WORKBENCH_FUZZ_REPORT)."""

from __future__ import annotations

import os
from collections import Counter, defaultdict

TALLY: dict[str, Counter] = defaultdict(Counter)


def examples(default: int) -> int:
    """Examples per reader: ``default`` in `make test`; ``WORKBENCH_FUZZ_EXAMPLES`` (e.g. 5000) for a longer run."""
    return int(os.environ.get("WORKBENCH_FUZZ_EXAMPLES", default))


def fuzz_settings(default: int):
    """Seeded (derandomized) Hypothesis settings with ``examples(default)`` cases and no deadline."""
    from hypothesis import HealthCheck, settings

    return settings(max_examples=examples(default), derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


def classify(reader: str, named, fn, check) -> None:
    """Run a reader on a damaged file: a typed error naming ``named`` (the file or store), or a read that ``check``
    accepts; the outcome is tallied. Any other exception propagates (the test fails on it)."""
    from workbench.files import FormatError

    try:
        result = fn()
    except (FormatError, ValueError, FileNotFoundError) as e:
        assert str(named) in str(e), f"{reader}: the error does not name {named}: {e}"
        TALLY[reader]["named error"] += 1
        return
    check(result)
    TALLY[reader]["correct read"] += 1

