"""Model cards: the evaluation sections of a trained adapter's card, from the same run folders and table renderer as the reports."""

from __future__ import annotations

from pathlib import Path

from workbench.reporting.outcomes import (
    PAIRS,
    folder_table,
    paired_table,
    read_json,
    read_table,
)
from workbench.reporting.tables import _dtype_line, check_dtypes, rows_markdown
from workbench.training.card import adapter_summary, write_model_card

__all__ = ["CARD_INTRO", "card_section", "write_card"]


CARD_INTRO = ("TF = teacher-forced next-action accuracy on the planner's expert plans of the same tasks (arg-max over "
              "the admissible commands, as the agent decides). `other_type`: the best-retrieved trajectory of a "
              "different task type; `random_same`: a random same-type trajectory instead of the retrieved one. "
              "Episodes: 50-step limit.")


def card_section(section: str, models: list[str], conds: list[str], pairs: list[tuple[str, str]] = PAIRS,
                 compare_dtypes: bool = False) -> str:
    """One evaluation section of a model card, from run folders or from a table's ``.json``.

    Args:
        section: ``TITLE=ROOT`` (the run folders ``ROOT/<model>/<cond>``, read like ``write_table``) or
            ``TITLE=TABLE.json`` (a table ``write_table`` wrote, its rows of ``models`` x ``conds``), so the card
            and the report agree.
        models: the models of the rows.
        conds: the conditions of the rows.
        pairs: the comparisons shown (default ``PAIRS``).
        compare_dtypes: the compared variable is the dtype (a dtype column; mixed dtypes allowed).

    Returns:
        The section's markdown (no trailing newline).

    Raises:
        ValueError: ``section`` is not ``TITLE=...``, the ``.json`` is not a table or has no such rows, or the rows
            mix dtypes.
        FileNotFoundError: no such ``.json``, or no run folders under ``ROOT``.
    """
    title, _, root = section.partition("=")
    if not root:
        raise ValueError(f"card section {section!r}: expected TITLE=RUNS_ROOT or TITLE=TABLE.json")
    if root.endswith(".json"):
        table = read_table(Path(root))
        rows = [r for r in table["rows"] if r["model"] in models and r["memory"] in conds]
        paired = [r for r in table["paired"] if r.get("model") in models and (r.get("a"), r.get("b")) in pairs]
        across = [r for r in table.get("paired_models", []) if r["a"] in models and r["b"] in models
                  and r["memory"] in conds]
        source = f"Table: `{root}` (its page `{Path(root).with_suffix('.md')}` says how the runs were made)."
        where = {(r["model"], r["memory"]): f"{root} row {r['model']}/{r['memory']}" for r in rows}
        if not rows:
            raise ValueError(f"card section {section!r}: no rows for {models} x {conds} in {root}")
    else:
        rows, paired, across = folder_table(Path(root), models, conds), paired_table(Path(root), models, pairs), []
        source = f"Runs: `{root}/<model>/<condition>`."
        where = {(r["model"], r["memory"]): str(Path(root) / r["model"] / r["memory"]) for r in rows}
        if not rows:
            raise FileNotFoundError(f"card section {section!r}: no run folders under {root}/<model>/<condition>")
    dtypes = check_dtypes(rows, compare_dtypes, where)
    return "\n".join(["### " + title, "", source, "", _dtype_line(dtypes), "",
                      rows_markdown(rows, paired, compare_dtypes, across).rstrip()])


def write_card(adapter: str | Path, sections: list[str], models: list[str], conds: list[str], command: str,
               pairs: list[tuple[str, str]] = PAIRS, compare_dtypes: bool = False, intro: str = CARD_INTRO) -> Path:
    """Write the evaluation section of an adapter's ``MODEL_CARD.md`` (the card rebuilt from its training_log.json).

    Args:
        adapter: the adapter folder (with ``training_log.json``).
        sections: ``TITLE=RUNS_ROOT`` or ``TITLE=TABLE.json`` each (``card_section``).
        models: the models of the rows.
        conds: the conditions of the rows.
        command: the command line that wrote the card (shown on it).
        pairs: the comparisons shown (default ``PAIRS``).
        compare_dtypes: the compared variable is the dtype (a dtype column; mixed dtypes allowed).
        intro: the paragraph that says what the columns and conditions mean.

    Returns:
        The card's path.

    Raises:
        ValueError, FileNotFoundError: as ``card_section``; the card is left as it was.
    """
    parts = ["## Evaluation (never trained or tuned on valid_unseen)", "", intro, "", f"Written by `{command}`."]
    for section in sections:
        parts += ["", card_section(section, models, conds, pairs, compare_dtypes)]
    record = read_json(Path(adapter) / "training_log.json")
    return write_model_card(adapter, record, adapter_summary(adapter), "\n".join(parts))
