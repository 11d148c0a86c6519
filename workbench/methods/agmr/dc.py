"""DC-RS (Dynamic Cheatsheet, retrieval and synthesis; Suzgun et al.), a baseline of AGMR's Table 1.

As the AGMR paper runs its baselines, the memory comes from the same prior experience as Traj's and AWM's (the
memory base: the valid_train expert trajectories), never from the outcomes of the evaluation's own episodes. The
evaluation split's tasks form a stream in their fixed order (the split's sorted task list, what ``--tasks``
slices). For task i the curator (the ``dc_curate`` stage) receives the cheatsheet it wrote for task i-1, task i's
goal and type, and the ``k`` memory-base trajectories most similar to it (Traj's retriever: MiniLM over goals, the
same task type, never task i's own game), and writes cheatsheet i; the action agent sees cheatsheet i for the whole
episode. The goals of the stream are read from the split's expert trajectories (their goals only; no action of
theirs reaches the curator). So the cheatsheet a task sees depends on the tasks before it in its split, not on the
slice a run plays nor on any episode's outcome: episodes stay independent (played by workers in any order,
resumed, adopted) like Traj's. A task whose split has no expert file is curated as a stream of one (an empty
previous cheatsheet), recorded as such.

Shown in the place and layout of a retrieved trajectory (ReAct's ALFWorld layout): the task's goal, then the first
``max_shown`` insights of the cheatsheet, each as a ``> think:`` line (ReAct's way of stating a plan in its
demonstrations). The curator is a model backend (openai / local) or ``offline-alfworld``'s documented algorithm
(:mod:`workbench.methods.agmr.offline.dc`), named in every table.
"""

from __future__ import annotations

from typing import Any

from workbench.agents.policy import _StaticEntry
from workbench.envs.alfworld import load_alfworld_tasks
from workbench.envs.base import Task
from workbench.envs.memory_base import expert_trajectories_for
from workbench.llm import run_stage
from workbench.llm.errors import LLMError
from workbench.memory.retrieval import get_retriever
from workbench.memory.trajectory import MemoryEntry, Segment
from workbench.methods.agmr.stage_types import Cheatsheet, CurateInput

__all__ = ["DynamicCheatsheet", "K_RETRIEVED", "MAX_SHOWN"]

K_RETRIEVED = 3  # trajectories retrieved for each task of the stream
MAX_SHOWN = 10  # insights of the cheatsheet the action agent sees


class DynamicCheatsheet(_StaticEntry):
    """The DC-RS memory policy (module docstring).

    Args:
        base: the memory base the trajectories are retrieved from.
        backend: the ``dc_curate`` stage's backend.
        retriever: the retriever's name (``minilm``, as Traj's).
        k: trajectories retrieved per task.
        max_shown: insights shown to the action agent.
    """

    name = "dc-rs"

    def __init__(self, base: Any, backend: Any, retriever: str = "minilm", k: int = K_RETRIEVED,
                 max_shown: int = MAX_SHOWN) -> None:
        super().__init__()
        if k < 1 or max_shown < 1:
            raise ValueError(f"dc-rs: k ({k}) and max_shown ({max_shown}) must be at least 1")
        self.retriever = get_retriever(retriever, base)
        self.backend, self.k, self.max_shown = backend, k, max_shown
        self.backend_name = getattr(backend, "name", str(backend))
        self._sheets: dict[str, Any] = {}  # task id -> the cheatsheet written for it
        self._streams: dict[str, tuple[list, int, Any]] = {}  # split -> (its tasks with goals, next index, last sheet)

    def _curate(self, task_id: str, task_type: str, goal: str, previous):
        """Cheatsheet i from cheatsheet i-1 and task i's retrieved trajectories, and what it came from. A curator
        reply that cannot be used (a typed LLM error after the stage's repair retry) leaves the previous
        cheatsheet in place, and the error is recorded."""
        hits = self.retriever.retrieve(goal, task_id, task_type, k=self.k)
        origin: dict = {"retrieved": [e.entry_id for e, _ in hits]}
        try:
            sheet = run_stage(self.backend, "dc_curate", CurateInput(goal=goal, task_type=task_type, previous=previous,
                                                                     examples=tuple(e for e, _ in hits))).value
        except LLMError as e:
            sheet, origin["curator_error"] = previous, f"{type(e).__name__}: {e}"[:500]
        return sheet, origin

    def _stream(self, split: str) -> tuple[list, int, Any] | None:
        if split not in self._streams:
            try:
                goals = {e.task_id: e.goal for e in expert_trajectories_for(split)}
            except (OSError, ValueError, KeyError):
                return None
            tasks = [(t, goals[t.task_id]) for t in load_alfworld_tasks(split) if t.task_id in goals]
            self._streams[split] = (tasks, 0, Cheatsheet())
        return self._streams[split]

    def cheatsheet(self, task: Task, goal: str) -> tuple[Any, dict]:
        """The cheatsheet written for ``task`` and what it was curated from (the stream is curated up to it once
        per process, then kept)."""
        if task.task_id in self._sheets:
            return self._sheets[task.task_id]
        stream = self._stream(task.split)
        if stream is None or task.task_id not in {t.task_id for t, _ in stream[0]}:
            sheet, origin = self._curate(task.task_id, task.task_type, goal, Cheatsheet())
            self._sheets[task.task_id] = (sheet, {"stream_position": None, **origin})
            return self._sheets[task.task_id]
        tasks, i, sheet = stream
        while task.task_id not in self._sheets:
            t, g = tasks[i]
            sheet, origin = self._curate(t.task_id, t.task_type, g, sheet)
            self._sheets[t.task_id] = (sheet, {"stream_position": i, **origin})
            i += 1
        self._streams[task.split] = (tasks, i, sheet)
        return self._sheets[task.task_id]

    def memory(self, step: int, history: list) -> Any:
        """The cheatsheet's block at every step; step 0's record also holds what it was curated from (``dc_rs``:
        stream position, retrieved entry ids, its size and the topics shown)."""
        from dataclasses import replace

        return replace(self._block, record={"dc_rs": dict(self._block.meta)}) if step == 0 else self._block

    def _choose(self, task: Task, goal: str) -> tuple[MemoryEntry | None, dict]:
        sheet, origin = self.cheatsheet(task, goal)
        shown = sheet.entries[: self.max_shown]
        meta = {"memory_entry": f"dc-rs/{task.task_id}", "cheatsheet_entries": len(sheet.entries),
                "cheatsheet_shown": [e.topic for e in shown], **origin}
        if not shown:
            return None, meta
        entry = MemoryEntry(entry_id=f"dc-rs/{task.task_id}", task_id=f"dc-rs/{task.task_id}",
                            task_type=task.task_type, goal=goal,
                            segments=tuple(Segment(thought=e.insight) for e in shown),
                            source=f"dc-rs:{self.backend_name}")
        return entry, meta
