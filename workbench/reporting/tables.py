"""The one table renderer: memory conditions per model, by task type, action patterns, paired comparisons.

A table is read from run folders ``ROOT/<model>/<condition>`` and written as a page and its record::

    NAME.md    # title
               dtype: float32                    <- every row was played in it (refused if they differ)
               Measured with: `command`
               notes (how the run folders were made); what was carried over, and from where
               conditions | success by task type | SR@k | how the episodes move | TF accuracy by step band (optional)
               | paired comparisons (exact McNemar; optionally also within each step band)
    NAME.json  rows, paired, runs, written, carried, dtypes, outcomes (on one line)

A table compares conditions at one dtype: rows of float32 and bfloat16 runs are refused, unless the compared
variable *is* the dtype (``compare_dtypes=True``: a dtype column, e.g. conditions ``traj-bf16`` vs ``traj-fp32``).
A folder written before runs recorded their dtype, and a row of a table written before tables did, is float32.

Each file is replaced whole (temporary file, then rename): a kill leaves the old page or the new one, and the
``.json`` may be one version behind the page only between the two renames.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from workbench.memory.trajectory import atomic_write_text
from workbench.reporting.outcomes import (
    DEFAULT_DTYPE,
    PAIRS,
    Outcomes,
    band_accuracy,
    band_label,
    band_pairs_from,
    encode_outcomes,
    folder_decisions,
    folder_outcomes,
    folder_table,
    model_pairs_from,
    pairs_from,
    parse_step_bands,
    read_table,
    same_decisions,
)

__all__ = ["carry_over", "check_dtypes", "rows_markdown", "table_markdown", "write_table"]

# the two parts of a table row, each from its own files of a run folder, and the paired lines each part makes
PARTS = {"episodes": ("episodes", "success_rate", "avg_steps", "memory_tokens", "by_task_type", "action_patterns",
                      "sr_at_k"),
         "teacher forcing": ("tf_steps", "tf_accuracy", "tf_mean_p_expert")}
PAIRED_KIND = {"episodes": "episodes", "teacher forcing": "TF steps"}


def check_dtypes(rows: list[dict], compare_dtypes: bool = False, where: dict[tuple[str, str], str] | None = None
                 ) -> list[str]:
    """The dtypes of a table's rows, refused when they differ and the dtype is not what the table compares.

    Args:
        rows: table rows; a row without ``dtype`` is ``DEFAULT_DTYPE``.
        compare_dtypes: the table's compared variable is the dtype: a mix is allowed.
        where: ``(model, condition)`` -> where the row came from, for the error (default ``model/condition``).

    Returns:
        The sorted distinct dtypes.

    Raises:
        ValueError: the rows mix dtypes and ``compare_dtypes`` is false; names every row's source and dtype.
    """
    dtypes = sorted({r.get("dtype") or DEFAULT_DTYPE for r in rows})
    if len(dtypes) > 1 and not compare_dtypes:
        named = "; ".join(f"{(where or {}).get((r['model'], r['memory']), r['model'] + '/' + r['memory'])}: "
                          f"{r.get('dtype') or DEFAULT_DTYPE}" for r in rows)
        raise ValueError(f"the rows mix dtypes {dtypes} ({named}): a table compares conditions at one dtype; render "
                         "each dtype's runs in a table of its own, or pass compare_dtypes=True for a table whose "
                         "compared variable is the dtype")
    return dtypes


def _dtype_line(dtypes: list[str]) -> str:
    return f"dtype: {dtypes[0]}" if len(dtypes) == 1 else f"dtype: {', '.join(dtypes)} (compared: the dtype column)"


def rows_markdown(rows: list[dict], paired: list[dict] = (), compare_dtypes: bool = False,
                  across: list[dict] = ()) -> str:
    """The condition table, success by task type, how the episodes move and the paired comparisons, as markdown.

    Args:
        rows: table rows (``folder_table``, ``carry_over`` or a table's ``.json``).
        paired: paired lines (``pairs_from``).
        compare_dtypes: show a ``dtype`` column in the condition table.
        across: paired lines between models under one condition (``model_pairs_from``).

    Returns:
        The markdown, ending with a newline.
    """
    def pct(v):
        return "–" if v is None else f"{v:.1%}"

    def num(v, f=".1f"):
        return "–" if v is None else format(v, f)

    def _paired_line(label: str, r: dict) -> str:  # a paired row: the model (or the condition), A vs B's counts
        return (f"| {label} | {r['a']} vs {r['b']} ({r['kind']}) | {r['n']} | {pct(r['rate_a'])} | "
                f"{pct(r['rate_b'])} | {100 * r['diff']:+.1f} pts | {r['only_a']} | {r['only_b']} | "
                f"{r['p_mcnemar']:.3g} |")

    dt_head, dt_rule = ("dtype | ", "---|") if compare_dtypes else ("", "")
    types = sorted({t for r in rows for t in r["by_task_type"]})
    lines = [f"| model | memory | {dt_head}episodes | success | avg steps | memory tokens | TF steps | TF accuracy | "
             f"mean p(expert) |", f"|---|---|{dt_rule}---|---|---|---|---|---|---|"]
    for r in rows:
        dt = f"{r.get('dtype') or DEFAULT_DTYPE} | " if compare_dtypes else ""
        lines.append(f"| {r['model']} | {r['memory']} | {dt}{r['episodes'] or '–'} | {pct(r['success_rate'])} | "
                     f"{num(r['avg_steps'])} | {num(r['memory_tokens'], '.0f')} | {r['tf_steps'] or '–'} | "
                     f"{pct(r['tf_accuracy'])} | {num(r['tf_mean_p_expert'], '.3f')} |")
    if types:
        lines += ["", "Success by task type:", "", "| model | memory | " + " | ".join(types) + " |",
                  "|---|---|" + "---|" * len(types)]
        for r in rows:
            if r["by_task_type"]:
                lines.append(f"| {r['model']} | {r['memory']} | "
                             + " | ".join(pct(r["by_task_type"].get(t)) for t in types) + " |")
    within = [r for r in rows if r.get("sr_at_k")]
    if within:  # SR@k: how soon the wins come (a row carried from a table written before rows kept it: left out)
        ks = sorted({int(k) for r in within for k in r["sr_at_k"]})
        lines += ["", "Success within k steps (SR@k, `workbench.eval.metrics.success_rate_at`):", "",
                  "| model | memory | " + " | ".join(f"SR@{k}" for k in ks) + " |", "|---|---|" + "---|" * len(ks)]
        for r in within:
            lines.append(f"| {r['model']} | {r['memory']} | "
                         + " | ".join(pct(r["sr_at_k"].get(str(k))) for k in ks) + " |")
    moves = [r for r in rows if r.get("action_patterns")]
    if moves:
        lines += ["", "How the episodes move (`workbench.eval.metrics.action_patterns`): oscillation = steps going back "
                  "to the action of two steps before (A, B, A, B); repeat = the last action again; go to = share of "
                  "navigation actions; take = episodes that ever pick something up; put back = takes undone by the next "
                  "action (the object put straight back where it was taken); failed: the oscillation of the "
                  "failed episodes alone, and the share of them that loop (at least half their steps oscillate; "
                  "– where a row was written before these were kept):", "",
                  "| model | memory | oscillation | repeat | distinct actions / episode | go to | take | put back | "
                  "failed: oscillation | failed: looping |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        opt = lambda p, k: pct(p[k]) if p.get(k) is not None else "–"  # noqa: E731
        for r in moves:
            p = r["action_patterns"]
            lines.append(f"| {r['model']} | {r['memory']} | {pct(p['oscillation'])} | {pct(p['repeat'])} | "
                         f"{p['distinct_actions']:.1f} | {pct(p['navigation'])} | {pct(p['took_object'])} | "
                         f"{opt(p, 'put_back')} | {opt(p, 'failed_oscillation')} | {opt(p, 'failed_oscillating')} |")
    banded = [r for r in rows if r.get("tf_by_step")]
    if banded:  # teacher-forced accuracy within step bands of the expert's plan
        labels = list(banded[0]["tf_by_step"])
        lines += ["", "Teacher-forced accuracy by step of the expert's plan (steps in the band: share right). At the "
                  "first steps a budgeted memory block has the least history to cut, so a deficit there comes from "
                  "how memory is shown rather than from what the budget left out:", "",
                  "| model | memory | " + " | ".join(f"steps {b}" for b in labels) + " |",
                  "|---|---|" + "---|" * len(labels)]
        for r in banded:
            cells = [f"{n}: {pct(acc)}" if n else "–" for n, acc in (r["tf_by_step"].get(b, (0, None)) for b in labels)]
            lines.append(f"| {r['model']} | {r['memory']} | " + " | ".join(cells) + " |")
    if paired:
        lines += ["", "Paired comparisons (items both conditions scored; exact McNemar test on the discordant ones):",
                  "", "| model | A vs B | items | A | B | A − B | only A | only B | p |",
                  "|---|---|---|---|---|---|---|---|---|"]
        lines += [_paired_line(r["model"], r) for r in paired]
    if across:
        lines += ["", "Paired across models (the same condition, the same tasks / teacher-forced steps; exact "
                  "McNemar; same choice: teacher-forced steps where both chose the same action, right or wrong):",
                  "", "| memory | A vs B | items | A | B | A − B | only A | only B | p | same choice |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [_paired_line(r["memory"], r) + f" {pct(r.get('same_decision'))} |" for r in across]
    return "\n".join(lines) + "\n"


def table_markdown(rows: list[dict], title: str, command: str, paired: list[dict] = (), notes: str = "",
                   carried: dict[str, str] | None = None, compare_dtypes: bool = False, across: list[dict] = ()) -> str:
    """The table page: title, dtype, the command that wrote it, notes, what was carried over, the tables.

    Args:
        rows: table rows.
        title: the page title.
        command: the command line that wrote the page.
        paired: paired lines (``pairs_from``).
        notes: markdown on how the run folders were made.
        carried: ``"model: part: condition"`` -> provenance, for what came from a previous version.
        compare_dtypes: the compared variable is the dtype (a dtype column; mixed dtypes allowed).
        across: paired lines between models (``model_pairs_from``).

    Returns:
        The page.

    Raises:
        ValueError: the rows mix dtypes and ``compare_dtypes`` is false.
    """
    dtypes = check_dtypes(rows, compare_dtypes)
    notes = notes.strip()
    by_source: dict[str, dict[str, list[str]]] = {}  # provenance -> "model part" -> conditions
    for what, src in (carried or {}).items():
        model, part, cond = what.split(": ")
        by_source.setdefault(src, {}).setdefault(f"{model} {part}", []).append(cond)
    kept = "".join(f"Carried over from the previous version of this table (no run folders for them where this one "
                   f"was written), from {src}: " + "; ".join(f"{k} ({', '.join(v)})" for k, v in whats.items())
                   + ".\n\n" for src, whats in by_source.items())
    return (f"# {title}\n\n{_dtype_line(dtypes)}\n\nMeasured with: `{command}`\n\n"
            + (f"{notes}\n\n" if notes else "") + kept + rows_markdown(rows, paired, compare_dtypes, across))


def carry_over(previous: Path, models: list[str], conds: list[str], rows: list[dict],
               outcomes: dict[tuple[str, str], Outcomes]) -> tuple[list[dict], set, list[dict], dict[str, str]]:
    """Complete the rows of the run folders at hand with what the previous table's ``.json`` holds and they lack.

    For a table over models, or parts, whose runs were made on different machines or sessions: a part of a row
    (episodes, teacher forcing) with no files here keeps its previous values and its outcomes, so every paired
    comparison is recomputed from fresh and kept outcomes alike. (A previous table written before tables kept their
    outcomes gives its paired lines as they were, for comparisons whose two conditions both had that part carried.)

    Args:
        previous: the previous ``NAME.json``; nothing is carried if it does not exist.
        models: the models, in row order.
        conds: the conditions, in row order within a model.
        rows: the rows of the folders at hand (``folder_table``).
        outcomes: the outcomes of the folders at hand; completed in place.

    Returns:
        The rows in ``models`` order, the (model, condition, paired kind) carried without outcomes, the previous
        paired lines, and the provenance of each carried ``"model: part: condition"``.

    Raises:
        ValueError: ``previous`` is not a table, or a row would join a part played in one dtype here with a part
            carried in another.
    """
    if not Path(previous).exists():
        return rows, set(), [], {}
    old = read_table(previous)
    old_rows = {(r["model"], r["memory"]): r for r in old["rows"]}
    old_outcomes = old["outcomes"]
    here = {(r["model"], r["memory"]): r for r in rows}
    carried: dict[str, str] = {}
    legacy: set[tuple[str, str, str]] = set()  # (model, condition, paired kind) carried without outcomes
    merged = []
    for model in models:
        for cond in conds:
            new, prev = here.get((model, cond)), old_rows.get((model, cond))
            if prev is None:
                if new is not None:
                    merged.append(new)
                continue
            row = dict(new) if new is not None else {"model": model, "memory": cond, "dtype": prev["dtype"],
                                                     **{f: None for fs in PARTS.values() for f in fs}}
            for n, (part, fields) in enumerate(PARTS.items()):
                if any(row.get(f) not in (None, {}) for f in fields) or all(prev.get(f) in (None, {}) for f in fields):
                    continue  # measured here, or not in the old table either
                if row.get("dtype", DEFAULT_DTYPE) != prev["dtype"]:
                    raise ValueError(f"{model}/{cond}: the run folder here is {row.get('dtype')} but {previous} holds "
                                     f"its {part} in {prev['dtype']}: one row cannot mix dtypes; play its {part} "
                                     f"again in {row.get('dtype')}, or write the table without keep_absent")
                row.update({f: prev.get(f) for f in fields})
                if (model, cond) in old_outcomes:
                    both = list(outcomes.get((model, cond), ({}, {})))
                    both[n] = old_outcomes[(model, cond)][n]
                    outcomes[(model, cond)] = both[0], both[1]
                else:
                    legacy.add((model, cond, PAIRED_KIND[part]))
                label = f"{model}: {part}: {cond}"
                carried[label] = (old.get("carried", {}).get(label)
                                  or (f"run folders under `{old['runs']}`" if old.get("runs") else
                                      "a version written before tables recorded their runs root (the notes above "
                                      "say how its runs were made)")
                                  + (f", table written {old['written']}" if old.get("written") else ""))
            row["by_task_type"] = row.get("by_task_type") or {}
            merged.append(row)
    return merged, legacy, old["paired"], carried


def write_table(out: Path, root: Path, models: list[str], conds: list[str], title: str, command: str,
                notes: str = "", keep_absent: bool = False, pairs: list[tuple[str, str]] = PAIRS,
                compare_dtypes: bool = False, model_pairs: list[tuple[str, str]] = (),
                tf_bands: list[str] = ()) -> str:
    """Write the page ``out`` and its ``.json`` from the run folders ``root/<model>/<cond>``.

    The ``.json`` holds the rows, the paired comparisons, the runs root, the date, the provenance of what was
    carried, the dtypes, and the outcomes the comparisons were computed from (on one line).

    Args:
        out: the page ``NAME.md``; ``NAME.json`` is written beside it.
        root: the runs root.
        models: the models, in row order.
        conds: the conditions of the rows, in order within a model.
        title: the page title.
        command: the command line that wrote it (shown on the page).
        notes: markdown on how the run folders were made.
        keep_absent: what the folders lack keeps its values and outcomes from the previous ``NAME.json``.
        pairs: the ``(A, B)`` comparisons (default ``PAIRS``); their conditions need not be rows.
        compare_dtypes: the compared variable is the dtype (a dtype column; mixed dtypes allowed).
        model_pairs: ``(A, B)`` models compared under each of ``conds`` (paired by task and by step).
        tf_bands: teacher-forced step bands (``"0"``, ``"1-3"``, ``"4-"``: ``parse_step_bands``): each row's
            accuracy within each band, and ``pairs`` compared within each band (is a condition's deficit there at
            the plan's first steps, where every memory block still holds the whole history?).

    Returns:
        The page.

    Raises:
        FileNotFoundError: no run folder (and, with ``keep_absent``, no previous row) for ``models`` x ``conds``.
        ValueError: the rows mix dtypes (each folder named), the previous ``.json`` is not a table, or a step band is
            malformed. Nothing is written then.
    """
    out, root = Path(out), Path(root)
    bands = parse_step_bands(list(tf_bands))
    rows = folder_table(root, models, conds)
    fresh = {(r["model"], r["memory"]) for r in rows}
    outcomes = folder_outcomes(root, models, sorted({*conds, *(c for p in pairs for c in p)}))
    carried: dict[str, str] = {}
    legacy, old_paired = set(), []
    if keep_absent:
        rows, legacy, old_paired, carried = carry_over(out.with_suffix(".json"), models, conds, rows, outcomes)
    paired = pairs_from(outcomes, models, pairs)
    order = {m: i for i, m in enumerate(models)}
    if bands:
        paired = sorted(paired + band_pairs_from(outcomes, models, pairs, bands), key=lambda r: order[r["model"]])
        for r in rows:
            steps = outcomes.get((r["model"], r["memory"]), ({}, {}))[1]
            if steps:
                r["tf_by_step"] = band_accuracy(steps, bands)
    if legacy:  # previous lines of comparisons whose two sides were both carried without outcomes
        have = {(r["model"], r["a"], r["b"], r["kind"]) for r in paired}
        keep = [r for r in old_paired if r.get("model") in order and (r["a"], r["b"]) in pairs
                and (r["model"], r["a"], r["b"], r["kind"]) not in have
                and all((r["model"], c, r["kind"]) in legacy for c in (r["a"], r["b"]))]
        paired = sorted(paired + keep, key=lambda r: order[r["model"]])  # stable: order within a model kept
    if not rows:
        raise FileNotFoundError(f"no run folders under {root}/<model>/<condition> for models {models} and "
                                f"conditions {conds}")
    dtypes = check_dtypes(rows, compare_dtypes, _sources(rows, fresh, carried, root, out.with_suffix(".json")))
    across = model_pairs_from(outcomes, conds, list(model_pairs))
    for line in across:  # teacher-forced steps: how often the two agents chose the same action, right or wrong
        if line["kind"] == "TF steps":
            line["same_decision"] = same_decisions(*(folder_decisions(root / m / line["memory"])
                                                     for m in (line["a"], line["b"])))["share"]
    text = table_markdown(rows, title, command, paired, notes, carried, compare_dtypes, across)
    record = {"rows": rows, "paired": paired, "paired_models": across, "runs": str(root), "written": time.strftime("%Y-%m-%d"),
              "carried": carried, "dtypes": dtypes, "tf_bands": [band_label(b) for b in bands],
              "outcomes": encode_outcomes(outcomes)}
    # readable rows, and the outcomes on one line (thousands of small lists)
    body = json.dumps(record | {"outcomes": None}, indent=1)
    body = body.replace('"outcomes": null', '"outcomes": ' + json.dumps(record["outcomes"], separators=(",", ":")))
    atomic_write_text(out, text)
    atomic_write_text(out.with_suffix(".json"), body)
    return text


def _sources(rows: list[dict], fresh: set[tuple[str, str]], carried: dict[str, str], root: Path, previous: Path
             ) -> dict[tuple[str, str], str]:
    """(model, condition) -> where its row came from: its run folder (and the parts carried), or the previous table."""
    where = {}
    for r in rows:
        key = (r["model"], r["memory"])
        parts = [p for p in PARTS if f"{key[0]}: {p}: {key[1]}" in carried]
        where[key] = (f"{root / key[0] / key[1]}" + (f" ({', '.join(parts)} carried from {previous})" if parts else "")
                      if key in fresh else f"{previous} row {key[0]}/{key[1]}")
    return where


