"""Tables that compare memory conditions run on the same tasks."""

from __future__ import annotations

__all__ = ["condition_table", "mcnemar_exact", "paired_outcomes"]


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


