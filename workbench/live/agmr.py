"""AGMR's refinement loop driven live in the kernel: one task, one attempt at a time, against a working copy.

    r = LiveRefinement(lm, copy="runs/live/agmr-copy")   # a refine folder: a clone of the base, config, log
    first = r.begin("valid_seen/pick_and_place_simple-.../trial_...")   # m* retrieved, the task played, C captured
    a = r.next()            # one attempt: reflect -> diagnose C[:, j] -> refine -> re-execute (the real verifier)
    r.verdict               # after the last attempt: verified (accept it) or discarded / rolled back / no edit
    r.accept()              # commit the verified edit into the copy, exactly as `workbench refine` commits it
    r.roll_back()           # the entry's previous content again, as a new version in the copy's history

It is :meth:`Refiner.steps <workbench.methods.agmr.refine.Refiner.steps>` (Algorithm 1 as it happens) with the
commit left to the user: every execution is appended to the copy's ``refine/executions.jsonl``, a verdict with
nothing to commit (discarded, rolled back, no edit) and an accepted one to ``refine/log.jsonl`` (a verified edit
not accepted is not logged: its task is played again at the next :meth:`begin`), every accepted edit to its
history with ``workbench refine``'s provenance, so the
copy is a refine folder that ``refinement_explorer``, ``workbench refine`` (resuming) and the readers open. The
copy is never the base it was cloned from nor the default base. :meth:`stop` (from another thread: a widget's Stop
button) interrupts an execution at its next step; a kernel interrupt does the same. Either way nothing was
committed and the task's executions are dropped at the next :meth:`begin` (as a resumed refinement drops those of
an unfinished task): the copy stays as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.agents.loop import Agent
from workbench.attention import default_retrieval_heads
from workbench.envs.alfworld import ALFWorldEnv
from workbench.envs.base import Task
from workbench.envs.memory_base import default_memory_base, expert_trajectories_for
from workbench.llm.registry import get_backend
from workbench.locks import folder_lock
from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import MemoryEntry, append_jsonl
from workbench.methods.agmr.records import TaskRecord
from workbench.methods.agmr.refine import Attempted, Executed, Refiner, Verdict
from workbench.methods.agmr.refine_config import RefineConfig
from workbench.methods.agmr.refine_folder import load_log, prepare, refine_paths
from workbench.models import load_model
from workbench.models.registry import DEFAULT_AGENT

__all__ = ["Interrupted", "LiveRefinement"]


_OPEN: dict[Path, "LiveRefinement"] = {}  # the LiveRefinement that owns each working copy in this process


class Interrupted(RuntimeError):
    """A live execution was stopped (:meth:`LiveRefinement.stop`); nothing was committed."""


class _StoppableEnv:
    """The environment, with a stop flag checked before every step and a progress callback after it."""

    def __init__(self, env: Any, stop: threading.Event, on_step: Callable[[int], None]) -> None:
        self._env, self._stop, self._on_step, self._k = env, stop, on_step, 0

    def reset(self, task):
        self._k = 0
        return self._env.reset(task)

    def step(self, action: str):
        if self._stop.is_set():
            raise Interrupted("stopped")
        out = self._env.step(action)
        self._k += 1
        self._on_step(self._k)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


class LiveRefinement:
    """Algorithm 1 on one task at a time, in the kernel, against a working copy (module docstring).

    Args:
        model: a model name (loaded here) or a loaded model; the agent that plays every execution.
        copy: the working copy's folder: created as a clone of ``source`` with the refinement's config on first
            use, reopened (its parameters checked) after.
        source: the base refined (a folder); None: the default memory base.
        config: the refinement's parameters (split, K, retriever, backend, ...); ``model``/``dtype``/``source``
            are taken from the arguments.
        on_progress: called with a short text as each execution plays (``"execution 0: step 7"``: the first
            execution is 0, as its id ``<task>#0``).

    Raises:
        ValueError: ``copy`` is the source or the default base, or holds a refinement with other parameters.
    """

    def __init__(self, model: Any = DEFAULT_AGENT, copy: str | Path = "runs/live/agmr-copy", *,
                 source: str | Path | None = None, config: RefineConfig | None = None, dtype: str = "float32",
                 on_progress: Callable[[str], None] | None = None) -> None:
        self.lm = load_model(model, dtype=dtype) if isinstance(model, str) else model
        self.copy = Path(copy)
        src_root = Path(source) if source is not None else Path(default_memory_base().root)
        for name, other in (("the base it copies", src_root), ("the default memory base",
                                                               Path(default_memory_base().root))):
            if self.copy.resolve() == other.resolve():
                raise ValueError(f"{self.copy}: a working copy must not be {name}; name a new folder")
        base = dict(vars(config)) if config is not None else {}
        base.update(model=self.lm.name, dtype=self.lm.dtype, source=str(source) if source is not None else None)
        if not base.get("heads"):
            base["heads"] = tuple(default_retrieval_heads(self.lm.name, shape=(self.lm.n_layers, self.lm.n_heads)))
        self.config = RefineConfig(**base)
        self._stop = threading.Event()
        self.on_progress = on_progress or (lambda text: None)
        self._n = 0
        with folder_lock(self.copy, "live AGMR (a kernel's LiveRefinement)"):
            self.base, _ = prepare(self.copy, self.config)
        old = _OPEN.get(self.copy.resolve())
        if old is not None and old is not self:
            old._closed = True  # its task (if any) is dropped by this prepare: it must not write on
        _OPEN[self.copy.resolve()] = self
        self._closed = False
        self._rolled_back: set[str] = set()
        self.agent = Agent.from_model(self.lm, record_admissible=True)  # the offline reflector replays states
        self.env = _StoppableEnv(ALFWorldEnv(max_steps=self.config.max_steps), self._stop, self._progress)
        self._steps = None
        self.task: Task | None = None
        self.first: Executed | None = None
        self.attempts: list[Attempted] = []
        self.verdict: Verdict | None = None
        self.record: TaskRecord | None = None  # the task's logged record (after a verdict without commit, or accept)

    # -- the loop, one event at a time -------------------------------------------------------------------------
    def _progress(self, k: int) -> None:
        self.on_progress(f"execution {self._n}: step {k}")

    def _refiner(self) -> Refiner:
        experts = {t.task_id: t for t in expert_trajectories_for(self.config.split)}
        _, _, exec_path = refine_paths(self.copy)

        def on_execution(e):
            append_jsonl(exec_path, e)
            self._n += 1

        backend = get_backend(self.config.backend, **dict(kv.split("=", 1) for kv in self.config.backend_args))
        return Refiner(self.base, self.agent, self.env, self.config.heads, backend, self.config,
                       {k: t.actions() for k, t in experts.items()}, on_execution=on_execution)

    def begin(self, task: str | Task) -> Executed | Verdict:
        """Retrieve m* for ``task`` and play it with the heads captured (C); a :class:`Verdict` at once when the
        base holds no memory for it.

        Raises:
            SessionError: an unknown task, or one this copy already refined (its record is in the log).
            Interrupted: :meth:`stop` was called; the copy is as it was.
        """
        from workbench.live.session import SessionError, find_task

        self._check_open()
        task = task if isinstance(task, Task) else find_task(task, (self.config.split,))
        done = {r.task_id: r for r in load_log(self.copy)}
        if task.task_id in done:
            raise SessionError(f"{self.copy}: {task.task_id} was refined in this copy already (outcome "
                               f"{done[task.task_id].outcome}); pick another task or another copy")
        self.task, self.first, self.attempts, self.verdict, self.record = task, None, [], None, None
        self._stop.clear()
        with folder_lock(self.copy, "live AGMR (a kernel's LiveRefinement)"):
            self.base, _ = prepare(self.copy, self.config)  # drops the executions of an unfinished task
            experts = {t.task_id: t for t in expert_trajectories_for(self.config.split)}
            goal = experts[task.task_id].goal if task.task_id in experts else _goal(self.env, task)
            self._n = 0
            self._steps = self._refiner().steps(task, goal)
            return self._advance()

    def next(self) -> Attempted | Verdict:
        """One more attempt (reflect -> diagnose -> refine -> re-execute); after the last one (verified, or the
        K-th) :attr:`verdict` is in as well.

        Raises:
            SessionError: no task begun, or its verdict is already in.
            Interrupted: :meth:`stop` was called; nothing was committed.
        """
        from workbench.live.session import SessionError

        self._check_open()
        if self._steps is None:
            raise SessionError("no refinement task under way: begin(task) first" if self.verdict is None else
                               f"the verdict on {self.task.task_id} is in: accept() it or begin another task")
        self._stop.clear()
        with folder_lock(self.copy, "live AGMR (a kernel's LiveRefinement)"):
            return self._advance()

    def run(self) -> Verdict:
        """Every remaining attempt, up to the verdict."""
        while self.verdict is None:
            self.next()
        return self.verdict

    def _advance(self):
        try:
            event = next(self._steps)
        except BaseException:
            self._steps = None  # an interrupt (or an error) ends the task; its executions go at the next begin
            raise
        if isinstance(event, Executed):
            self.first = event
        elif isinstance(event, Attempted):
            self.attempts.append(event)
            if event.last:  # the verdict needs no more work: have it at once
                self._settle(next(self._steps))
        if isinstance(event, Verdict):
            self._settle(event)
        return event

    def _settle(self, verdict: Verdict) -> None:
        self.verdict, self._steps = verdict, None
        if verdict.record is not None:  # nothing to commit: logged now, as workbench refine logs it
            self.record = verdict.record
            append_jsonl(refine_paths(self.copy)[1], verdict.record)

    def stop(self) -> None:
        """Interrupt the execution under way at its next step (safe from another thread)."""
        self._stop.set()

    # -- the user's decision -----------------------------------------------------------------------------------
    def accept(self) -> TaskRecord:
        """Commit the verified edit into the copy (the history record ``workbench refine`` writes) and log it.

        Raises:
            SessionError: there is no verified edit to accept.
        """
        from workbench.live.session import SessionError

        self._check_open()
        v = self.verdict
        if v is None or v.commit is None:
            raise SessionError("no verified edit to accept" + ("" if v is None else
                                                               f" (the verdict: {v.record.outcome})"))
        if self.record is not None:
            raise SessionError(f"already accepted: {self.record.entry_id} is version {self.record.committed_version}")
        with folder_lock(self.copy, "live AGMR (a kernel's LiveRefinement)"):
            self.record = v.commit()
            append_jsonl(refine_paths(self.copy)[1], self.record)
        return self.record

    def roll_back(self, entry_id: str | None = None) -> MemoryEntry:
        """Undo the edit this task committed (:meth:`accept`): its entry's content before it becomes current again,
        as a new version (the history stays a log); once. ``entry_id``: roll that entry back one version instead.

        Raises:
            SessionError: nothing of this task was accepted (or it was rolled back already), or the entry has no
                earlier version in the copy.
        """
        from workbench.live.session import SessionError

        self._check_open()
        if entry_id is None:
            rec = self.record
            if rec is None or rec.outcome != "committed":
                raise SessionError("nothing to roll back: this task committed no edit" + (
                    f" (its verdict: {rec.outcome})" if rec is not None else ""))
            if rec.entry_id in self._rolled_back:
                raise SessionError(f"{rec.entry_id}: this task's edit was rolled back already")
            entry_id, version = rec.entry_id, rec.base_version
        else:
            current = self.base.get(entry_id)
            earlier = [h.version for h in self.base.history(entry_id) if h.version < current.version]
            if not earlier:
                raise SessionError(f"{entry_id} has no earlier version in {self.copy}")
            version = max(earlier)
        with folder_lock(self.copy, "live AGMR (a kernel's LiveRefinement)"):
            out = self.base.rollback(entry_id, version, reason="rolled back in a live session",
                                     provenance={"method": "agmr-live", "refinement_task":
                                                 self.task.task_id if self.task else None, "to_version": version})
        if self.record is not None and entry_id == self.record.entry_id:
            self._rolled_back.add(entry_id)
        return out

    def _check_open(self) -> None:
        from workbench.live.session import SessionError

        if self._closed:
            raise SessionError(f"{self.copy}: another LiveRefinement opened this working copy since (its cell ran "
                               "again?); use that one")

    @property
    def source(self) -> MemoryBase:
        """The base the copy was cloned from (read only here)."""
        return MemoryBase(self.config.source) if self.config.source else default_memory_base()


def _goal(env: Any, task: Task) -> str:
    env.reset(task)
    return env.goal()
