"""AGMR's refinement loop (Algorithm 1, section 3, appendix E.2) over a memory base, auditable and resumable.

Per refinement task x, in the order of the split:

1. Retrieve m* from the base exactly as the Traj condition does (MiniLM over goals, same task type, never x's own
   game) and execute x with the retrieval heads captured: trajectory tau and C (:func:`utilization_episode`).
2. **Failure branch.** The semantic reflector (stage ``reflector_failure``, which may read x's expert plan) gives
   the earliest critical error step j, the correct action there and the supporting segment i. The pattern is the
   workbench's one rule (:func:`workbench.attention.diagnose_column` on ``C[:, j]`` against the entry's median
   c^max), recorded as ``rule_pattern``; the attention-guided refiner (stage ``refiner_failure``, shown the
   column and that scale) names its own ``pattern`` and returns segment edits. m' is re-executed: accepted on
   success, or when the reward rises by at least ``reward_gain`` (graded rewards such as ScienceWorld's; ALFWorld's
   are 0/1), else the next attempt starts from m', its trajectory and its C, up to ``max_attempts`` (K = 3);
   after K failures the edit is discarded and the entry stays as it was.
3. **Success branch.** The reflector lists redundant segments R (stage ``reflector_success``); the refiner
   (``refiner_success``) keeps those weakly used under ``weak_rule`` (E.2's relative rule for ALFWorld) and
   deletes them, tidying the next segment. m' is re-executed once: committed if x still succeeds, else rolled back
   at once (no retry). No candidate, no re-execution.
4. ``variant="no-agr"`` (Table 2, "w/o AGR") replaces the refiner by the reflector's own edits without C
   (stages ``reflector_edit_failure`` / ``reflector_edit_success``).

A malformed reply, an edit naming a segment that does not exist, a reflection pointing outside the run or the
memory, or an edit that changes nothing is a :class:`RefinementError` recorded in the attempt (it counts as one);
nothing is applied. A backend that cannot be reached stops the run (resume continues it).

The base folder ``DIR`` holds the store (``entries.jsonl``, ``history.jsonl``) and ``DIR/refine/``:
``config.json`` (what made it), ``log.jsonl`` (one :class:`TaskRecord` per finished task), ``executions.jsonl``
(every episode played: the memory shown, the trajectory and its C). Every commit is a new version of its entry
whose history record carries the provenance (task, branch, patterns, the C column of a failure or the per-segment
C summary the weak rule read on a success, the diff, the verification runs). A commit is atomic, so after a kill
the base is before or after it; on resume a task whose commit landed but whose log line did not is recovered from
that provenance, and a task without either is played again.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.agents.loop import Agent
from workbench.agents.policy import FixedEntry
from workbench.attention import default_retrieval_heads
from workbench.attention.diagnosis import diagnose_column, entry_scale
from workbench.envs.alfworld import ALFWorldEnv, load_alfworld_tasks
from workbench.envs.memory_base import default_memory_base, expert_trajectories_for
from workbench.envs.selection import parse_task_slice
from workbench.llm import LLMOutputError, run_stage
from workbench.llm.registry import get_backend
from workbench.memory.base import MemoryBase, entry_diff
from workbench.memory.retrieval import get_retriever
from workbench.memory.tokens import memory_tokens
from workbench.memory.trajectory import (
    MemoryEntry,
    Trajectory,
    append_jsonl,
    atomic_write_text,
    cut_torn_tail,
    iter_jsonl_dicts,
    read_text_utf8,
)
from workbench.methods.agmr.offline.refiner import strongest_rivals, weakly_utilized
from workbench.methods.agmr.recording import UtilizationEpisode, utilization_episode
from workbench.methods.agmr.segment_edits import SegmentEditError, apply_segment_edits
from workbench.methods.agmr.stage_types import (
    DirectFailureEditInput,
    DirectSuccessEditInput,
    FailureRefinerInput,
    ReflectorInput,
    SuccessRefinerInput,
)
from workbench.models import load_model
from workbench.models.registry import DEFAULT_AGENT
from workbench.provenance import versions

__all__ = ["RefineConfig", "RefinementError", "Execution", "Attempt", "TaskRecord", "Refiner", "refine", "execute",
           "load_log", "load_executions", "refine_stats", "REFINE_DIR", "VARIANTS", "OUTCOMES"]

REFINE_DIR = "refine"
VARIANTS = ("agmr", "no-agr")
OUTCOMES = ("committed", "discarded", "rolled_back", "no_edit", "no_memory", "error")


class RefinementError(ValueError):
    """An LLM stage's answer that cannot be applied (counted as an attempt; nothing is applied)."""


@dataclass(frozen=True)
class RefineConfig:
    """One refinement run.

    Attributes:
        split, tasks: the refinement tasks (valid_seen: the default agent was cloned on valid_train's games).
        model, dtype: the agent.
        heads: the retrieval heads H that C averages; empty: the model's committed heads.
        backend, backend_args: the LLM stages' backend (``offline-alfworld``: the deterministic algorithms).
        variant: ``agmr`` or ``no-agr`` (the reflector edits directly, no C).
        max_attempts: K, failure-branch attempts.
        reward_gain: a failure-branch edit is also accepted when the reward rises by this much.
        weak_rule: the success branch's weak-utilization rule (relative, global_capped, global).
        retriever: how m* is retrieved (as the Traj condition).
        max_steps: episode step limit.
        source: the base refined (a folder); None: the default memory base (valid_train expert trajectories).
    """

    split: str = "valid_seen"
    tasks: str = "all"
    model: str = DEFAULT_AGENT
    dtype: str = "float32"
    heads: tuple[tuple[int, int], ...] = ()
    backend: str = "offline-alfworld"
    backend_args: tuple[str, ...] = ()
    variant: str = "agmr"
    max_attempts: int = 3
    reward_gain: float = 0.3
    weak_rule: str = "relative"
    retriever: str = "minilm"
    max_steps: int = 50
    source: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "heads", tuple(tuple(int(x) for x in h) for h in self.heads))
        object.__setattr__(self, "backend_args", tuple(self.backend_args))
        if self.variant not in VARIANTS:
            raise ValueError(f"variant '{self.variant}': expected one of {', '.join(VARIANTS)}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts {self.max_attempts}: expected at least 1")
        if self.weak_rule not in ("relative", "global_capped", "global"):
            raise ValueError(f"weak_rule '{self.weak_rule}': expected relative, global_capped or global")
        for kv in self.backend_args:
            if "=" not in kv:
                raise ValueError(f"backend argument '{kv}': expected KEY=VALUE")

    def identity(self) -> dict:
        d = asdict(self)
        d["heads"] = [list(h) for h in self.heads]
        d["backend_args"] = list(self.backend_args)
        return d


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


def _diff(entry: MemoryEntry, cand: MemoryEntry, n: int) -> str:
    return entry_diff(entry, cand, labels=(f"{entry.entry_id}@v{entry.version}", f"{entry.entry_id}@candidate-{n}"))


def _patterns(attempts: Sequence[Attempt]) -> dict:
    """A failure branch's diagnoses, as its TaskRecord holds them: the refiner's and the rule's pattern of the
    first attempt that got through its stages, and of the last attempt that had one (the final iteration)."""
    def rule(a: Attempt) -> str | None:
        return (a.rule or {}).get("pattern")

    through = [a for a in attempts if not a.error]
    return {"first_pattern": next((a.pattern for a in through if a.pattern), None),
            "first_rule_pattern": next((rule(a) for a in through if rule(a)), None),
            "final_pattern": next((a.pattern for a in reversed(attempts) if a.pattern), None),
            "final_rule_pattern": next((rule(a) for a in reversed(attempts) if rule(a)), None)}


def _utilization_summary(rows: Sequence[Sequence[float]], weak_rule: str, weak: set[int], refl: Any,
                         allowed: set[int]) -> dict:
    """What the success branch's weak-utilization rule read, for the audit trail: each segment's c^max and c-bar
    over the run's steps (the statistics of appendix E.2's rules), the rule, the weakly used segments, the
    reflector's redundancy candidates and their intersection (the only segments a refiner may delete)."""
    return {"weak_rule": weak_rule, "c_max": [round(max(r), 5) if r else 0.0 for r in rows],
            "c_mean": [round(sum(r) / len(r), 5) if r else 0.0 for r in rows], "weak": sorted(weak),
            "redundant": sorted(r.index for r in refl.redundant_segments), "deletable": sorted(allowed)}


def _reward(traj: Trajectory) -> float:
    return 1.0 if traj.success else max((s.reward for s in traj.steps), default=0.0)


def _error(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


@dataclass
class _Run:
    """What one execution produced."""

    execution: Execution

    @property
    def traj(self) -> Trajectory:
        return self.execution.trajectory

    @property
    def record(self) -> UtilizationEpisode:
        return self.execution.utilization


def execute(agent: Any, env: Any, heads: Sequence[tuple[int, int]], task: Any, memory: MemoryEntry, n: int,
            base_version: int, candidate: bool, max_steps: int) -> Execution:
    """Play ``task`` with ``memory`` shown (the Traj layout) and the heads captured: execution ``<task>#<n>``."""
    rec, traj = utilization_episode(agent, env, task, FixedEntry(memory), list(heads), max_steps=max_steps)
    return Execution(id=f"{task.task_id}#{n}", task_id=task.task_id, entry_id=memory.entry_id,
                     base_version=base_version, candidate=candidate, memory=memory, trajectory=traj, utilization=rec)


class Refiner:
    """Algorithm 1 on one task at a time, against a working base (see the module docstring).

    Args:
        base: the base being refined (committed to in place).
        agent: an :class:`~workbench.agents.Agent` (decode ``score``).
        env: an ALFWorld environment.
        heads: the retrieval heads.
        backend: the LLM stages' backend.
        config: the parameters.
        expert_plans: task id -> the task's expert actions (what the offline reflector may read).
        on_execution: called with every :class:`Execution` as soon as it is played (the run appends it to disk).
    """

    def __init__(self, base: MemoryBase, agent: Any, env: Any, heads: Sequence[tuple[int, int]], backend: Any,
                 config: RefineConfig, expert_plans: dict[str, Sequence[str]],
                 on_execution: Callable[[Execution], None] | None = None) -> None:
        self.base, self.agent, self.env, self.heads = base, agent, env, list(heads)
        self.backend, self.config, self.plans = backend, config, expert_plans
        self.on_execution = on_execution or (lambda e: None)
        self.retriever = get_retriever(config.retriever, base)

    # -- pieces ------------------------------------------------------------------------------------------
    def retrieve(self, task: Any, goal: str) -> MemoryEntry | None:
        hits = self.retriever.retrieve(goal, task.task_id, task.task_type, k=1)
        return hits[0][0] if hits else None

    def execute(self, task: Any, memory: MemoryEntry, n: int, base_version: int, candidate: bool) -> _Run:
        ex = execute(self.agent, self.env, self.heads, task, memory, n, base_version, candidate, self.config.max_steps)
        self.on_execution(ex)
        return _Run(ex)

    def _stage(self, name: str, payload: BaseModel) -> Any:
        return run_stage(self.backend, name, payload).value

    def _candidate(self, memory: MemoryEntry, edits: Sequence[Any]) -> MemoryEntry:
        if not edits:
            raise RefinementError("the refiner returned no edit")
        try:
            segments = apply_segment_edits(memory.segments, edits)
        except SegmentEditError as e:
            raise RefinementError(f"the edit cannot be applied to entry {memory.entry_id!r}: {e}") from None
        if segments == memory.segments:
            raise RefinementError("the edits leave the memory unchanged")
        if not segments:
            raise RefinementError("the edits delete every segment of the memory")
        return memory.model_copy(update={"segments": segments})

    def _failure_edit(self, memory: MemoryEntry, run: _Run, task_id: str, info: dict | None = None
                      ) -> tuple[MemoryEntry, dict]:
        """One failure-branch proposal: reflection, rule, refinement, candidate (``info`` fills as they come, so an
        attempt that fails half-way keeps what its stages said)."""
        info = {} if info is None else info
        traj, C = run.traj, run.record.matrix()
        refl = self._stage("reflector_failure", ReflectorInput(memory=memory, trajectory=traj,
                                                               expert_plan=tuple(self.plans.get(task_id, ()))))
        info["reflection"] = refl.model_dump()
        if not 0 <= refl.critical_step < C.n_steps:
            raise RefinementError(f"reflector: critical_step {refl.critical_step} is not a step of the run "
                                  f"({C.n_steps} steps)")
        if not 0 <= refl.supporting_segment < len(memory.segments):
            raise RefinementError(f"reflector: supporting_segment {refl.supporting_segment} does not exist (the "
                                  f"memory has {len(memory.segments)} segments)")
        column = [float(v) for v in C.C[:, refl.critical_step]]
        scale = entry_scale(C)
        rule = diagnose_column(column, refl.supporting_segment, scale, step=refl.critical_step)
        info["rule"] = {"pattern": rule.pattern, "step": rule.step, "segment": rule.segment, "value": rule.value,
                        "scale": rule.scale, "rank": rule.rank, "share": rule.share,
                        "distractors": list(rule.distractors), "column": [round(v, 5) for v in column]}
        if self.config.variant == "agmr":
            out = self._stage("refiner_failure", FailureRefinerInput(memory=memory, reflection=refl,
                                                                     utilization=tuple(column), scale=scale))
            info["pattern"] = out.pattern
            if out.pattern not in ("attended_but_wrong", "missed_relevant", "distracted_by_irrelevant"):
                raise RefinementError(f"refiner: pattern '{out.pattern}' is not a failure pattern")
        else:
            out = self._stage("reflector_edit_failure", DirectFailureEditInput(memory=memory, reflection=refl))
        info["refinement"] = out.model_dump()
        cand = self._candidate(memory, out.edits)  # an edit that cannot be applied fails here first
        # The paper's edits, whatever the backend: the supporting segment s_i and, for AGMR, distractors the column
        # supports (the rule's, or among the most-attended other segments), nothing else.
        i = refl.supporting_segment
        allowed = {i}
        if self.config.variant == "agmr":
            allowed |= set(rule.distractors) | set(strongest_rivals(column, i))
        bad = sorted({e.index for e in out.edits} - allowed)
        if bad:
            raise RefinementError(f"refiner: edits segments {bad}; a failure edit may touch the supporting segment "
                                  f"{i}" + (" and distractors the C column supports " if len(allowed) > 1 else "")
                                  + f"(allowed: {sorted(allowed)})")
        return cand, info

    def _success_edit(self, memory: MemoryEntry, run: _Run) -> tuple[MemoryEntry | None, dict]:
        refl = self._stage("reflector_success", ReflectorInput(memory=memory, trajectory=run.traj))
        info: dict = {"reflection": refl.model_dump()}
        if self.config.variant == "agmr":
            rows = tuple(tuple(float(v) for v in row) for row in run.record.matrix().C)
            out = self._stage("refiner_success", SuccessRefinerInput(memory=memory, reflection=refl, utilization=rows,
                                                                     weak_rule=self.config.weak_rule))
            info["pattern"] = out.pattern
            # The paper's constraint, whatever the backend: a segment is deleted only if the reflector called it
            # redundant and C shows it weakly used (an LLM refiner may propose more; the offline one never does).
            weak = weakly_utilized(rows, self.config.weak_rule)
            allowed = {r.index for r in refl.redundant_segments} & weak
            info["utilization"] = _utilization_summary(rows, self.config.weak_rule, weak, refl, allowed)
            bad = sorted(e.index for e in out.edits if e.op == "delete" and e.index not in allowed)
            if bad:
                raise RefinementError(f"refiner_success: deletes segments {bad}, which are not both redundant "
                                      f"(reflector) and weakly utilized ({self.config.weak_rule} rule); allowed: "
                                      f"{sorted(allowed)}")
        else:
            out = self._stage("reflector_edit_success", DirectSuccessEditInput(memory=memory, reflection=refl))
        info["refinement"] = out.model_dump()
        if not out.edits:
            return None, info
        return self._candidate(memory, out.edits), info

    # -- the loop -----------------------------------------------------------------------------------------
    def refine_task(self, task: Any, goal: str) -> TaskRecord:
        """Algorithm 1 for one task; commits to the base when an edit is verified."""
        entry = self.retrieve(task, goal)
        if entry is None:
            return TaskRecord(task_id=task.task_id, task_type=task.task_type, outcome="no_memory")
        first = self.execute(task, entry, 0, entry.version, candidate=False)
        runs = [first.execution.id]
        common = dict(task_id=task.task_id, task_type=task.task_type, entry_id=entry.entry_id,
                      base_version=entry.version, segments_before=len(entry.segments),
                      tokens_before=memory_tokens(entry))
        attempts: list[Attempt] = []
        typed = (RefinementError, LLMOutputError, ValidationError)
        if not first.traj.success:
            memory, run = entry, first
            for n in range(1, self.config.max_attempts + 1):
                info: dict = {}
                try:
                    cand, info = self._failure_edit(memory, run, task.task_id, info)
                except typed as e:
                    attempts.append(Attempt(n=n, error=_error(e), reflection=info.get("reflection"),
                                            rule=info.get("rule"), refinement=info.get("refinement"),
                                            pattern=info.get("pattern")))
                    continue
                verify = self.execute(task, cand, len(runs), entry.version, candidate=True)
                runs.append(verify.execution.id)
                gain = _reward(verify.traj) - _reward(first.traj)
                ok = verify.traj.success or gain >= self.config.reward_gain - 1e-9 > 0 or (
                    gain > 0 and self.config.reward_gain == 0)
                attempt = Attempt(n=n, reflection=info.get("reflection"), rule=info.get("rule"),
                                  refinement=info.get("refinement"), pattern=info.get("pattern"),
                                  diff=_diff(entry, cand, n), execution=verify.execution.id,
                                  success=verify.traj.success, reward_gain=gain)
                attempts.append(attempt)
                if ok:
                    return self._commit(task, entry, cand, "failure", attempts, runs, common)
                memory, run = cand, verify
            return TaskRecord(**common, branch="failure", outcome="discarded" if any(a.execution for a in attempts)
                              else "error", attempts=tuple(attempts), executions=tuple(runs),
                              **_patterns(attempts), segments_after=len(entry.segments), tokens_after=common["tokens_before"])
        try:
            cand, info = self._success_edit(entry, first)
        except typed as e:
            return TaskRecord(**common, branch="success", outcome="error", attempts=(Attempt(n=1, error=_error(e)),),
                              executions=tuple(runs), segments_after=len(entry.segments),
                              tokens_after=common["tokens_before"])
        if cand is None:
            return TaskRecord(**common, branch="success", outcome="no_edit",
                              attempts=(Attempt(n=1, reflection=info["reflection"], refinement=info["refinement"],
                                                pattern=info.get("pattern"), utilization=info.get("utilization")),),
                              executions=tuple(runs), segments_after=len(entry.segments),
                              tokens_after=common["tokens_before"])
        verify = self.execute(task, cand, 1, entry.version, candidate=True)
        runs.append(verify.execution.id)
        attempt = Attempt(n=1, reflection=info["reflection"], refinement=info["refinement"], pattern=info.get("pattern"),
                          utilization=info.get("utilization"), diff=_diff(entry, cand, 1), execution=verify.execution.id, success=verify.traj.success,
                          reward_gain=_reward(verify.traj) - _reward(first.traj))
        if verify.traj.success:
            return self._commit(task, entry, cand, "success", [attempt], runs, common)
        return TaskRecord(**common, branch="success", outcome="rolled_back", attempts=(attempt,),
                          executions=tuple(runs), segments_after=len(entry.segments),
                          tokens_after=common["tokens_before"])

    def _commit(self, task: Any, entry: MemoryEntry, cand: MemoryEntry, branch: str, attempts: list[Attempt],
                runs: list[str], common: dict) -> TaskRecord:
        last = attempts[-1]
        patterns = _patterns(attempts) if branch == "failure" else {}
        pattern = last.pattern or ("low_utilization_redundancy" if branch == "success" and self.config.variant ==
                                   "agmr" else None)
        rule = last.rule or {}
        provenance = {
            "method": "agmr", "variant": self.config.variant, "refinement_task": task.task_id, "branch": branch,
            "pattern": pattern, "rule_pattern": rule.get("pattern"), "attempt": last.n,
            "critical_step": rule.get("step"), "target_segment": rule.get("segment"),
            "column": {k: rule.get(k) for k in ("column", "value", "scale", "rank", "share", "distractors")}
            if rule else None,
            "utilization": last.utilization,
            "diff": last.diff, "verification": [last.execution], "executions": list(runs),
            "backend": getattr(self.backend, "name", str(self.backend)), "model": self.config.model,
            **(patterns or {"first_pattern": None, "first_rule_pattern": None}),
        }
        stored = self.base.commit(cand.model_copy(update={"version": entry.version}),
                                  reason=f"agmr {branch}: {pattern or 'edit'} (verified on {task.task_id})",
                                  provenance=provenance)
        return TaskRecord(**common, branch=branch, outcome="committed", committed_version=stored.version,
                          committed_pattern=pattern, **patterns,
                          attempts=tuple(attempts), executions=tuple(runs), segments_after=len(stored.segments),
                          tokens_after=memory_tokens(stored))


# -- the run over a split ------------------------------------------------------------------------------------
def _paths(root: Path) -> tuple[Path, Path, Path]:
    d = root / REFINE_DIR
    return d / "config.json", d / "log.jsonl", d / "executions.jsonl"


def load_log(root: str | Path) -> list[TaskRecord]:
    """The task records of a refined base (a torn last line, from a kill, is skipped)."""
    _, log, _ = _paths(Path(root))
    return [TaskRecord.model_validate(d) for d in iter_jsonl_dicts(log)]


def load_executions(root: str | Path, ids: Sequence[str] | None = None) -> list[Execution]:
    """The executions of a refined base (all, or those with the given ids, in file order)."""
    _, _, path = _paths(Path(root))
    want = set(ids) if ids is not None else None
    return [Execution.model_validate(d) for d in iter_jsonl_dicts(path) if want is None or d.get("id") in want]


def _recover(base: MemoryBase, done: set[str]) -> list[TaskRecord]:
    """Task records for commits whose log line never landed (a kill between the commit and the log append)."""
    out = []
    for r in base.commits():
        p = r.provenance
        task = p.get("refinement_task")
        if p.get("method") != "agmr" or not task or task in done:
            continue
        out.append(TaskRecord(task_id=task, entry_id=r.entry_id, base_version=r.version - 1, branch=p.get("branch"),
                              outcome="committed", committed_version=r.version, committed_pattern=p.get("pattern"),
                              first_pattern=p.get("first_pattern"), first_rule_pattern=p.get("first_rule_pattern"),
                              final_pattern=p.get("final_pattern"), final_rule_pattern=p.get("final_rule_pattern"),
                              executions=tuple(p.get("executions") or ()), segments_after=len(r.entry.segments),
                              tokens_after=memory_tokens(r.entry), recovered=True))
        done.add(task)
    return out


def _open_base(root: Path, config: RefineConfig) -> MemoryBase:
    cfg_path, _, _ = _paths(root)
    if cfg_path.exists() and json.loads(read_text_utf8(cfg_path)).get("cloning"):
        # a kill while the source was being copied: nothing was refined yet, so copy it again
        for name in ("entries.jsonl", "history.jsonl"):
            (root / name).unlink(missing_ok=True)
        cfg_path.unlink()
    if cfg_path.exists():
        saved = json.loads(read_text_utf8(cfg_path))
        if saved.get("config") != config.identity():
            diff = {k: (saved.get("config", {}).get(k), v) for k, v in config.identity().items()
                    if saved.get("config", {}).get(k) != v}
            raise ValueError(f"{root}: holds a refinement with other parameters {diff} (saved, given); refine into "
                             "a new --base-out folder or pass the same parameters to resume")
        return MemoryBase(root)
    if (root / "entries.jsonl").exists():
        raise ValueError(f"{root}: already holds a memory base that no refinement made; refine into a new folder")
    if config.source:
        src_root = Path(config.source)
        if not (src_root / "entries.jsonl").exists():
            raise FileNotFoundError(f"{src_root}: no memory base there (no entries.jsonl)")
        src = MemoryBase(src_root)
    else:
        src = default_memory_base()
    record = {"config": config.identity(), "source": {"path": str(src.root), "digest": src.digest(),
                                                      "entries": len(src)}, "versions": versions()}
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    # the config first, marked: a kill during the copy leaves a folder the next call recognises and copies again
    atomic_write_text(cfg_path, json.dumps(record | {"cloning": True}, indent=1))
    base = src.clone(root)
    atomic_write_text(cfg_path, json.dumps(record, indent=1))
    return base


def prepare(root: Path, config: RefineConfig) -> tuple[MemoryBase, set[str]]:
    """Open (or create) the refined base in ``root`` and settle what a kill left: returns the base and the tasks done.

    A commit whose log line never landed gets its record back from the provenance; executions of a task that
    never finished are dropped (it is played again, so its ids stay unique).
    """
    base = _open_base(root, config)
    _, log_path, exec_path = _paths(root)
    cut_torn_tail(log_path)
    done = {r.task_id for r in load_log(root)}
    for rec in _recover(base, done):
        append_jsonl(log_path, rec)
    rows = list(iter_jsonl_dicts(exec_path))
    kept = [d for d in rows if d.get("task_id") in done]
    if len(kept) != len(rows):
        atomic_write_text(exec_path, "".join(json.dumps(d) + "\n" for d in kept))
    cut_torn_tail(exec_path)
    return base, done


def refine(config: RefineConfig, out: str | Path, *, lm: Any = None, progress: bool = True,
           stop_after: int | None = None) -> dict:
    """Refine a copy of the source base on ``config``'s tasks into ``out`` (resuming what is there).

    Args:
        lm: a model already loaded (must be ``config.model``).
        stop_after: play at most this many tasks in this call (tests; a kill does the same).

    Returns:
        :func:`refine_stats` of the folder.
    """
    from tqdm.auto import tqdm

    root = Path(out)
    if not config.heads:
        config = RefineConfig(**{**asdict(config), "heads": tuple(default_retrieval_heads(config.model))})
    backend = get_backend(config.backend, **dict(kv.split("=", 1) for kv in config.backend_args))
    base, done = prepare(root, config)
    _, log_path, exec_path = _paths(root)
    tasks = load_alfworld_tasks(config.split)
    tasks = [tasks[i] for i in parse_task_slice(config.tasks, len(tasks))]
    todo = [t for t in tasks if t.task_id not in done]
    if stop_after is not None:
        todo = todo[:stop_after]
    if todo:
        experts = {t.task_id: t for t in expert_trajectories_for(config.split)}
        plans = {k: t.actions() for k, t in experts.items()}
        lm = lm or load_model(config.model, dtype=config.dtype)
        agent = Agent.from_model(lm, record_admissible=True)  # the offline reflector replays states with them
        env = ALFWorldEnv(max_steps=config.max_steps)
        refiner = Refiner(base, agent, env, config.heads, backend, config, plans,
                          on_execution=lambda e: append_jsonl(exec_path, e))
        counts: Counter = Counter()
        bar = tqdm(todo, desc=f"refine {config.split}", disable=not progress)
        try:
            for task in bar:
                goal = experts[task.task_id].goal if task.task_id in experts else _goal(env, task)
                rec = refiner.refine_task(task, goal)
                append_jsonl(log_path, rec)
                counts[rec.outcome] += 1
                bar.set_postfix(dict(counts))
        finally:
            env.close()
    return refine_stats(root)


def _goal(env: Any, task: Any) -> str:
    env.reset(task)
    return env.goal()


def refine_stats(root: str | Path) -> dict:
    """What a refinement did: tasks, branches, commits per pattern and branch, rollbacks, attempts, the base."""
    root = Path(root)
    cfg_path, _, _ = _paths(root)
    saved = json.loads(read_text_utf8(cfg_path)) if cfg_path.exists() else {}
    log = load_log(root)
    base = MemoryBase(root)
    failures = [r for r in log if r.branch == "failure"]
    commits = [r for r in log if r.outcome == "committed"]
    by = Counter(f"{r.branch}/{r.committed_pattern or 'edit'}" for r in commits)
    tokens_now = sum(memory_tokens(e) for e in base)
    originals = {e.entry_id: base.original(e.entry_id) for e in base}
    tokens_then = sum(memory_tokens(e) for e in originals.values())
    return {
        "config": saved.get("config"), "source": saved.get("source"),
        "tasks": len(log), "failures": len(failures), "successes": sum(r.branch == "success" for r in log),
        "no_memory": sum(r.outcome == "no_memory" for r in log),
        "outcomes": dict(Counter(r.outcome for r in log)),
        "commits": len(commits), "commits_by_branch_pattern": dict(sorted(by.items())),
        "failure_patterns": dict(Counter(r.final_pattern or "none" for r in failures)),  # final iteration's (Figure 9)
        "failure_rule_patterns": dict(Counter(r.final_rule_pattern or "none" for r in failures)),
        "first_failure_patterns": dict(Counter(r.first_pattern or "none" for r in failures)),
        "discarded": sum(r.outcome == "discarded" for r in log),
        "rolled_back": sum(r.outcome == "rolled_back" for r in log),
        "errors": sum(1 for r in log for a in r.attempts if a.error),
        "mean_attempts_failure": statistics.fmean([len(r.attempts) for r in failures]) if failures else None,
        "entries_before": len(originals), "entries_after": len(base),
        "entries_refined": sum(1 for e in base if e.version != originals[e.entry_id].version),
        "memory_tokens_before": tokens_then, "memory_tokens_after": tokens_now,
        "segments_before": sum(len(e.segments) for e in originals.values()),
        "segments_after": sum(len(e.segments) for e in base),
    }
