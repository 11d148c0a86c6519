"""What a table reads: the rows, dtype and per-item outcomes of run folders, and a table's ``.json``.

A run folder ``ROOT/<model>/<condition>`` (``workbench run``, ``workbench merge-runs``, notebook 01,
``benchmarks/agent_eval.py``) gives a row its two parts and the items a paired comparison matches::

    config.json          run.dtype (absent in folders written before runs recorded it: float32)
    metrics.json         the episodes' part of the row
    trajectories.jsonl   one episode per task      -> {task_id: won}
    teacher_forced.json  result: the teacher-forcing part; key.dtype;
                         per_step: one expert step -> {(task_id, step): the expert's action was chosen}

Two conditions of one model are compared on the items both scored, never on rates of different item sets, so a
condition played on fewer tasks cannot look better or worse for the tasks it skipped. A table keeps the outcomes
in its ``.json`` (``encode_outcomes``), so a later version can recompute a comparison whose runs are gone.
Nothing here writes: a reader only ever sees files whole (runs and tables are written by rename).
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.eval.compare import paired_outcomes
from workbench.eval.metrics import action_patterns
from workbench.eval.run_folder import read_episodes

__all__ = ["DEFAULT_DTYPE", "PAIRS", "Outcomes", "band_accuracy", "band_label", "band_pairs_from", "decode_outcomes",
           "encode_outcomes", "folder_dtype", "folder_decisions", "folder_outcomes", "folder_table", "parse_step_bands",
           "same_decisions", "paired_table", "pairs_from", "read_table"]

DEFAULT_DTYPE = "float32"  # what runs written before they recorded a dtype were played in

# ({task_id: won}, {(task_id, step): expert action chosen}) of one run folder
Outcomes = tuple[dict[str, bool], dict[tuple[str, int], bool]]

# the comparisons of the memory-condition tables: (A, B) reads "A vs B"
PAIRS: list[tuple[str, str]] = [("traj", "none"), ("icl", "none"), ("traj", "icl"), ("traj", "other_type"),
                                ("traj", "random_same")]


def read_json(path: Path) -> dict:
    """A JSON object from ``path``.

    Args:
        path: a ``.json`` file of a run folder.

    Returns:
        The object.

    Raises:
        ValueError: the file is not a JSON object (the message names it).
    """
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); a run writes it whole, so it was edited or truncated "
                         "by hand: run that condition again") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def folder_outcomes(root: Path, models: list[str], conds: list[str]) -> dict[tuple[str, str], Outcomes]:
    """Which episodes were won and which teacher-forced steps chose the expert's action, per run folder.

    Args:
        root: the runs root; a folder is ``root/<model>/<cond>``.
        models: the models to look for.
        conds: the memory conditions to look for.

    Returns:
        ``{(model, cond): ({task_id: won}, {(task_id, step): chosen right})}`` for every folder with episodes or
        teacher-forced steps; folders with neither are left out.
    """
    out = {}
    for model in models:
        for cond in conds:
            folder = Path(root) / model / cond
            eps = {t.task_id: t.success for t in read_episodes(folder)}  # strict; none when the file is missing
            tf = (read_json(folder / "teacher_forced.json")
                  if (folder / "teacher_forced.json").exists() else {"per_step": []})
            steps = {(r["task_id"], r["step"]): r["chosen"] == r["expert"] for r in tf.get("per_step", [])}
            if eps or steps:
                out[(model, cond)] = eps, steps
    return out


def folder_decisions(folder: Path) -> dict[tuple[str, int], str]:
    """The action a run folder's agent chose at each teacher-forced step: ``{(task_id, step): chosen}`` (empty
    without ``teacher_forced.json``)."""
    folder = Path(folder)
    if not (folder / "teacher_forced.json").exists():
        return {}
    return {(r["task_id"], r["step"]): r["chosen"] for r in read_json(folder / "teacher_forced.json").get("per_step", [])}


def same_decisions(a: dict[tuple[str, int], str], b: dict[tuple[str, int], str]) -> dict:
    """How often two agents chose the same action at the same teacher-forced states (``folder_decisions`` of
    each): ``{"n": common steps, "same": steps with the same choice, "share": same / n}`` (``share`` None when
    they share no step). Unlike paired accuracy, this counts a change between two wrong actions too: it is the
    agreement of a bfloat16 agent with its float32 twin."""
    common = [k for k in a if k in b]
    same = sum(a[k] == b[k] for k in common)
    return {"n": len(common), "same": same, "share": same / len(common) if common else None}


def pairs_from(outcomes: dict[tuple[str, str], Outcomes], models: list[str], pairs: list[tuple[str, str]]
               ) -> list[dict]:
    """Paired comparisons of conditions per model: episodes matched by task, teacher-forced steps by (task, step).

    Args:
        outcomes: what ``folder_outcomes`` (or ``decode_outcomes``) returns.
        models: the models, in the order of the lines.
        pairs: ``(A, B)`` condition pairs, in the order of the lines within a model.

    Returns:
        One line per (model, pair, kind) with at least one item both sides scored: ``model``, ``a``, ``b``,
        ``kind`` (``"episodes"`` or ``"TF steps"``) and the fields of ``workbench.eval.compare.paired_outcomes``
        (``n``, ``rate_a``, ``rate_b``, ``diff``, ``only_a``, ``only_b``, ``both``, ``p_mcnemar``, ...).
    """
    return [line for model in models for a, b in pairs
            for line in _paired({"model": model, "a": a, "b": b}, outcomes, (model, a), (model, b))]


def _paired(head: dict, outcomes: dict[tuple[str, str], Outcomes], side_a: tuple[str, str],
            side_b: tuple[str, str]) -> list[dict]:
    """``head`` + the paired episodes and teacher-forced steps of two (model, condition) folders, where both
    sides scored at least one common item."""
    (ea, ta), (eb, tb) = outcomes.get(side_a, ({}, {})), outcomes.get(side_b, ({}, {}))
    lines = []
    for kind, x, y in (("episodes", ea, eb), ("TF steps", ta, tb)):
        r = paired_outcomes(x, y)
        if r["n"]:
            lines.append(head | {"kind": kind} | r)
    return lines


def parse_step_bands(specs: list[str]) -> list[tuple[int, int | None]]:
    """Teacher-forced step bands from ``"K"``, ``"K-L"`` or ``"K-"`` (step K to the last), in the order given.

    Raises:
        ValueError: a spec that is none of these, a band whose end precedes its start, or bands that overlap.
    """
    bands: list[tuple[int, int | None]] = []
    for spec in specs:
        lo, dash, hi = spec.strip().partition("-")
        try:
            band = (int(lo), (int(hi) if hi else None) if dash else int(lo))
        except ValueError:
            raise ValueError(f"step band '{spec}': expected K, K-L or K- with whole numbers K <= L") from None
        if band[0] < 0 or (band[1] is not None and band[1] < band[0]):
            raise ValueError(f"step band '{spec}': expected K, K-L or K- with whole numbers 0 <= K <= L")
        end = float("inf") if band[1] is None else band[1]
        for other in bands:
            if band[0] <= (float("inf") if other[1] is None else other[1]) and other[0] <= end:
                raise ValueError(f"step band '{spec}' overlaps '{band_label(other)}': bands must be disjoint")
        bands.append(band)
    return bands


def band_label(band: tuple[int, int | None]) -> str:
    """``(1, 3)`` -> ``"1–3"``, ``(4, None)`` -> ``"4+"``, ``(0, 0)`` -> ``"0"``."""
    lo, hi = band
    return f"{lo}+" if hi is None else (f"{lo}" if hi == lo else f"{lo}–{hi}")


def in_band(step: int, band: tuple[int, int | None]) -> bool:
    return band[0] <= step and (band[1] is None or step <= band[1])


def band_pairs_from(outcomes: dict[tuple[str, str], Outcomes], models: list[str], pairs: list[tuple[str, str]],
                    bands: list[tuple[int, int | None]]) -> list[dict]:
    """``pairs_from`` over the teacher-forced steps of each band alone: one line per (model, pair, band) with
    ``kind`` ``"TF steps <band>"`` (a comparison early in the expert's plan, where a memory block still holds the
    whole history, and later, where a budget may have cut it)."""
    kept = [{key: ({}, {k: v for k, v in steps.items() if in_band(k[1], band)}) for key, (_, steps) in outcomes.items()}
            for band in bands]  # episodes left out: only the TF lines of each band
    return [line | {"kind": f"TF steps {band_label(band)}"}
            for model in models for a, b in pairs for band, within in zip(bands, kept)
            for line in _paired({"model": model, "a": a, "b": b}, within, (model, a), (model, b))]


def band_accuracy(steps: dict[tuple[str, int], bool], bands: list[tuple[int, int | None]]) -> dict[str, list]:
    """``{band label: [teacher-forced steps in it, share right (None: no step)]}`` of one folder's steps."""
    out = {}
    for band in bands:
        hits = [v for k, v in steps.items() if in_band(k[1], band)]
        out[band_label(band)] = [len(hits), sum(hits) / len(hits) if hits else None]
    return out


def model_pairs_from(outcomes: dict[tuple[str, str], Outcomes], conds: list[str],
                     model_pairs: list[tuple[str, str]]) -> list[dict]:
    """Paired comparisons of models under the same condition (v2 vs v1 on Traj: the same tasks, the same steps).

    Args:
        outcomes: what ``folder_outcomes`` (or ``decode_outcomes``) returns.
        conds: the conditions, in the order of the lines within a pair of models.
        model_pairs: ``(A, B)`` model pairs.

    Returns:
        One line per (pair, condition, kind) with at least one item both models scored: ``memory``, ``a``, ``b``
        (the models), ``kind`` and the fields of ``workbench.eval.compare.paired_outcomes``.
    """
    return [line for a, b in model_pairs for cond in conds
            for line in _paired({"memory": cond, "a": a, "b": b}, outcomes, (a, cond), (b, cond))]


def paired_table(root: Path, models: list[str], pairs: list[tuple[str, str]] = PAIRS) -> list[dict]:
    """``pairs_from`` the run folders ``root/<model>/<cond>`` of every condition the pairs name.

    Args:
        root: the runs root.
        models: the models.
        pairs: ``(A, B)`` condition pairs (default: ``PAIRS``).

    Returns:
        The paired lines, as ``pairs_from``.
    """
    return pairs_from(folder_outcomes(root, models, sorted({c for p in pairs for c in p})), models, pairs)


def encode_outcomes(outcomes: dict[tuple[str, str], Outcomes]) -> dict:
    """Outcomes as compact JSON, so a table keeps what its paired comparisons were computed from.

    Task ids are listed once; episodes are ``[task index, won]``, steps ``[task index, step, chosen right]``.

    Args:
        outcomes: ``{(model, cond): (episodes, steps)}``.

    Returns:
        ``{"tasks": [...], "runs": [{"model", "memory", "episodes", "tf_steps"}, ...]}``.
    """
    tasks = sorted({t for eps, steps in outcomes.values() for t in [*eps, *(k[0] for k in steps)]})
    index = {t: i for i, t in enumerate(tasks)}
    return {"tasks": tasks, "runs": [
        {"model": m, "memory": c, "episodes": [[index[t], int(w)] for t, w in eps.items()],
         "tf_steps": [[index[t], k, int(h)] for (t, k), h in steps.items()]}
        for (m, c), (eps, steps) in outcomes.items()]}


def decode_outcomes(data: dict) -> dict[tuple[str, str], Outcomes]:
    """The inverse of ``encode_outcomes``.

    Args:
        data: what ``encode_outcomes`` returned, read back from JSON.

    Returns:
        ``{(model, cond): ({task_id: won}, {(task_id, step): chosen right})}``.

    Raises:
        KeyError, IndexError, TypeError, ValueError: ``data`` is not what ``encode_outcomes`` writes.
    """
    tasks = data["tasks"]
    return {(r["model"], r["memory"]): ({tasks[i]: bool(w) for i, w in r["episodes"]},
                                        {(tasks[i], k): bool(h) for i, k, h in r["tf_steps"]})
            for r in data["runs"]}


def folder_dtype(folder: Path) -> str:
    """The dtype a run folder was played in: ``config.json``'s ``run.dtype``, else ``teacher_forced.json``'s
    ``key.dtype``, else ``DEFAULT_DTYPE`` (folders written before runs recorded it).

    Args:
        folder: a run folder ``ROOT/<model>/<condition>``.

    Returns:
        The dtype name, e.g. ``"float32"`` or ``"bfloat16"``.

    Raises:
        ValueError: a dtype field is not a non-empty string, or the episodes and the teacher forcing of the folder
            name different dtypes (one row would mix them).
    """
    found = {}
    for name, section in (("config.json", "run"), ("teacher_forced.json", "key")):
        if (folder / name).exists():
            dtype = (read_json(folder / name).get(section) or {}).get("dtype")
            if dtype is not None and (not isinstance(dtype, str) or not dtype):
                raise ValueError(f"{folder / name}: field '{section}.dtype' is {dtype!r}; expected a dtype name "
                                 "such as 'float32' or 'bfloat16'")
            if dtype is not None:
                found[f"{name} {section}.dtype"] = dtype
    if len(set(found.values())) > 1:
        raise ValueError(f"{folder}: " + " but ".join(f"{k} is {v!r}" for k, v in found.items())
                         + ": its episodes and teacher forcing were played in different dtypes; play one again, or "
                         "put them in condition folders of their own")
    return next(iter(found.values()), DEFAULT_DTYPE)


def folder_table(root: Path, models: list[str], conds: list[str]) -> list[dict]:
    """One row per (model, condition) with a run folder ``root/<model>/<cond>`` (``metrics.json`` of the episodes,
    ``teacher_forced.json``), whatever wrote it (``workbench run``, ``merge-runs``, notebook 01).

    Args:
        root: the runs root.
        models: the models, in row order.
        conds: the memory conditions, in row order within a model.

    Returns:
        Rows with ``model``, ``memory``, ``dtype``, the episode fields (``episodes``, ``success_rate``,
        ``avg_steps``, ``memory_tokens``, ``by_task_type``, ``action_patterns``, ``sr_at_k``) and the teacher-forcing fields
        (``tf_steps``, ``tf_accuracy``, ``tf_mean_p_expert``); a part the folder lacks is ``None``.
    """
    rows = []
    for model in models:
        for cond in conds:
            folder = Path(root) / model / cond
            m = read_json(folder / "metrics.json") if (folder / "metrics.json").exists() else {}
            tf = (read_json(folder / "teacher_forced.json")["result"]
                  if (folder / "teacher_forced.json").exists() else {})
            if not m and not tf:
                continue
            rows.append({"model": model, "memory": cond, "dtype": folder_dtype(folder), "episodes": m.get("n_episodes"),
                         "success_rate": m.get("success_rate"), "avg_steps": m.get("avg_steps"),
                         "memory_tokens": m.get("memory_tokens"), "tf_steps": tf.get("n_steps"),
                         "tf_accuracy": tf.get("accuracy"), "tf_mean_p_expert": tf.get("mean_p_expert"),
                         "by_task_type": {k: v["success_rate"] for k, v in (m.get("by_task_type") or {}).items()},
                         "action_patterns": _action_patterns(folder, m), "sr_at_k": m.get("sr_at_k")})
    return rows


def _action_patterns(folder: Path, metrics: dict) -> dict | None:
    """A run's action patterns as ``metrics.json`` recorded them, or recomputed from its episodes where that
    record predates one of the current measures (it lacks a key ``action_patterns`` now returns)."""
    recorded = metrics.get("action_patterns")
    rows = folder / "trajectories.jsonl"
    if not recorded or set(action_patterns([])) <= set(recorded) or not rows.exists():
        return recorded
    trajs = read_episodes(folder)  # strict: a damaged file is an error, not a silent fallback
    return action_patterns(trajs) if trajs else recorded


def read_table(path: Path) -> dict:
    """A table's ``.json`` (``write_table``), checked, with ``paired`` and ``outcomes`` always present.

    Args:
        path: the ``NAME.json``.

    Returns:
        The record; ``outcomes`` decoded (empty for tables written before they kept outcomes), ``paired`` empty if
        absent, every row with a ``dtype`` (``DEFAULT_DTYPE`` for tables written before they recorded it).

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not such a table (the message names it and what is wrong).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such table (a .json written by write_table / agent_eval.py --table)")
    try:
        table = read_json(path)
        if not all({"model", "memory"} <= r.keys() for r in table["rows"]):
            raise KeyError("a row without model or memory")
        return {**table, "rows": [{**r, "dtype": r.get("dtype") or DEFAULT_DTYPE} for r in table["rows"]],
                "paired": table.get("paired", []),
                "outcomes": decode_outcomes(table["outcomes"]) if table.get("outcomes") else {}}
    except (OSError, KeyError, TypeError, IndexError, AttributeError, ValueError) as e:
        raise ValueError(f"{path} is not a table written by write_table (agent_eval.py --table) ({e!r})") from e
