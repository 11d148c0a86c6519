"""Where two conditions' paired episodes first act differently."""

from __future__ import annotations

from workbench.eval.compare import mcnemar_exact

__all__ = ["first_divergence", "PARTING_BANDS", "parting_table", "parting_tables", "parting_sentence"]


def first_divergence(a, b) -> int | None:
    """The first step at which two episodes of the same task take different actions (index into their steps),
    the length of the shorter one where one is a prefix of the other, or None where they are the same."""
    acts_a, acts_b = a.actions(), b.actions()
    for i, (x, y) in enumerate(zip(acts_a, acts_b)):
        if x != y:
            return i
    return None if len(acts_a) == len(acts_b) else min(len(acts_a), len(acts_b))


PARTING_BANDS = ((0, 0), (1, 3), (4, None))


def parting_table(a, b, name_a: str = "A", name_b: str = "B", bands=PARTING_BANDS):
    """Where two conditions' paired episodes part, for the tasks only one of them solves: per task type (and
    ``all``), the discordant tasks of each side counted by the band of :func:`first_divergence` their episodes
    fall in (``bands``: inclusive step ranges, None open-ended), with the exact McNemar p-value. A win that
    parts at step 0 comes from the first prompt alone (layout, instructions, the memory at step 0), before the
    episode has written anything the method could arbitrate. ``a`` and ``b``: the two runs' trajectories."""
    import pandas as pd

    def band(step):
        for lo, hi in bands:
            if step >= lo and (hi is None or step <= hi):
                return f"{lo}" if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}")
        raise ValueError(f"step {step} is in none of the bands {bands}")

    by_a, by_b = {t.task_id: t for t in a}, {t.task_id: t for t in b}
    labels = [band(lo) for lo, _ in bands]
    rows: dict[str, dict] = {}
    for tid in (t for t in by_a if t in by_b):
        ta, tb = by_a[tid], by_b[tid]
        if ta.success == tb.success:
            cell = None
        else:
            cell = name_a if ta.success else name_b
        for key in ("all", ta.task_type or "?"):
            row = rows.setdefault(key, {"tasks": 0, f"only {name_a}": 0, f"only {name_b}": 0,
                                        **{f"only {n}, parted at {lab}": 0 for n in (name_a, name_b)
                                           for lab in labels}})
            row["tasks"] += 1
            if cell is not None:
                row[f"only {cell}"] += 1
                step = first_divergence(ta, tb)
                if step is not None:  # same actions, other outcome: cannot happen in a deterministic game
                    row[f"only {cell}, parted at {band(step)}"] += 1
    for row in rows.values():
        row["p_mcnemar"] = mcnemar_exact(row[f"only {name_a}"], row[f"only {name_b}"])
    order = ["all"] + sorted(k for k in rows if k != "all")
    return pd.DataFrame.from_dict({k: rows[k] for k in order if k in rows}, orient="index")


def parting_tables(pairs: dict, name_a: str = "A", name_b: str = "B"):
    """:func:`parting_table` of several pairs of runs in one frame: ``pairs`` maps a condition to its ``(a, b)``
    trajectories; the rows are indexed ``<condition>|<task type>`` (``arbiter-500|all``, ``arbiter-500|clean``)."""
    import pandas as pd

    if not pairs:
        return pd.DataFrame()
    table = pd.concat({c: parting_table(a, b, name_a, name_b) for c, (a, b) in pairs.items()})
    table.index = [f"{c}|{t}" for c, t in table.index]
    return table


def parting_sentence(table, name_a: str, name_b: str) -> str:
    """One sentence over the ``|all`` rows of :func:`parting_tables`: per condition, the tasks only ``name_a``
    solves and those only ``name_b`` solves, with how many of each parted at step 0 (the first prompt alone)."""
    rows = table[[str(i).endswith("|all") for i in table.index]]
    first = PARTING_BANDS[0]
    at0 = f"{first[0]}" if first[0] == first[1] else f"{first[0]}-{first[1]}"
    parts = []
    for label, r in rows.iterrows():
        a, b = (f"{int(r[f'only {n}'])} ({int(r[f'only {n}, parted at {at0}'])})" for n in (name_a, name_b))
        parts.append(f"`{str(label).rsplit('|', 1)[0]}` {a} / {b}")
    if not parts:
        return ""
    return f"Tasks `only {name_a}` / `only {name_b}` (of them, parted at step {at0}): " + "; ".join(parts) + "."
