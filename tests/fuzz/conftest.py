"""Prints the fuzz tally at the end of the session and writes it to $WORKBENCH_FUZZ_REPORT."""

from __future__ import annotations

import json
import os

import pytest
from fuzz_tally import TALLY


@pytest.fixture(scope="session", autouse=True)
def _report():
    yield
    if not TALLY:
        return
    rows = {reader: dict(c) | {"cases": sum(c.values())} for reader, c in sorted(TALLY.items())}
    total = sum(r["cases"] for r in rows.values())
    print(f"\nfuzz: {total} cases over {len(rows)} readers")
    for reader, r in rows.items():
        print(f"  {reader:28s} {r['cases']:6d}  " + "  ".join(f"{k} {v}" for k, v in r.items() if k != "cases"))
    if path := os.environ.get("WORKBENCH_FUZZ_REPORT"):
        with open(path, "w") as fh:
            json.dump({"total": total, "readers": rows}, fh, indent=1)
