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

__all__ = ["AGMR_TYPES", "PUBLISHED", "episode_scores", "per_type_table", "summary_table", "task_type_table",
           "divergence_table", "reminder_table"]

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


def divergence_table(runs: dict[str, str | Path], reference: str):
    """Where each condition's episode parts from ``reference``'s on the same task, and what that step was worth:
    one row per (condition, task) both played, with whether the two started from the same observation (a JVM of
    random identity hashes lists a room's objects in another order: runs before ``envs.scienceworld.JVM_OPTIONS``),
    the first step (1-based) whose action differs (None: the same actions throughout), the two actions there, the
    points (score, 0-100) each side gained at that step, the final scores and their difference. A score difference
    equal to the step's difference in points is one decision, not a pattern.

    Args:
        runs: condition name -> run folder (ScienceWorld episodes), ``reference`` among them.

    Raises:
        ValueError: ``reference`` is not one of ``runs``, or a folder is not a ScienceWorld run.
    """
    import pandas as pd

    if reference not in runs:
        raise ValueError(f"reference '{reference}' is not one of the runs ({', '.join(runs)})")
    episodes = {name: {t.task_id: t for t in read_episodes(folder)} for name, folder in runs.items()}
    scores = {name: episode_scores(folder) for name, folder in runs.items()}
    rows = []
    ref = episodes[reference]
    for name, eps in episodes.items():
        if name == reference:
            continue
        for task_id in sorted(set(eps) & set(ref)):
            a, b = ref[task_id], eps[task_id]
            acts_a, acts_b = [s.action for s in a.steps], [s.action for s in b.steps]
            k = next((i for i, (x, y) in enumerate(zip(acts_a, acts_b)) if x != y), None)
            if k is None and len(acts_a) != len(acts_b):
                k = min(len(acts_a), len(acts_b))  # one episode went on where the other had ended

            def points(t, i):
                return round(100 * float(t.steps[i].reward or 0.0), 2) if i is not None and i < len(t.steps) else None

            score_a, score_b = scores[reference][task_id][1], scores[name][task_id][1]
            rows.append({"condition": name, "task": task_id, "task type": a.task_type,
                         "same start": a.initial_observation == b.initial_observation,
                         "parts at step": None if k is None else k + 1,
                         f"{reference} action": acts_a[k] if k is not None and k < len(acts_a) else None,
                         "action": acts_b[k] if k is not None and k < len(acts_b) else None,
                         f"{reference} points there": points(a, k), "points there": points(b, k),
                         f"{reference} score": score_a, "score": score_b, "score difference": score_b - score_a})
    out = pd.DataFrame(rows)
    if len(out):
        out["parts at step"] = out["parts at step"].astype("Int64")
    return out


def reminder_table(folder: str | Path):
    """The proactive agent's reminders in a run folder, per episode: its steps, those that carried a reminder, those
    whose action the reminder moved (``reminder_effect.changed``: the same state re-scored without the reminder line
    picks another action), and the score.

    Raises:
        ValueError: not a ScienceWorld run (no scores).
    """
    import pandas as pd

    scores = episode_scores(folder)
    rows = []
    for t in read_episodes(folder):
        steps = [m for m in t.meta.get("steps") or [] if isinstance(m, dict)]
        said = [m for m in steps if m.get("reminder")]
        moved = [m for m in said if (m.get("reminder_effect") or {}).get("changed")]
        rows.append({"task": t.task_id, "steps": t.n_steps, "reminders": len(said), "moved the action": len(moved),
                     "score": scores[t.task_id][1]})
    return pd.DataFrame(rows)
