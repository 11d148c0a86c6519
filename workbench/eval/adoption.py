"""Episodes adopted from another run folder instead of played again: the same agent on the same tasks under the same parameters (or the same memory at every step), with their provenance recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path

from workbench.agents.policy import replay
from workbench.envs.base import Task
from workbench.eval.config import RunConfig, policy_for, select_tasks
from workbench.eval.run_folder import (
    CONFIG_FILE,
    _episode_lines,
    check_resume,
    identity_diff,
    memory_base_digest,
    model_adapter_hash,
    played_forward,
    read_config,
    write_run_config,
)
from workbench.eval.sweep_status import refuse_live_folders
from workbench.files import read_json
from workbench.memory.trajectory import (
    Trajectory,
    atomic_write_text,
)

__all__ = ["ADOPT_IGNORES", "adopt_episodes", "adopt_same_memory", "adopt", "SAME_MEMORY_MAY_DIFFER", "adopt_runs"]


# what one task's episode does not depend on: which other tasks (or task types) the run plays, and its teacher forcing
ADOPT_IGNORES = ("tasks", "task_types", "teacher_forcing", "teacher_forcing_tasks")


def adopt_episodes(cfg: RunConfig, source: str | Path) -> list[str]:
    """Copy into ``cfg.out`` the episodes that the run folder ``source`` already played and ``cfg`` would play.

    An episode depends on the run's parameters except :data:`ADOPT_IGNORES` (teacher forcing is scored apart),
    so a notebook whose Traj row is the Traj run of notebook 01 on the same tasks, model, dtype and step limit
    reads those episodes instead of playing them again. Only the tasks of ``cfg``'s slice that ``cfg.out`` lacks
    are copied; ``run``/``drive`` with ``resume=True`` then plays the rest. ``config.json`` records where the
    episodes came from (``adopted``: the source folder relative to ``cfg.out``, the number of episodes, the
    versions they were played with), and the trajectories file is rewritten atomically, so a kill leaves the
    folder as it was or with every episode copied.

    Returns:
        The task ids adopted, in the source's order (empty: ``source`` holds none that ``cfg.out`` lacks).

    Raises:
        FileNotFoundError: ``source`` holds no run (no ``config.json``).
        ValueError: ``source`` was played with other parameters (the keys named), another adapter under the
            model's name, or another state of the memory base; or ``cfg.out`` holds a run of other parameters.
            Nothing is written then.
    """
    src = Path(source)
    saved, theirs = _source_run(src)
    if diff := identity_diff(theirs, cfg.identity(), ADOPT_IGNORES):
        raise ValueError(f"{src}: played with other parameters than {cfg.out} {diff}; its episodes are not this "
                         "run's")
    _check_same_agent(cfg, src, saved)
    if (now := memory_base_digest(cfg)) is not None and saved.get("memory_base_digest") != now:
        raise ValueError(f"{src}: played over another state of the memory base {cfg.memory_base or '(the default)'}")
    done = check_resume(cfg, resume=True)  # refuses a folder of other parameters before anything is written
    wanted = {t.task_id for t in select_tasks(cfg)} - done
    adopted = [(tid, line) for tid, line in _episode_lines(src / "trajectories.jsonl") if tid in wanted]
    _write_adopted(cfg, src, saved, adopted)
    return [tid for tid, _ in adopted]


def adopt_same_memory(cfg: RunConfig, source: str | Path) -> list[str]:
    """Copy into ``cfg.out`` the episodes of ``source``, a run of the same parameters but for the memory policy's
    (:data:`SAME_MEMORY_MAY_DIFFER`: another memory base, another budget, a proactive memory agent beside ReAct's
    none...), on which ``cfg``'s policy shows the agent exactly the same memory: replayed along the episode's own
    history, its memory block (pieces, P_t, reminder, entry) equals the source policy's at every step. Each step's
    policy record is ours (a MemArbiter block records the budget it was assembled under; the decision's record
    depends on the prompt alone).

    The agent decides from its prompt alone and the environment answers an action deterministically, so such an
    episode *is* ``cfg``'s episode of that task: played again on the same machine it would be the same, bit for
    bit. A refined base changes a few entries (AGMR: 9 of 200), so most test tasks retrieve an unchanged one; their
    Traj episodes are the refined base's, and the comparison of the two rows is the refinement's effect alone,
    not bfloat16 kernels differing between the machines the rows were played on. Tasks whose memory differs at
    some step are left for ``run``/``drive`` (``resume=True``) to play. ``config.json`` records it (``adopted``,
    ``rule: same memory``).

    Returns:
        The task ids adopted.

    Raises:
        FileNotFoundError: ``source`` holds no run.
        ValueError: ``source`` differs in more than the memory base (and :data:`ADOPT_IGNORES`), was played by
            another adapter or over a base that changed since, or ``cfg.out`` holds a run of other parameters.
            Nothing is written then.
    """
    from dataclasses import replace

    src = Path(source)
    saved, theirs = _source_run(src)
    if diff := identity_diff(theirs, cfg.identity(), (*ADOPT_IGNORES, *SAME_MEMORY_MAY_DIFFER)):
        raise ValueError(f"{src}: played with other parameters than {cfg.out} {diff} (only the memory policy "
                         "and its parameters may differ)")
    _check_same_agent(cfg, src, saved)
    theirs_cfg = replace(cfg, **{k: theirs.get(k) for k in SAME_MEMORY_MAY_DIFFER})
    if (now := memory_base_digest(theirs_cfg)) is not None and saved.get("memory_base_digest") != now:
        raise ValueError(f"{src}: its memory base {theirs_cfg.memory_base or '(the default)'} changed since it was "
                         "played; its episodes cannot be compared with today's base")
    done = check_resume(cfg, resume=True)
    tasks = {t.task_id: t for t in select_tasks(cfg) if t.task_id not in done}
    ours, other = policy_for(cfg), policy_for(theirs_cfg)
    adopted = []
    for tid, line in _episode_lines(src / "trajectories.jsonl"):
        if tid in tasks:
            traj = Trajectory.model_validate_json(line)
            records = _same_memory(ours, other, tasks[tid], traj)
            if records is not None:
                adopted.append((tid, _with_records(line, traj, records, ours.name)))
    _write_adopted(cfg, src, saved, adopted, rule="same memory")
    return [tid for tid, _ in adopted]


def adopt(cfg: RunConfig, source: str | Path) -> tuple[list[str], bool]:
    """:func:`adopt_episodes` from a run of the same memory base and budget as ``cfg``, else
    :func:`adopt_same_memory`; returns (the task ids adopted, whether by the same-memory rule) -- what
    ``workbench run --adopt-from`` does."""
    _, theirs = _source_run(Path(source))
    same = not set(identity_diff(theirs, cfg.identity())) & set(SAME_MEMORY_MAY_DIFFER)
    return (adopt_episodes if same else adopt_same_memory)(cfg, source), not same


# what may differ between a run and the one it adopts same-memory episodes from: the memory policy and its own
# parameters (an episode depends on them only through the memory the policy puts in the prompts)
SAME_MEMORY_MAY_DIFFER = ("memory", "memory_base", "budget", "ablation", "retriever", "backend", "backend_args",
                          "interval", "triggers", "window")


def _block_key(block) -> tuple:
    """What of a memory block reaches the prompt (``workbench.agents.loop.build_prompt``)."""
    return (block.layout, block.pieces, block.working_memory, block.reminder, block.reminder_label,
            block.entry.entry_id if block.entry else None)


def _same_memory(ours, other, task: Task, traj: Trajectory) -> list[tuple[dict, dict]] | None:
    """If two policies put the same memory in the prompt at every step of ``traj`` (its own history, as the loop
    feeds it), each step's (our record, their record) -- what each policy logs beside the prompt, e.g. the
    budget a MemArbiter block was assembled under; else None."""
    records = []
    for (*_, a), (*_, b) in zip(replay(ours, task, traj), replay(other, task, traj)):
        if _block_key(a) != _block_key(b):
            return None
        records.append((a.record, b.record))
    return records


def _with_records(line: str, traj: Trajectory, records: list[tuple[dict, dict]], policy: str) -> str:
    """The episode ``line`` with each step's policy record replaced by ours and the policy's name ours (the line
    itself when both are the same): the decision part of a step's record depends on the prompt alone, the policy
    part is what our policy logs."""
    if all(a == b for a, b in records) and traj.meta.get("memory_policy") == policy:
        return line
    steps = [{**{k: v for k, v in step.items() if k not in theirs}, **ours}
             for step, (ours, theirs) in zip(traj.meta["steps"], records)]
    return traj.model_copy(update={"meta": {**traj.meta, "memory_policy": policy, "steps": steps}}).model_dump_json()


def _source_run(src: Path) -> tuple[dict, dict]:
    """(config.json, its run identity with today's defaults) of a run folder to adopt from."""
    try:
        cfg = read_config(src)  # strict: every field of its type and range
    except FileNotFoundError:
        raise FileNotFoundError(f"{src}: no run folder (no config.json) to adopt episodes from") from None
    return read_json(src / CONFIG_FILE), cfg.run.model_dump()


def _check_same_agent(cfg: RunConfig, src: Path, saved: dict) -> None:
    if (then := saved.get("model_adapter")) != (now := model_adapter_hash(cfg.model)):
        raise ValueError(f"{src}: played by adapter {then} of model {cfg.model}, which is now {now} (retrained)")
    if (then := (saved.get("versions") or {}).get("forward") or "eager") != (now := played_forward()):
        raise ValueError(f"{src}: its episodes were played {then} and this run plays {now} (models.compiled: not the "
                         "same scores); adopt them with the forward they were played with")


def _write_adopted(cfg: RunConfig, src: Path, saved: dict, adopted: list[tuple[str, str]],
                   rule: str | None = None) -> None:
    """Append ``adopted`` (task id, line) to ``cfg.out`` with the provenance in ``config.json`` (atomically)."""
    if not adopted:
        return
    out = Path(cfg.out)
    write_run_config(cfg)
    record = read_json(out / CONFIG_FILE)
    rows = out / "trajectories.jsonl"
    present = _episode_lines(rows)  # the lines as they are (a torn last one dropped)
    kept = [line for _, line in present]
    source_rel = os.path.relpath(src.resolve(), out.resolve())  # relative to this folder: the pair moves together
    # config.json is written before the trajectories: a kill between the two leaves a record whose episodes are
    # not in the file; it is dropped here, so a rerun records that adoption once. (Records written before the
    # task ids were kept are taken as they are.)
    have = {tid for tid, _ in present}
    earlier = [r for r in record.get("adopted", []) if "tasks" not in r or set(r["tasks"]) <= have]
    record["adopted"] = [*earlier, {"source": source_rel, "episodes": len(adopted),
                                    **({"rule": rule} if rule else {}),
                                    "tasks": [tid for tid, _ in adopted],
                                    "versions": saved.get("versions"),
                                    # where the source's own episodes came from, if adopted
                                    **({"via": [{k: v for k, v in r.items() if k != "tasks"} for r in saved["adopted"]]}
                                       if saved.get("adopted") else {})}]
    atomic_write_text(out / "config.json", json.dumps(record, indent=1))
    atomic_write_text(rows, "".join(line + "\n" for line in kept + [line for _, line in adopted]))


def adopt_runs(cfgs: list[RunConfig], root: str | Path) -> dict[str, str]:
    """:func:`adopt_episodes` for each configuration from ``root/<model>/<condition>`` (the last two parts of its
    ``out``), where that folder holds a run: e.g. notebook 04's ``none``, ``icl`` and ``traj`` rows from notebook
    01's runs. A source of other parameters is not an error here (it is simply not this run's episodes).

    Returns:
        ``cfg.out`` -> what happened (``"12 episodes adopted from ..."``, ``"nothing to adopt ..."`` or why not),
        for the configurations that had a folder under ``root``.
    """
    refuse_live_folders(c.out for c in cfgs)
    done = {}
    for cfg in cfgs:
        src = Path(root) / Path(cfg.out).parent.name / Path(cfg.out).name
        if not (src / "config.json").exists():
            continue
        try:
            ids = adopt_episodes(cfg, src)
            done[cfg.out] = (f"{len(ids)} episode{'s' * (len(ids) != 1)} adopted from {src}" if ids
                             else f"nothing to adopt from {src} (it holds none this run lacks)")
        except ValueError as e:
            done[cfg.out] = f"not adopted: {e}"
    return done
