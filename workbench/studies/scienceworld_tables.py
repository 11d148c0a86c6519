"""ScienceWorld's tables (issue 48): the score and success of each condition per task type, the AGMR paper's 17 types
and the 7 long types it dropped reported apart, and the published numbers beside them.

A run's episode score is its highest score (0-100, ETO's protocol: ``workbench.envs.scienceworld``); success is a
score of 100. ``Perf.`` in the AGMR paper's Table 1 and the average score of ETO's Table 3 are this mean score.
"""

from __future__ import annotations

from pathlib import Path
from statistics import mean

from workbench.envs.scienceworld import ETO_TYPES, LONG_TYPES, SPLITS, STEP_LIMITS, TASK_TYPES, variations
from workbench.eval.run_folder import read_episodes

__all__ = ["AGMR_TYPES", "PUBLISHED", "episode_scores", "per_type_table", "summary_table", "task_type_table"]

#: the AGMR paper's SciWorld test set: ETO's types less the 7 with a step limit of 60 or more (its E.1)
AGMR_TYPES = tuple(t for t in ETO_TYPES if t not in LONG_TYPES)

#: published average scores (0-100) on ScienceWorld, with where they come from; not comparable one to one: other
#: models (7-8B and GPT-4 against our 135M), other test sets (ETO's 24 types vs the AGMR paper's 17). ETO's "seen" set
#: is 194 dev variations of its 24 types (eval_agent/data/sciworld/dev_indices.json), its "unseen" set the 211 test
#: variations, which are ``test@10`` over its types here: the unseen numbers are the ones to set beside ours
PUBLISHED = [
    {"source": "ETO (Song et al. 2024), Table 3", "model": "Llama-2-7B-Chat + SFT", "condition": "SFT (no memory)",
     "test set": "ETO's 24 types: seen (194 dev) / unseen (211 test = test@10)", "score": "67.4 / 53.0"},
    {"source": "ETO (Song et al. 2024), Table 3", "model": "Llama-2-7B-Chat + ETO", "condition": "ETO (no memory)",
     "test set": "ETO's 24 types: seen (194 dev) / unseen (211 test = test@10)", "score": "73.8 / 65.0"},
    {"source": "ETO (Song et al. 2024), Table 3", "model": "GPT-4", "condition": "prompted",
     "test set": "ETO's 24 types: seen (194 dev) / unseen (211 test = test@10)", "score": "64.8 / 64.4"},
    {"source": "AGMR, Table 1", "model": "Qwen-2.5-7B-Instruct", "condition": "ReAct / ICL / Traj / AGMR",
     "test set": "the AGMR paper's 17 types", "score": "29.88 / 29.38 / 67.69 / 77.20"},
    {"source": "AGMR, Table 1", "model": "Llama-3.1-8B-Instruct", "condition": "ReAct / ICL / Traj / AGMR",
     "test set": "the AGMR paper's 17 types", "score": "26.50 / 34.97 / 76.18 / 83.74"},
]


def _set(task_type: str) -> str:
    return ("AGMR 17" if task_type in AGMR_TYPES else "long (AGMR drops)" if task_type in LONG_TYPES
            else "outside ETO")


def task_type_table(task_types=None):
    """The benchmark's task types (default all 30, in the wheel's order): the set each belongs to (the AGMR paper's
    17, its 7 long ones, or outside ETO's 24), the variations of each split, and the step limit with its source
    (ETO's, or ours for the 6 types ETO leaves out: ``workbench.envs.scienceworld``)."""
    import pandas as pd

    rows = []
    for t in task_types or TASK_TYPES:
        rows.append({"task type": t, "set": _set(t), **{f"{s} variations": len(variations(t, s)) for s in SPLITS},
                     "step limit": STEP_LIMITS[t], "limit from": "ETO" if t in ETO_TYPES else "ours"})
    return pd.DataFrame(rows)


def episode_scores(folder: str | Path) -> dict[str, tuple[str, float, bool, int, float | None]]:
    """``task_id -> (task type, score 0-100, success, steps, memory tokens)`` of a ScienceWorld run folder's episodes
    (memory tokens: the mean over the episode's steps of its memory block's tokens, as the runner counts them; None
    where the episode records none).

    Raises:
        ValueError: an episode without a score (not a ScienceWorld run).
    """
    out = {}
    for t in read_episodes(folder):
        score = t.meta.get("score")
        if not isinstance(score, (int, float)):
            raise ValueError(f"{folder}: episode {t.task_id} has no score (meta.score): not a ScienceWorld run")
        per_step = [s.get("memory_tokens") for s in t.meta.get("steps") or [] if isinstance(s, dict)]
        per_step = [m for m in per_step if isinstance(m, (int, float))]
        out[t.task_id] = (t.task_type, float(score), bool(t.success), t.n_steps,
                          mean(per_step) if per_step else None)
    return out


def _group(rows: list[tuple], types) -> dict:
    picked = [r for r in rows if r[0] in types]
    if not picked:
        return {"n": 0, "score": None, "success_%": None, "steps": None, "memory_tokens": None}
    mem = [r[4] for r in picked if r[4] is not None]
    return {"n": len(picked), "score": round(mean(r[1] for r in picked), 2),
            "success_%": round(100 * mean(r[2] for r in picked), 1), "steps": round(mean(r[3] for r in picked), 1),
            "memory_tokens": round(mean(mem), 1) if mem else None}


def per_type_table(runs: dict[str, str | Path]):
    """Mean score and success (%) per task type (rows) and condition (columns ``<condition> score`` and
    ``<condition> success_%``), over the tasks every run played; types in the wheel's order, each marked as in the
    AGMR paper's 17, one of its 7 long ones, or outside ETO's 24.

    Args:
        runs: condition name -> run folder.
    """
    import pandas as pd

    scores = {name: episode_scores(folder) for name, folder in runs.items()}
    common = set.intersection(*(set(s) for s in scores.values())) if scores else set()
    rows = []
    for t in TASK_TYPES:
        row: dict = {"task type": t, "set": _set(t)}
        n = 0
        for name, s in scores.items():
            g = _group([v for k, v in s.items() if k in common], (t,))
            n = g["n"]
            row[f"{name} score"], row[f"{name} success_%"] = g["score"], g["success_%"]
        if n:
            rows.append({"task type": row.pop("task type"), "n": n, **row})
    return pd.DataFrame(rows)


def summary_table(runs: dict[str, str | Path]):
    """Each condition's mean score, success, steps and memory tokens (a step's memory block, averaged per episode) over
    the AGMR paper's 17 types, the 7 long types, and ETO's 24
    (the tasks every run played)."""
    import pandas as pd

    scores = {name: episode_scores(folder) for name, folder in runs.items()}
    common = set.intersection(*(set(s) for s in scores.values())) if scores else set()
    rows = []
    for name, s in scores.items():
        played = [v for k, v in s.items() if k in common]
        for label, types in (("AGMR's 17 types", AGMR_TYPES), ("the 7 long types", LONG_TYPES),
                             ("ETO's 24 types", ETO_TYPES)):
            rows.append({"condition": name, "set": label, **_group(played, types)})
    return pd.DataFrame(rows)
