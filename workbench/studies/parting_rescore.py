"""What carries the decision where a memory method's episode parts from ReAct's? A causal re-score.

Where a memory method (MemArbiter, the proactive agent) and ReAct play the same task from the same start and first
act differently at step k, the method's episode is replayed live to k (``Session.from_run``: its recorded actions,
its policy and LLM stages re-run as the run ran them) and its state there is scored twice over the same candidates:
as it stands, and under typed edits. The default edit is :class:`~workbench.agents.edits.ClearMemory`: the block
replaced by ReAct's (no memory, the history shown again; a reminder line stays), so the world and the history are the
same in both prompts by construction and only the layout differs; if the edited state picks ReAct's action, the
layout carries the parting. ``RemoveReminder`` asks the same of the proactive agent's reminder.

A row counts only where the replay reproduces the parting. The scores are the ``score`` decode's (every candidate in
one forward), whatever the run decoded, and the LLM stages run again live: ``reproduced`` says the replayed prompt
has the recorded length (and the recorded reminder) and its factual choice is the action the run wrote;
``takes the reference action`` is None where it is not, never counted. ``edited prompt is ReAct's`` compares the
edited prompt with ReAct's prompt at that step built from ReAct's own recorded episode, token for token: where it
holds, the two states differed in nothing but what the edit removed (the world and the history are the same), so a
decision that follows the edit is that piece of memory's, with nothing left over for the world or the history to
explain.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.agents.edits import ClearMemory, Edit
from workbench.agents.policy import build_policy
from workbench.agents.rescore import state_at
from workbench.eval.run_folder import read_config, read_episodes
from workbench.files import FormatError, atomic_write_text, present, read_json
from workbench.live.session import Session
from workbench.locks import folder_lock
from workbench.models import load_model

__all__ = ["partings", "parting_rescores", "parting_rescore_table"]


def partings(method_folder: str | Path, reference_folder: str | Path) -> list[dict]:
    """The tasks both runs played from the same first observation, with the first step at which their actions
    differ (``step``, 1-based, as every table of the workbench counts steps) and the two actions there; tasks whose
    episodes never part are left out.

    Raises:
        FileNotFoundError / FormatError: not run folders.
    """
    ref = {t.task_id: t for t in read_episodes(reference_folder)}
    out = []
    for t in read_episodes(method_folder):
        r = ref.get(t.task_id)
        if r is None or r.initial_observation != t.initial_observation:
            continue
        a, b = [s.action for s in t.steps], [s.action for s in r.steps]
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        if k is None:
            continue
        out.append({"task": t.task_id, "step": k + 1, "action": a[k], "reference action": b[k]})
    return out


def _same_path(a: object, b: object) -> bool:
    return isinstance(a, str) and Path(a).resolve() == Path(str(b)).resolve()


def _kept_rows(out: Path, method_folder, reference_folder, edits: Sequence[Edit]) -> dict[str, dict]:
    """The rows an earlier run of the same study kept in ``out`` (empty: no file yet)."""
    if not present(out):
        return {}
    kept = read_json(out, "parting re-score file")
    if not isinstance(kept, dict) or not isinstance(kept.get("rows"), list):
        raise FormatError(out, "not a parting re-score file (expected {'rows': [...]})", fix="move it away")
    for name, was, now in (("method", kept.get("method"), method_folder),
                           ("reference", kept.get("reference"), reference_folder)):
        if not _same_path(was, now):
            raise ValueError(f"{out} holds the re-scores of {name} run {was}, not {now}: name another file")
    if kept.get("edits") != [repr(e) for e in edits]:
        raise ValueError(f"{out} holds the re-scores under {kept.get('edits')}, not {[repr(e) for e in edits]}: "
                         "name another file")
    rows: dict[str, dict] = {}
    for i, row in enumerate(kept["rows"]):
        if not isinstance(row, dict) or not isinstance(row.get("task"), str):
            raise FormatError(out, "a row that names no task", where=f"rows[{i}]", fix="move the file away")
        if "reproduced" not in row:
            raise FormatError(out, "a row without the replay's checks (an older workbench wrote it)",
                              where=f"rows[{i}]", fix="move the file away and re-score")
        rows[row["task"]] = row
    return rows


def parting_rescores(method_folder: str | Path, reference_folder: str | Path, *,
                     edits: Sequence[Edit] = (ClearMemory(),), tasks: Sequence[str] | None = None,
                     model: Any = None, out: str | Path | None = None) -> list[dict]:
    """The parting state of each task (:func:`partings`), re-scored as played and under ``edits``.

    Args:
        method_folder: the memory method's run folder; ``reference_folder``: ReAct's (``memory: none``) on the same
            tasks, model, dtype and benchmark.
        edits: the edit set (default: ReAct's layout, ``ClearMemory()``).
        tasks: these task ids only (default: every parting); each must be one of the partings.
        model: the run's model already loaded in its dtype (default, or another model or dtype: the run's is
            loaded here).
        out: a JSON file to keep the rows in (written whole, atomically, after each task, with the folders, the
            edits and the model; its folder is locked while the study runs); a task already there is not scored
            again, so an interrupted study resumes.

    Returns:
        One row per task (the kept ones as kept): the step (1-based), the method's and ReAct's actions there; the
        replay's checks (``replay same choices`` of ``replayed steps`` before it, ``prompt tokens`` against the
        run's ``recorded prompt tokens``, ``reminder as recorded`` where the state shows one; ``reproduced``: all
        of these hold and the factual choice is the action the run wrote); p of both actions as played and edited,
        the edited state's choice, the total-variation distance; ``edited prompt is ReAct's`` (token for token,
        ReAct's prompt at that step built from ReAct's own recorded episode) and ``takes the reference action``
        (the edited state picks ReAct's action; None where the parting is not reproduced).

    Raises:
        ValueError: the folders are not the same agent on the same benchmark, the reference is not ReAct, a task
            is not a parting, or ``out`` holds another study. FormatError: ``out`` is malformed.
        FolderBusyError: another study writes into ``out``'s folder.
    """
    mc, rc = read_config(method_folder).run, read_config(reference_folder).run
    if (mc.model, mc.dtype, mc.env) != (rc.model, rc.dtype, rc.env):
        raise ValueError(f"{method_folder} ({mc.model}, {mc.dtype}, {mc.env}) and {reference_folder} ({rc.model}, "
                         f"{rc.dtype}, {rc.env}) are not the same agent on the same benchmark")
    if rc.memory != "none":
        raise ValueError(f"{reference_folder}: the reference is ReAct (memory none), not '{rc.memory}'")
    if isinstance(tasks, str):
        raise ValueError(f"tasks {tasks!r}: a list of task ids, not one string")
    found = partings(method_folder, reference_folder)
    if tasks is not None:
        unknown = sorted(set(tasks) - {p["task"] for p in found})
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not a parting of {method_folder} from {reference_folder} "
                             f"(its partings: {', '.join(p['task'] for p in found) or 'none'})")
    wanted = [p for p in found if tasks is None or p["task"] in tasks]
    if out is None:
        return _rescore(method_folder, reference_folder, mc, edits, wanted, model, {}, None)
    out = Path(out)
    with folder_lock(out.parent, f"workbench partings --out {out}"):
        done = _kept_rows(out, method_folder, reference_folder, edits)
        return _rescore(method_folder, reference_folder, mc, edits, wanted, model, done, out)


def _rescore(method_folder, reference_folder, cfg, edits, wanted, model, done: dict, out: Path | None) -> list[dict]:
    ref = {t.task_id: t for t in read_episodes(reference_folder)}
    ran = {t.task_id: t for t in read_episodes(method_folder)}
    lm = model if model is not None and (model.name, model.dtype) == (cfg.model, cfg.dtype) else None
    rows = []
    for p in wanted:
        if p["task"] in done:
            rows.append(done[p["task"]])
            continue
        lm = lm or load_model(cfg.model, dtype=cfg.dtype)
        row = _rescore_parting(method_folder, p, lm, edits, ran[p["task"]], ref[p["task"]])
        bad = [key for key, v in row.items() if isinstance(v, float) and not math.isfinite(v)]
        if bad:
            raise ValueError(f"{p['task']}: the re-score gave non-finite {', '.join(bad)} (nothing kept for it)")
        rows.append(row)
        done[p["task"]] = row
        if out is not None:
            _keep(out, method_folder, reference_folder, cfg, edits, list(done.values()))
    return rows


def _rescore_parting(method_folder, p: dict, lm, edits, ran, ref) -> dict:
    """One parting's row: the method's episode replayed live to the parting, its state re-scored under ``edits``."""
    k = p["step"] - 1
    with Session.from_run(str(method_folder), p["task"], model=lm) as s:
        replayed = s.replay(to_step=k)
        state = s.state
        r = s.rescore(list(edits), exact=True)
        # ReAct's prompt at step k, from ReAct's own recorded episode (its room, goal, history and observation)
        react_prompt = state_at(build_policy("none"), s.task, ref, k, r.candidates).prompt(s.agent)
    recorded = _record(ran, k)
    # the replay is the run's state: the recorded prompt length (and reminder, where there is one), and the
    # score decode over every candidate picks the action the run wrote
    same_prompt = r.prompt.n_tokens == recorded.get("prompt_tokens")
    same_reminder = state.block.reminder == recorded.get("reminder") if (state.block.reminder or
                                                                          recorded.get("reminder")) else None
    reproduced = r.choice == p["action"] and same_prompt and same_reminder is not False
    (pa, pa_ed), (pr, pr_ed) = (r.p_of(c) if c in r.candidates else (None, None)
                                for c in (p["action"], p["reference action"]))
    return {"task": p["task"], "step": p["step"], "action": p["action"],
            "reference action": p["reference action"], "candidates": len(r.candidates),
            "replay same choices": sum(x["same_choice"] for x in replayed), "replayed steps": len(replayed),
            "prompt tokens": r.prompt.n_tokens, "recorded prompt tokens": recorded.get("prompt_tokens"),
            **({"reminder as recorded": same_reminder} if same_reminder is not None else {}),
            "factual choice": r.choice, "reproduced": reproduced,
            "p action": pa, "p reference action": pr, "edited choice": r.edited_command,
            "p action edited": pa_ed, "p reference action edited": pr_ed, "tv": r.tv,
            "edited prompt is ReAct's": r.edited_prompt.tokens == react_prompt.tokens,
            "edited prompt tokens": r.edited_prompt.n_tokens,
            "reference prompt tokens": _record(ref, k).get("prompt_tokens"),
            "takes the reference action": (r.edited_command == p["reference action"]) if reproduced else None}


def _record(episode, k: int) -> dict:
    steps = (episode.meta or {}).get("steps") or []
    return steps[k] if k < len(steps) and isinstance(steps[k], dict) else {}


def _keep(out: str | Path, method_folder, reference_folder, cfg, edits, rows: list[dict]) -> None:
    from workbench.provenance import versions

    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps({"method": str(method_folder), "reference": str(reference_folder),
                                       "model": cfg.model, "dtype": cfg.dtype, "edits": [repr(e) for e in edits],
                                       "versions": versions(), "rows": rows}, indent=1, allow_nan=False) + "\n")


def parting_rescore_table(path: str | Path):
    """The kept rows of :func:`parting_rescores` (its ``out`` file) as a table.

    Raises:
        FileNotFoundError / FormatError: not such a file.
    """
    import pandas as pd

    kept = read_json(path, "parting re-score file")
    if not isinstance(kept, dict) or not isinstance(kept.get("rows"), list):
        raise FormatError(path, "not a parting re-score file (expected {'rows': [...]})", fix="move it away")
    return pd.DataFrame(kept["rows"])
