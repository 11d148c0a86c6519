"""What a refinement records per task (AGMR Algorithm 1's audit trail): every execution, every attempted edit and its verification, and the task's outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from workbench.memory.base import entry_diff
from workbench.memory.trajectory import (
    MemoryEntry,
    Trajectory,
)
from workbench.methods.agmr.recording import UtilizationEpisode

__all__ = ["OUTCOMES", "Execution", "Attempt", "TaskRecord"]


OUTCOMES = ("committed", "discarded", "rolled_back", "no_edit", "no_memory", "error")


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _drop_defaults(data: dict, defaults: dict) -> dict:
    """Fields added after records were first written, left out at their defaults: an offline refinement's files stay
    what they were (the offline algorithms record no stage calls and adopt nothing unless asked)."""
    for key, default in defaults.items():
        if key in data and data[key] in (default, list(default) if isinstance(default, tuple) else default):
            del data[key]
    return data


class Execution(_Rec):
    """One episode played during refinement: the memory shown, the trajectory and its C."""

    id: str  # "<task_id>#<n>", n = 0 the execution with m*, then one per verification
    task_id: str
    entry_id: str
    base_version: int  # the version of the entry in the base the memory was derived from
    candidate: bool  # False: m* itself; True: a refined candidate m'
    memory: MemoryEntry
    trajectory: Trajectory
    utilization: UtilizationEpisode
    # "<folder>::<execution id>" when this episode was not played but adopted from another refinement's identical
    # one (same task, memory, agent, dtype, heads and step limit: the deterministic agent would replay it exactly)
    adopted_from: str | None = None

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: Any) -> dict:
        return _drop_defaults(handler(self), {"adopted_from": None})


class Attempt(_Rec):
    """One refinement attempt: what each stage said, the edit, and its verification."""

    n: int
    reflection: dict | None = None
    rule: dict | None = None  # diagnose_column on C[:, j] (failure branch)
    refinement: dict | None = None  # the refiner's (or the reflector's, w/o AGR) output
    pattern: str | None = None  # the refiner's pattern (failure branch, agmr)
    utilization: dict | None = None  # success branch, agmr: the per-segment C summary the weak rule read
    error: str | None = None  # a RefinementError / LLMOutputError: "<Type>: message"
    diff: str = ""
    execution: str | None = None  # the verification run
    success: bool | None = None
    reward_gain: float | None = None


class TaskRecord(_Rec):
    """What refining one task did."""

    task_id: str
    task_type: str = ""
    entry_id: str | None = None
    base_version: int | None = None
    branch: Literal["failure", "success"] | None = None
    outcome: Literal["committed", "discarded", "rolled_back", "no_edit", "no_memory", "error"]
    committed_version: int | None = None
    first_pattern: str | None = None  # the pattern of the first diagnosis that got through (on m*'s run, mostly)
    first_rule_pattern: str | None = None
    final_pattern: str | None = None  # the pattern of the last refinement iteration's diagnosis (Figure 9: the paper
    final_rule_pattern: str | None = None  # counts "the diagnosis ... in the final refinement iteration")
    committed_pattern: str | None = None
    attempts: tuple[Attempt, ...] = ()
    executions: tuple[str, ...] = ()
    segments_before: int | None = None
    segments_after: int | None = None
    tokens_before: int | None = None  # o200k tokens of the entry's canonical rendering
    tokens_after: int | None = None
    recovered: bool = False  # rebuilt on resume from a commit's provenance (the log line was lost to a kill)
    meta: dict = Field(default_factory=dict)
    stage_calls: tuple[dict, ...] = ()  # every LLM stage call of the task and its fate (workbench.llm.ledger)

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: Any) -> dict:
        return _drop_defaults(handler(self), {"stage_calls": ()})


def candidate_diff(entry: MemoryEntry, cand: MemoryEntry, n: int) -> str:
    return entry_diff(entry, cand, labels=(f"{entry.entry_id}@v{entry.version}", f"{entry.entry_id}@candidate-{n}"))


def pattern_counts(attempts: Sequence[Attempt]) -> dict:
    """A failure branch's diagnoses, as its TaskRecord holds them: the refiner's and the rule's pattern of the
    first attempt that got through its stages, and of the last attempt that had one (the final iteration)."""
    def rule(a: Attempt) -> str | None:
        return (a.rule or {}).get("pattern")

    through = [a for a in attempts if not a.error]
    return {"first_pattern": next((a.pattern for a in through if a.pattern), None),
            "first_rule_pattern": next((rule(a) for a in through if rule(a)), None),
            "final_pattern": next((a.pattern for a in reversed(attempts) if a.pattern), None),
            "final_rule_pattern": next((rule(a) for a in reversed(attempts) if rule(a)), None)}


def utilization_summary(rows: Sequence[Sequence[float]], weak_rule: str, weak: set[int], refl: Any,
                         allowed: set[int]) -> dict:
    """What the success branch's weak-utilization rule read, for the audit trail: each segment's c^max and c-bar
    over the run's steps (the statistics of appendix E.2's rules), the rule, the weakly used segments, the
    reflector's redundancy candidates and their intersection (the only segments a refiner may delete)."""
    return {"weak_rule": weak_rule, "c_max": [round(max(r), 5) if r else 0.0 for r in rows],
            "c_mean": [round(sum(r) / len(r), 5) if r else 0.0 for r in rows], "weak": sorted(weak),
            "redundant": sorted(r.index for r in refl.redundant_segments), "deletable": sorted(allowed)}


def reward(traj: Trajectory) -> float:
    """An episode's reward in 0-1: 1 on success; else a graded benchmark's score / 100 (ScienceWorld's, in
    ``meta.score``), else the largest step reward (ALFWorld's are 0 until the winning step)."""
    if traj.success:
        return 1.0
    score = traj.meta.get("score")
    if isinstance(score, (int, float)):
        return max(0.0, min(1.0, score / 100.0))
    return max((s.reward for s in traj.steps), default=0.0)


def error_text(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"
