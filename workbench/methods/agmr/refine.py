"""AGMR's refinement loop (Algorithm 1, section 3, appendix E.2) over a memory base, auditable and resumable.

Per refinement task x, in the order of the split:

1. Retrieve m* from the base exactly as the Traj condition does (MiniLM over goals, same task type, never x's own
   game) and execute x with the retrieval heads captured: trajectory tau and C (:func:`utilization_episode`).
2. **Failure branch.** The semantic reflector (stage ``reflector_failure``; it sees m* and tau, as in the paper, and
   x's expert plan too only under ``reflector_sees_plan``) gives
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

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from workbench.agents.loop import Agent
from workbench.agents.policy import FixedEntry
from workbench.attention import default_retrieval_heads
from workbench.attention.diagnosis import diagnose_column, entry_scale
from workbench.envs.benchmarks import load_tasks, make_env
from workbench.envs.memory_base import expert_trajectories_for
from workbench.envs.selection import parse_task_slice
from workbench.llm import LLMOutputError, run_stage
from workbench.llm.ledger import StageCall, ledger_records, reject_last
from workbench.llm.registry import get_backend
from workbench.locks import folder_lock
from workbench.memory.base import MemoryBase
from workbench.memory.retrieval import get_retriever
from workbench.memory.tokens import memory_tokens
from workbench.memory.trajectory import (
    MemoryEntry,
    Trajectory,
    append_jsonl,
)
from workbench.methods.agmr.offline.refiner import strongest_rivals, weakly_utilized
from workbench.methods.agmr.recording import UtilizationEpisode, utilization_episode
from workbench.methods.agmr.records import (
    Attempt,
    Execution,
    TaskRecord,
    candidate_diff,
    error_text,
    pattern_counts,
    reward,
    utilization_summary,
)
from workbench.methods.agmr.refine_config import RefineConfig, RefinementError
from workbench.files import present
from workbench.methods.agmr.refine_folder import load_executions, prepare, refine_paths, refine_stats
from workbench.methods.agmr.segment_edits import SegmentEditError, apply_segment_edits
from workbench.methods.agmr.stage_types import (
    DirectFailureEditInput,
    DirectSuccessEditInput,
    FailureRefinerInput,
    ReflectorInput,
    SuccessRefinerInput,
)
from workbench.models import load_model

__all__ = ["ADOPTION_KEYS", "Attempted", "Executed", "Refiner", "Verdict", "adoptable_executions", "execute", "refine"]


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


@dataclass(frozen=True)
class Executed:
    """:meth:`Refiner.steps`: the task played with m* shown (the first execution), and m*."""

    execution: Execution
    entry: MemoryEntry


@dataclass(frozen=True)
class Attempted:
    """:meth:`Refiner.steps`: one attempt (reflect, diagnose, refine, re-execute). ``candidate`` and
    ``verification`` are None when the attempt failed before an edit (``attempt.error``); ``before`` is the
    execution it diagnosed (its C is the "before"); ``last``: the :class:`Verdict` follows at once."""

    attempt: Attempt
    candidate: MemoryEntry | None
    verification: Execution | None
    before: Execution
    last: bool = False  # the verdict comes next, with no more work


@dataclass(frozen=True)
class Verdict:
    """:meth:`Refiner.steps`' last event. A verified edit: ``candidate`` and ``commit`` (call it to commit the
    edit to the base, as ``workbench refine`` does; returns the task's record) and ``record`` None. Otherwise
    ``record`` (discarded, rolled back, no edit, no memory, error) and nothing to commit."""

    record: TaskRecord | None
    candidate: MemoryEntry | None = None
    commit: Callable[[], TaskRecord] | None = None


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
        env: the benchmark's environment (ALFWorld, ScienceWorld).
        heads: the retrieval heads.
        backend: the LLM stages' backend.
        config: the parameters.
        expert_plans: task id -> the task's expert actions (what the offline reflector may read).
        on_execution: called with every :class:`Execution` as soon as it is played (the run appends it to disk).
        adoptable: executions of another refinement with the same agent, dtype, heads and step limit
            (:func:`adoptable_executions`): one whose task and memory equal the one about to be played is adopted
            instead (marked ``adopted_from``), since the deterministic agent would replay it exactly.
    """

    def __init__(self, base: MemoryBase, agent: Any, env: Any, heads: Sequence[tuple[int, int]], backend: Any,
                 config: RefineConfig, expert_plans: dict[str, Sequence[str]],
                 on_execution: Callable[[Execution], None] | None = None,
                 adoptable: dict[tuple[str, str], tuple[str, Execution]] | None = None) -> None:
        self.base, self.agent, self.env, self.heads = base, agent, env, list(heads)
        self.backend, self.config, self.plans = backend, config, expert_plans
        self.on_execution = on_execution or (lambda e: None)
        self.adoptable = adoptable or {}
        self.ledger: list[StageCall] = []  # this task's stage calls (reset per task by steps())
        self.retriever = get_retriever(config.retriever, base)

    # -- pieces ------------------------------------------------------------------------------------------
    def retrieve(self, task: Any, goal: str) -> MemoryEntry | None:
        hits = self.retriever.retrieve(goal, task.task_id, task.task_type, k=1)
        return hits[0][0] if hits else None

    def execute(self, task: Any, memory: MemoryEntry, n: int, base_version: int, candidate: bool) -> _Run:
        same = self.adoptable.get((task.task_id, memory.model_dump_json()))
        if same is not None:
            folder, old = same
            ex = old.model_copy(update={"id": f"{task.task_id}#{n}", "base_version": base_version,
                                        "candidate": candidate, "adopted_from": f"{folder}::{old.id}"})
        else:
            ex = self.play(task, memory, n, base_version, candidate)
        self.on_execution(ex)
        return _Run(ex)

    def play(self, task: Any, memory: MemoryEntry, n: int, base_version: int, candidate: bool) -> Execution:
        """Play one execution (the episode with ``memory`` shown and the heads captured)."""
        return execute(self.agent, self.env, self.heads, task, memory, n, base_version, candidate,
                       self.config.max_steps)

    def _stage(self, name: str, payload: BaseModel) -> Any:
        return run_stage(self.backend, name, payload, ledger=self.ledger,
                         benchmark=getattr(self.config, "env", "alfworld")).value

    def _refused(self, e: Exception) -> None:
        """A stage's reply parsed but the refinement refused it (a RefinementError or a payload it made that does not
        validate): the ledger's last call is marked rejected."""
        if isinstance(e, LLMOutputError) or not self.ledger:
            return  # already counted by run_stage
        reject_last(self.ledger, self.ledger[-1].stage, error_text(e))

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
        plan = tuple(self.plans.get(task_id, ())) if self.config.reflector_sees_plan else ()
        refl = self._stage("reflector_failure", ReflectorInput(memory=memory, trajectory=traj, expert_plan=plan))
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
            info["utilization"] = utilization_summary(rows, self.config.weak_rule, weak, refl, allowed)
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
        for event in self.steps(task, goal):
            if isinstance(event, Verdict):
                rec = event.record if event.commit is None else event.commit()
                calls = ledger_records(self.ledger)
                return rec.model_copy(update={"stage_calls": tuple(calls)}) if calls else rec
        raise AssertionError("Refiner.steps ended without a verdict")

    def steps(self, task: Any, goal: str) -> Iterator[Executed | Attempted | Verdict]:
        """Algorithm 1 for one task as it happens: the first execution (:class:`Executed`), each attempt with its
        verification (:class:`Attempted`), then the :class:`Verdict`. A verified edit is not committed here: the
        verdict's ``commit()`` does it (:meth:`refine_task` calls it at once; a live session when the user
        accepts). Stopping early (an interrupt between or inside executions) leaves the base as it was."""
        self.ledger = []
        entry = self.retrieve(task, goal)
        if entry is None:
            yield Verdict(TaskRecord(task_id=task.task_id, task_type=task.task_type, outcome="no_memory"))
            return
        first = self.execute(task, entry, 0, entry.version, candidate=False)
        yield Executed(first.execution, entry)
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
                    self._refused(e)
                    attempts.append(Attempt(n=n, error=error_text(e), reflection=info.get("reflection"),
                                            rule=info.get("rule"), refinement=info.get("refinement"),
                                            pattern=info.get("pattern")))
                    yield Attempted(attempts[-1], None, None, run.execution, last=n == self.config.max_attempts)
                    continue
                verify = self.execute(task, cand, len(runs), entry.version, candidate=True)
                runs.append(verify.execution.id)
                gain = reward(verify.traj) - reward(first.traj)
                ok = verify.traj.success or gain >= self.config.reward_gain - 1e-9 > 0 or (
                    gain > 0 and self.config.reward_gain == 0)
                attempt = Attempt(n=n, reflection=info.get("reflection"), rule=info.get("rule"),
                                  refinement=info.get("refinement"), pattern=info.get("pattern"),
                                  diff=candidate_diff(entry, cand, n), execution=verify.execution.id,
                                  success=verify.traj.success, reward_gain=gain)
                attempts.append(attempt)
                yield Attempted(attempt, cand, verify.execution, run.execution,
                                last=ok or n == self.config.max_attempts)
                if ok:
                    yield Verdict(None, cand, lambda c=cand: self._commit(task, entry, c, "failure", attempts, runs,
                                                                          common))
                    return
                memory, run = cand, verify
            yield Verdict(TaskRecord(**common, branch="failure", outcome="discarded" if any(a.execution for a in
                                                                                          attempts) else "error",
                                     attempts=tuple(attempts), executions=tuple(runs), **pattern_counts(attempts),
                                     segments_after=len(entry.segments), tokens_after=common["tokens_before"]))
            return
        try:
            cand, info = self._success_edit(entry, first)
        except typed as e:
            self._refused(e)
            yield Verdict(TaskRecord(**common, branch="success", outcome="error",
                                     attempts=(Attempt(n=1, error=error_text(e)),), executions=tuple(runs),
                                     segments_after=len(entry.segments), tokens_after=common["tokens_before"]))
            return
        if cand is None:
            yield Verdict(TaskRecord(**common, branch="success", outcome="no_edit",
                                     attempts=(Attempt(n=1, reflection=info["reflection"],
                                                       refinement=info["refinement"], pattern=info.get("pattern"),
                                                       utilization=info.get("utilization")),),
                                     executions=tuple(runs), segments_after=len(entry.segments),
                                     tokens_after=common["tokens_before"]))
            return
        verify = self.execute(task, cand, 1, entry.version, candidate=True)
        runs.append(verify.execution.id)
        attempt = Attempt(n=1, reflection=info["reflection"], refinement=info["refinement"], pattern=info.get("pattern"),
                          utilization=info.get("utilization"), diff=candidate_diff(entry, cand, 1), execution=verify.execution.id, success=verify.traj.success,
                          reward_gain=reward(verify.traj) - reward(first.traj))
        yield Attempted(attempt, cand, verify.execution, first.execution, last=True)
        if verify.traj.success:
            yield Verdict(None, cand, lambda: self._commit(task, entry, cand, "success", [attempt], runs, common))
            return
        yield Verdict(TaskRecord(**common, branch="success", outcome="rolled_back", attempts=(attempt,),
                                 executions=tuple(runs), segments_after=len(entry.segments),
                                 tokens_after=common["tokens_before"]))

    def _commit(self, task: Any, entry: MemoryEntry, cand: MemoryEntry, branch: str, attempts: list[Attempt],
                runs: list[str], common: dict) -> TaskRecord:
        last = attempts[-1]
        patterns = pattern_counts(attempts) if branch == "failure" else {}
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
            "reflector_sees_plan": self.config.reflector_sees_plan,
            **(patterns or {"first_pattern": None, "first_rule_pattern": None}),
        }
        stored = self.base.commit(cand.model_copy(update={"version": entry.version}),
                                  reason=f"agmr {branch}: {pattern or 'edit'} (verified on {task.task_id})",
                                  provenance=provenance)
        return TaskRecord(**common, branch=branch, outcome="committed", committed_version=stored.version,
                          committed_pattern=pattern, **patterns,
                          attempts=tuple(attempts), executions=tuple(runs), segments_after=len(stored.segments),
                          tokens_after=memory_tokens(stored))


#: The parameters two refinements must share for an execution of one to stand for the same execution of the other.
ADOPTION_KEYS = ("env", "split", "model", "dtype", "heads", "max_steps")


def adoptable_executions(folder: str | Path, config: RefineConfig) -> dict[tuple[str, str], tuple[str, Execution]]:
    """The executions of the refinement in ``folder`` that ``config``'s refinement may adopt, keyed by (task, memory).

    Raises:
        ValueError: ``folder`` is not a refinement, or it played with another agent, dtype, heads, split or step
            limit (its episodes would not be this refinement's).
    """
    cfg_path, _, _ = refine_paths(Path(folder))
    if not present(cfg_path):
        raise ValueError(f"--adopt-executions-from {folder}: no refinement there (no {cfg_path.name}); name the "
                         "folder of a finished or running `workbench refine --base-out`")
    theirs = refine_stats(folder)["config"] or {}
    ours = config.identity()
    differ = {k: (theirs.get(k), ours[k]) for k in ADOPTION_KEYS if theirs.get(k) != ours[k]}
    if differ:
        raise ValueError(f"--adopt-executions-from {folder}: its episodes were played with other parameters {differ} "
                         "(theirs, ours); adopt only from a refinement with the same agent, dtype, heads, split and "
                         "step limit")
    out: dict[tuple[str, str], tuple[str, Execution]] = {}
    for ex in load_executions(folder):
        out.setdefault((ex.task_id, ex.memory.model_dump_json()), (str(folder), ex))
    return out


def refine(config: RefineConfig, out: str | Path, *, lm: Any = None, progress: bool = True,
           stop_after: int | None = None, adopt_from: str | Path | None = None) -> dict:
    """Refine a copy of the source base on ``config``'s tasks into ``out`` (resuming what is there).

    Args:
        lm: a model already loaded (must be ``config.model``).
        stop_after: play at most this many tasks in this call (tests; a kill does the same).
        adopt_from: another refinement's folder whose identical executions are adopted rather than played
            (:func:`adoptable_executions`); the refinement's results are the same, only faster.

    Returns:
        :func:`refine_stats` of the folder.
    """
    with folder_lock(out, f"workbench refine --base-out {out}"):  # one refinement writes a base at a time
        return _refine(config, out, lm=lm, progress=progress, stop_after=stop_after, adopt_from=adopt_from)


def _refine(config: RefineConfig, out: str | Path, *, lm: Any, progress: bool, stop_after: int | None,
            adopt_from: str | Path | None = None) -> dict:
    from tqdm.auto import tqdm

    root = Path(out)
    if not config.heads:
        config = RefineConfig(**{**asdict(config), "heads": tuple(default_retrieval_heads(config.model))})
    backend = get_backend(config.backend, **dict(kv.split("=", 1) for kv in config.backend_args))
    adoptable = adoptable_executions(adopt_from, config) if adopt_from is not None else {}
    base, done = prepare(root, config)
    _, log_path, exec_path = refine_paths(root)
    tasks = load_tasks(config.env, config.split, list(config.task_types) or None)
    tasks = [tasks[i] for i in parse_task_slice(config.tasks, len(tasks))]
    todo = [t for t in tasks if t.task_id not in done]
    if stop_after is not None:
        todo = todo[:stop_after]
    if todo:
        experts = {t.task_id: t for t in _experts(config.env, config.split, config.task_types)}
        plans = {k: t.actions() for k, t in experts.items()}
        lm = lm or load_model(config.model, dtype=config.dtype)
        # the offline reflector replays ALFWorld states with their admissible commands (ScienceWorld's, a thousand
        # a step, are not kept); the agent acts as the benchmark's runs act (ScienceWorld: the constrained decode)
        agent = Agent.for_benchmark(lm, config.env, record_admissible=config.env == "alfworld")
        env = make_env(config.env, config.max_steps)
        refiner = Refiner(base, agent, env, config.heads, backend, config, plans,
                          on_execution=lambda e: append_jsonl(exec_path, e), adoptable=adoptable)
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
            getattr(backend, "close", lambda: None)()  # a served backend stops its server here
    return refine_stats(root)


def _experts(env: str, split: str, task_types: Sequence[str] = ()) -> list:
    """The expert trajectories of a refinement split (ALFWorld's planner's; ScienceWorld's gold paths, of
    ``task_types`` only when given)."""
    if env == "alfworld":
        return expert_trajectories_for(split)
    from workbench.envs.scienceworld import parse_env_spec
    from workbench.envs.scienceworld_experts import gold_trajectories

    return gold_trajectories(split, parse_env_spec(env), progress=False, task_types=list(task_types) or None)


def _goal(env: Any, task: Any) -> str:
    env.reset(task)
    return env.goal()


