"""AGMR's evaluation (Table 1, Table 2, Figures 6, 7, 9): the conditions as run folders, and what links a test task
to the refinement that touched its memory.

Table 1's rows are run folders ``ROOT/<model>/<condition>`` read by the one table renderer
(:func:`workbench.reporting.tables.write_table`): ``none`` (ReAct), ``icl``, ``awm``, ``dc-rs``, ``traj`` (the valid_train
expert trajectories) and one ``traj`` run per refined base (``agmr``; Table 2 adds ``agmr-no-agr``), all on the same
tasks, model and dtype.

Scenario groups (Figure 7): a memory entry belongs to the pattern its refinement diagnosed on the failed run that
retrieved it (the first such refinement task in the log; an entry only ever retrieved by successes, or never
retrieved, is ``success-only`` / ``not refined``). A test task belongs to the group of the entry Traj retrieved
for it; since refinement never changes a goal, the refined bases retrieve the same entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import Trajectory
from workbench.methods.agmr.recording import UtilizationEpisode
from workbench.methods.agmr.records import TaskRecord
from workbench.methods.agmr.refine_folder import load_executions, load_log

__all__ = ["SCENARIOS", "scenario_groups", "success_by_scenario", "refined_share", "refinement_cases"]


SCENARIOS = ("attended_but_wrong", "missed_relevant", "distracted_by_irrelevant")


def scenario_groups(refine_root: str | Path) -> dict[str, str]:
    """Entry id -> its scenario (module docstring) from a refined base's log."""
    groups: dict[str, str] = {}
    for rec in load_log(refine_root):
        if rec.entry_id is None:
            continue
        if rec.branch == "failure" and rec.first_rule_pattern in SCENARIOS and groups.get(rec.entry_id) in (
                None, "success-only"):
            groups[rec.entry_id] = rec.committed_pattern or rec.first_pattern or rec.first_rule_pattern
        elif rec.branch == "success":
            groups.setdefault(rec.entry_id, "success-only")
    return groups


def success_by_scenario(runs: dict[str, Sequence[Trajectory]], groups: dict[str, str], reference: str = "traj"):
    """Success per scenario group and condition (Figure 7): a DataFrame indexed by scenario with ``n`` and one
    success-rate column per condition.

    Args:
        runs: condition -> its episodes (all on the same tasks).
        groups: :func:`scenario_groups`.
        reference: the condition whose retrieved entry assigns a task to a group.
    """
    import pandas as pd

    entry_of = {t.task_id: t.meta.get("memory_entry") for t in runs[reference]}
    group_of = {task: groups.get(e, "not refined") if e else "no memory" for task, e in entry_of.items()}
    rows: dict[str, dict] = {}
    order = [*SCENARIOS, "success-only", "not refined", "no memory"]
    for g in order:
        tasks = {t for t, gg in group_of.items() if gg == g}
        if not tasks:
            continue
        row: dict[str, Any] = {"n": len(tasks)}
        for cond, trajs in runs.items():
            won = [t.success for t in trajs if t.task_id in tasks]
            row[cond] = sum(won) / len(won) if won else float("nan")
        rows[g] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def refined_share(trajs: Sequence[Trajectory], refined_root: str | Path) -> dict:
    """How many test episodes were shown an entry the refinement changed (version above its first)."""
    base = MemoryBase(refined_root)
    refined = {e.entry_id for e in base if e.version != base.original(e.entry_id).version}
    shown = [t.meta.get("memory_entry") for t in trajs]
    hit = sum(1 for e in shown if e in refined)
    return {"episodes": len(shown), "shown_refined_entry": hit, "share": hit / len(shown) if shown else None,
            "entries_refined": len(refined)}


def _marked(rec: UtilizationEpisode, step: int | None, segment: int | None, pattern: str | None) -> UtilizationEpisode:
    return rec.model_copy(update={"critical_step": step, "ideal_segment": segment, "pattern": pattern})


def refinement_cases(refine_root: str | Path, per_pattern: int = 1) -> list[dict]:
    """Figure 6's cases: committed refinements, ``per_pattern`` per failure pattern plus one success pruning.

    Each case has ``before`` (C of the run with m*, the critical step and target marked) and ``after`` (C of the
    verification run with m', the expected use marked at the first step the corrected action was taken), the
    task record and the attempt that was committed.
    """
    log = [r for r in load_log(refine_root) if r.outcome == "committed"]
    chosen: list[TaskRecord] = []
    for pattern in (*SCENARIOS, "low_utilization_redundancy"):
        chosen += [r for r in log if (r.committed_pattern or r.first_rule_pattern) == pattern][:per_pattern]
    want = {x for r in chosen for x in (r.executions[0], r.attempts[-1].execution) if x}
    runs = {e.id: e for e in load_executions(refine_root, sorted(want))}
    cases = []
    for r in chosen:
        a = r.attempts[-1]
        before, after = runs.get(r.executions[0]), runs.get(a.execution or "")
        if before is None or after is None:
            continue
        refl = a.reflection or {}
        if r.branch == "failure":
            first = r.attempts[0].reflection or refl
            target = refl.get("supporting_segment")
            correct = (refl.get("correct_action") or "").strip().lower()
            hit = next((t for t, act in enumerate(after.utilization.actions) if act.strip().lower() == correct), None)
            b = _marked(before.utilization, first.get("critical_step"), first.get("supporting_segment"),
                        r.first_rule_pattern)
            f = _marked(after.utilization, hit, target if hit is not None else None, r.committed_pattern)
        else:
            b, f = before.utilization, after.utilization
        cases.append({"record": r, "attempt": a, "before": b, "after": f,
                      "segments": (len(before.memory.segments), len(after.memory.segments))})
    return cases
