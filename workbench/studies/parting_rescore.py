"""What carries the decision where a memory method's episode parts from ReAct's? A causal re-score.

Where a memory method (MemArbiter, the proactive agent) and ReAct play the same task from the same start and first
act differently at step k, the method's episode is replayed live to k (``Session.from_run``: its recorded actions,
its policy and LLM stages as the run had them) and its state there is scored twice over the same candidates: as it
stands, and under typed edits. The default edit is :class:`~workbench.agents.edits.ClearMemory`: the block replaced
by ReAct's (no memory, the history shown again; a reminder line stays), so the world and the history are the same in
both prompts by construction and only the layout differs; if the edited state picks ReAct's action, the layout
carries the parting. ``RemoveReminder`` asks the same of the proactive agent's reminder.

The scores are the ``score`` decode's (every candidate in one forward), whatever the run decoded; a row says
whether that factual choice is the action the run wrote (the constrained decode's beam), so a parting the replay
does not reproduce is seen as such, never read as an effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.agents.edits import ClearMemory, Edit
from workbench.eval.run_folder import read_config, read_episodes
from workbench.files import atomic_write_text, present, read_json
from workbench.live.session import Session
from workbench.models import load_model

__all__ = ["partings", "parting_rescores", "parting_rescore_table"]


def partings(method_folder: str | Path, reference_folder: str | Path) -> list[dict]:
    """The tasks both runs played from the same first observation, with the first step (0-based index) at which
    their actions differ and the two actions there; tasks whose episodes never part are left out.

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
        out.append({"task": t.task_id, "step": k, "action": a[k], "reference action": b[k]})
    return out


def parting_rescores(method_folder: str | Path, reference_folder: str | Path, *,
                     edits: Sequence[Edit] = (ClearMemory(),), tasks: Sequence[str] | None = None,
                     model: Any = None, out: str | Path | None = None) -> list[dict]:
    """The parting state of each task (:func:`partings`), re-scored as played and under ``edits``.

    Args:
        method_folder: the working-memory method's run folder; ``reference_folder``: ReAct's (``memory: none``)
            on the same tasks, model and dtype.
        tasks: these task ids only (default: every parting).
        model: the run's model already loaded in its dtype (default: loaded here).
        edits: the edit set (default: ReAct's layout, ``ClearMemory()``).
        out: a JSON file to keep the rows in (written whole, atomically, with the folders, the edits and the
            model); a task already there is not scored again, so an interrupted study resumes.

    Returns:
        One row per task: the step (1-based), the method's and ReAct's actions there, the replay's check (its
        factual choice and whether it is the action the run wrote), p of both actions as played and with ReAct's
        block, the edited state's choice, the total-variation distance, and ``takes the reference action`` (the edited
        state picks ReAct's action), with the prompt lengths of the edited state and of ReAct's recorded one
        (equal where the edit rebuilds ReAct's prompt).

    Raises:
        ValueError: the folders are of different models or dtypes, or ``reference_folder`` is not a ReAct run.
    """
    mc, rc = read_config(method_folder).run, read_config(reference_folder).run
    if (mc.model, mc.dtype, mc.env) != (rc.model, rc.dtype, rc.env):
        raise ValueError(f"{method_folder} ({mc.model}, {mc.dtype}, {mc.env}) and {reference_folder} ({rc.model}, "
                         f"{rc.dtype}, {rc.env}) are not the same agent on the same benchmark")
    if rc.memory != "none":
        raise ValueError(f"{reference_folder}: the reference is ReAct (memory none), not '{rc.memory}'")
    done: dict[str, dict] = {}
    if out is not None and present(out):
        kept = read_json(out, "parting re-score file")
        if not isinstance(kept, dict) or not isinstance(kept.get("rows"), list):
            raise ValueError(f"{out}: not a parting re-score file (expected {{'rows': [...]}}); move it away")
        if ((kept.get("method"), kept.get("reference"), kept.get("edits"))
                != (str(method_folder), str(reference_folder), [repr(e) for e in edits])):
            raise ValueError(f"{out} holds the re-scores of {kept.get('method')} against {kept.get('reference')} "
                             f"under {kept.get('edits')}, not these: name another file")
        done = {r["task"]: r for r in kept["rows"]}
    ref = {t.task_id: t for t in read_episodes(reference_folder)}
    wanted = [p for p in partings(method_folder, reference_folder) if tasks is None or p["task"] in tasks]
    lm = model if model is not None and (model.name, model.dtype) == (mc.model, mc.dtype) else None
    rows = []
    for p in wanted:
        if p["task"] in done:
            rows.append(done[p["task"]])
            continue
        lm = lm or load_model(mc.model, dtype=mc.dtype)
        with Session.from_run(str(method_folder), p["task"], model=lm) as s:
            replayed = s.replay(to_step=p["step"])
            r = s.rescore(list(edits), exact=True)
        (pa, pa_ed), (pr, pr_ed) = (r.p_of(c) if c in r.candidates else (None, None)
                                    for c in (p["action"], p["reference action"]))
        rows.append({"task": p["task"], "step": p["step"] + 1, "action": p["action"],
                     "reference action": p["reference action"], "candidates": len(r.candidates),
                     "replay same choices": sum(x["same_choice"] for x in replayed), "replayed steps": len(replayed),
                     "factual choice": r.choice, "factual is the run's": r.choice == p["action"],
                     "p action": pa, "p reference action": pr, "edited choice": r.edited_command,
                     "p action edited": pa_ed, "p reference action edited": pr_ed, "tv": r.tv,
                     "takes the reference action": r.edited_command == p["reference action"],
                     "edited prompt tokens": r.edited_prompt.n_tokens,
                     "reference prompt tokens": _prompt_tokens(ref[p["task"]], p["step"])})
        done[p["task"]] = rows[-1]
        if out is not None:
            _keep(out, method_folder, reference_folder, mc, edits, list(done.values()))
    return rows


def _prompt_tokens(episode, k: int) -> int | None:
    steps = (episode.meta or {}).get("steps") or []
    return steps[k].get("prompt_tokens") if k < len(steps) and isinstance(steps[k], dict) else None


def _keep(out: str | Path, method_folder, reference_folder, cfg, edits, rows: list[dict]) -> None:
    import json

    from workbench.provenance import versions

    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps({"method": str(method_folder), "reference": str(reference_folder),
                                       "model": cfg.model, "dtype": cfg.dtype, "edits": [repr(e) for e in edits],
                                       "versions": versions(), "rows": rows}, indent=1) + "\n")


def parting_rescore_table(path: str | Path):
    """The kept rows of :func:`parting_rescores` (its ``out`` file) as a table.

    Raises:
        FileNotFoundError / FormatError / ValueError: not such a file.
    """
    import pandas as pd

    kept = read_json(path, "parting re-score file")
    if not isinstance(kept, dict) or not isinstance(kept.get("rows"), list):
        raise ValueError(f"{path}: not a parting re-score file (expected {{'rows': [...]}})")
    return pd.DataFrame(kept["rows"])
