"""Tables that compare memory conditions run on the same tasks."""

from __future__ import annotations

__all__ = ["condition_table", "first_divergence", "mcnemar_exact", "paired_outcomes", "parting_table"]


def condition_table(runs: dict[str, dict]):
    """One row per condition: success, steps, memory tokens, SR@15, teacher-forced accuracy.

    Args:
        runs: condition name -> metrics dict (as written to metrics.json by the runner).
    """
    import pandas as pd

    rows = {}
    for name, m in runs.items():
        tf = m.get("teacher_forced") or {}
        rows[name] = {
            "episodes": m["n_episodes"],
            "success_%": 100 * m["success_rate"],
            "avg_steps": m["avg_steps"],
            "memory_tokens": m["memory_tokens"],
            "prompt_tokens": m["prompt_tokens"],
            "SR@15_%": 100 * m["sr_at_k"]["15"],
            "tf_accuracy_%": 100 * tf["accuracy"] if tf else float("nan"),
            "tf_p_expert": tf.get("mean_p_expert", float("nan")),
            "tf_steps": tf.get("n_steps", 0),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs under H0 are Binomial(only_a + only_b, 1/2)."""
    from math import comb

    n, k = only_a + only_b, min(only_a, only_b)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)


def paired_outcomes(a: dict, b: dict) -> dict:
    """Compare two conditions on the items both scored (episodes by task id, or teacher-forced steps by
    (task id, step)): ``a`` and ``b`` map item -> success. Returns counts of the four cells, the success
    rates on the common items, their difference (a - b) and the exact McNemar p-value."""
    common = [k for k in a if k in b]
    only_a = sum(bool(a[k]) and not b[k] for k in common)
    only_b = sum(bool(b[k]) and not a[k] for k in common)
    both = sum(bool(a[k]) and bool(b[k]) for k in common)
    n = len(common)
    return {"n": n, "both": both, "only_a": only_a, "only_b": only_b, "neither": n - both - only_a - only_b,
            "rate_a": (both + only_a) / n if n else None, "rate_b": (both + only_b) / n if n else None,
            "diff": (only_a - only_b) / n if n else None, "p_mcnemar": mcnemar_exact(only_a, only_b)}


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
