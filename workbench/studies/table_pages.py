"""A page of the one table renderer as a study specifies it: which conditions, compared how, noted and captioned.

The renderer (:func:`workbench.reporting.write_table`) sits a layer above the studies, so a study does not call
it: it returns a :class:`TablePage`, and the notebook hands the page to the renderer and to the reports set::

    page = arbiter_report.table2_page(runs, setting, budgets)
    display(Markdown(write_table(page.path(reports_dir), root, [model], **page.kwargs)))
    reports.add(page.path(reports_dir), caption=page.caption)

The notes say how the run folders were made (which episodes were read from another notebook's runs, which were
adopted because the memory was the same at every step); the caption says what the page shows and how to read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["TablePage"]


@dataclass(frozen=True)
class TablePage:
    """One ``tables/NAME.md`` page (and its ``.json``) of the table renderer.

    Attributes:
        name: the page's file name without suffix (``arbiter_table2_valid_unseen``).
        conds: the rows' conditions, in order.
        title: the page title.
        command: the command that measured it (shown on the page).
        notes: Markdown on how the run folders were made.
        pairs: the ``(A, B)`` paired comparisons (exact McNemar).
        caption: what the page shows and how to read it (1-3 sentences, shown in the reports index).
    """

    name: str
    conds: tuple[str, ...]
    title: str
    command: str
    notes: str
    pairs: tuple[tuple[str, str], ...]
    caption: str

    def path(self, reports_dir: str | Path) -> Path:
        """``REPORTS_DIR/tables/NAME.md``."""
        return Path(reports_dir) / "tables" / f"{self.name}.md"

    @property
    def kwargs(self) -> dict:
        """The renderer's keyword arguments after ``(out, root, models)``."""
        return {"conds": list(self.conds), "title": self.title, "command": self.command, "notes": self.notes,
                "pairs": [tuple(p) for p in self.pairs]}
