"""The fuzz suite's tally: outcome classes per reader (printed at the end by conftest.py, and written to
$WORKBENCH_FUZZ_REPORT)."""

from __future__ import annotations

import os
from collections import Counter, defaultdict

TALLY: dict[str, Counter] = defaultdict(Counter)


def examples(default: int) -> int:
    """Examples per reader: ``default`` in `make test`; ``WORKBENCH_FUZZ_EXAMPLES`` (e.g. 5000) for a longer run."""
    return int(os.environ.get("WORKBENCH_FUZZ_EXAMPLES", default))


