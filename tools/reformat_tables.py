"""Re-write a reports set's table pages from their CSVs with the current ``frame_markdown``.

For pages rendered before it (pandas artefacts: tuple row labels, ``nan``, counts as ``4.000``, an unescaped ``|``
that shifts every column after it) whose notebook cannot be rendered again cheaply. Only pages a notebook saved
with ``Reports.table`` (a ``.csv`` beside them, no ``# title``) are touched; ``write_table`` pages are left alone.
The row labels are the CSV's leading columns with an empty header (or its first column); the float format is the old page's commonest
number of decimals; the lines above the table (``dtype: ...``) are kept. The numbers come from the CSV the
notebook wrote with the page, so a page's content does not change, only how it is printed.

    .venv/bin/python tools/reformat_tables.py reports/full-bfloat16 'arbiter_*' 'proactive_*'
"""

from __future__ import annotations

import csv
import re
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from workbench.files import atomic_write_text
from workbench.reporting.save import frame_markdown


def reformat(page: Path) -> bool:
    old = page.read_text()
    source = page.with_suffix(".csv")
    if old.startswith("# ") or not source.exists():
        return False
    with source.open(newline="") as f:
        header = next(csv.reader(f))
    labels = next((i for i, name in enumerate(header) if name != ""), len(header)) or 1
    df = pd.read_csv(source, index_col=list(range(labels)))
    df.index.names = [name or None for name in header[:labels]]  # an empty header is no name
    table_at = old.index("\n|") + 1 if not old.startswith("|") else 0
    decimals = Counter(len(d) for d in re.findall(r"(?<![\w.])-?\d+\.(\d+)(?![\w.])", old[table_at:]))
    floatfmt = f".{decimals.most_common(1)[0][0]}f" if decimals else ".3f"
    new = old[:table_at] + frame_markdown(df, floatfmt) + "\n"
    if new != old:
        atomic_write_text(page, new)
    return new != old


def main(argv: list[str]) -> int:
    root, patterns = Path(argv[0]), argv[1:] or ["*"]
    pages = sorted({p for pattern in patterns for p in (root / "tables").glob(f"{pattern}.md")})
    for page in pages:
        print(("rewritten " if reformat(page) else "unchanged ") + str(page))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
