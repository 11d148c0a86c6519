"""A scripted AGMR world: a memory base of two 'pick' entries, a task with an expert plan, and a Refiner whose
executions are scripted (success and C per call), so the loop's branches are tested without playing ALFWorld."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.attention.utilization import UtilizationRecord
from workbench.envs.base import Task
from workbench.llm.offline import OfflineALFWorldBackend
from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import MemoryEntry, Segment, Step, Trajectory
from workbench.methods.agmr import Refiner
from workbench.methods.agmr.recording import UtilizationEpisode
from workbench.methods.agmr.records import Execution
from workbench.methods.agmr.refine_config import RefineConfig

GOAL = "put a apple in fridge."
PLAN = ("go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "open fridge 1",
        "put apple 1 in/on fridge 1")
TASK = Task(task_id="valid_seen/apple/t1", split="valid_seen", task_type="pick", path="/nonexistent")


def entry(entry_id: str = "valid_train/tomato/t1", goal: str = "put a tomato in fridge.") -> MemoryEntry:
    return MemoryEntry(
        entry_id=entry_id, task_id=entry_id, task_type="pick", goal=goal,
        initial_observation="You are in the middle of a room. You see a countertop 1, a diningtable 1 and a fridge 1.",
        segments=(
            Segment(action="go to diningtable 1"),
            Segment(observation="On the diningtable 1, you see a tomato 1.", action="take tomato 1 from diningtable 1"),
            Segment(observation="You pick up the tomato 1 from the diningtable 1.", action="look"),
            Segment(observation="You are facing the diningtable 1.", action="go to fridge 1"),
            Segment(observation="The fridge 1 is closed.", action="open fridge 1"),
            Segment(observation="You open the fridge 1. The fridge 1 is open.", action="put tomato 1 in/on fridge 1"),
        ), source="planner")


def make_base(root) -> MemoryBase:
    base = MemoryBase(root / "source")
    base.add_many([entry(), entry("valid_train/mug/t2", "put a mug in desk.")])
    return base


def trajectory(actions: Sequence[str], success: bool) -> Trajectory:
    steps = tuple(Step(observation="obs" if k else f"room\n\nYour task is to: {GOAL}", action=a,
                       reward=float(success and k == len(actions) - 1), done=success and k == len(actions) - 1)
                  for k, a in enumerate(actions))
    return Trajectory(task_id=TASK.task_id, task_type="pick", goal=GOAL, steps=steps, success=success, source="test")


def record(matrix: Sequence[Sequence[float]], actions: Sequence[str], success: bool | None = None
           ) -> UtilizationEpisode:
    n_seg, n_steps = len(matrix), len(matrix[0])
    rec = UtilizationRecord(heads=[(0, 0)], prompt_lens=[100] * n_steps,
                            segment_token_positions=[[k] for k in range(n_seg)], matrix=[list(r) for r in matrix])
    return UtilizationEpisode(task_id=TASK.task_id, mode="episode", model_name="scripted", success=success,
                              steps=list(range(n_steps)),
                              actions=list(actions), segment_texts=[""] * n_seg, utilization=rec,
                              c_mean=[sum(r) / n_steps for r in matrix], c_max=[max(r) for r in matrix])


class ScriptedRefiner(Refiner):
    """A Refiner whose executions follow a script: one ``(success, actions, C rows or None)`` per call.

    C defaults to a column where the supporting segment is read strongly (attended but wrong) -- built with one row
    per segment of the memory being executed.
    """

    def __init__(self, base, script, backend=None, **config):
        config.setdefault("reflector_sees_plan", True)  # these scripts test the oracle reflector, which reads PLAN
        cfg = RefineConfig(heads=((0, 0),), retriever="bm25", **config)
        super().__init__(base, agent=None, env=None, heads=cfg.heads, backend=backend or OfflineALFWorldBackend(),
                         config=cfg, expert_plans={TASK.task_id: PLAN}, on_execution=self.executions_append)
        self.script = list(script)
        self.executions: list[Execution] = []
        self.shown: list[MemoryEntry] = []

    def executions_append(self, ex: Execution) -> None:
        self.executions.append(ex)

    def play(self, task, memory, n, base_version, candidate):
        success, actions, rows = self.script.pop(0)
        self.shown.append(memory)
        if rows is None:
            rows = [[1.0 if k == 1 else 0.1] * len(actions) for k in range(len(memory.segments))]
        return Execution(id=f"{task.task_id}#{n}", task_id=task.task_id, entry_id=memory.entry_id,
                         base_version=base_version, candidate=candidate, memory=memory,
                         trajectory=trajectory(actions, success), utilization=record(rows, actions, success))


WRONG = ["go to countertop 1", "go to fridge 1", "look"]  # skips the take: fails at step 1
RIGHT = list(PLAN)
