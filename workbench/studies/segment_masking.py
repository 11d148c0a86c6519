"""The segment-masking test (AGMR section 2.1, Figure 3): is C a proxy for which memory is used?

Per task: run with the whole retrieved entry while capturing the retrieval heads -> C -> rank segments by
c^max (:func:`segments_to_mask`) -> re-run once without the top ``fraction`` and once without the bottom
``fraction`` of segments (:class:`DropSegments`). If C tracks use, removing the high-c^max segments should hurt
much more than removing the low ones.

Teacher-forced accuracy on the expert plan is measured for every task (C from the teacher-forced walk; the
re-runs walk the same plan); episodes (C from the played episode, success of the re-played ones) when
``episode_tasks`` are given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from tqdm.auto import tqdm

from workbench.agents.teacher_forcing import teacher_forced_accuracy
from workbench.attention.head_set import Head, HeadSet
from workbench.attention.segment_masking import DropSegments, segments_to_mask
from workbench.memory.trajectory import atomic_write_text
from workbench.methods.agmr.recording import (
    UtilizationEpisode,
    teacher_forced_utilization,
    utilization_episode,
)

__all__ = ["SegmentMaskingRow", "SegmentMaskingResult", "run_segment_masking"]

ARMS = ("full", "bottom_removed", "top_removed")


class SegmentMaskingRow(BaseModel):
    """One task of the test: what was removed and how each arm did."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    mode: str  # teacher_forced | episode
    n_segments: int
    k: int
    top: list[int]
    bottom: list[int]
    c_max: list[float]
    correct: dict[str, int] = {}  # arm -> teacher-forced correct steps
    steps: dict[str, int] = {}  # arm -> teacher-forced scored steps
    p_expert: dict[str, float] = {}  # arm -> sum over scored steps of p(expert action)
    success: dict[str, bool] = {}  # arm -> episode success


class _ResultRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_name: str
    fraction: float
    rows: list[SegmentMaskingRow]


@dataclass(frozen=True)
class SegmentMaskingResult:
    """Rows of every task; :meth:`summary` pools them per arm."""

    model_name: str
    fraction: float
    rows: tuple[SegmentMaskingRow, ...]

    def summary(self) -> dict[str, dict[str, float | None]]:
        """Per arm: pooled teacher-forced accuracy (correct / steps over tasks), mean p(expert action) and
        episode success rate."""
        out: dict[str, dict[str, float | None]] = {}
        tf_rows = [r for r in self.rows if r.mode == "teacher_forced"]
        ep_rows = [r for r in self.rows if r.mode == "episode"]
        for arm in ARMS:
            steps = sum(r.steps.get(arm, 0) for r in tf_rows)
            correct = sum(r.correct.get(arm, 0) for r in tf_rows)
            p_sum = sum(r.p_expert.get(arm, 0.0) for r in tf_rows)
            wins = [r.success[arm] for r in ep_rows if arm in r.success]
            out[arm] = {"tf_accuracy": correct / steps if steps else None, "tf_steps": steps,
                        "tf_mean_p": p_sum / steps if steps and any(r.p_expert for r in tf_rows) else None,
                        "success_rate": sum(wins) / len(wins) if wins else None, "n_episodes": len(wins)}
        return out

    def metrics(self) -> dict[str, float | None]:
        """Drops from removing the top vs bottom segments, per metric (full minus arm)."""
        s = self.summary()
        out: dict[str, float | None] = {"fraction": self.fraction,
                                        "n_tasks": len({r.task_id for r in self.rows})}
        for metric in ("tf_accuracy", "tf_mean_p", "success_rate"):
            full = s["full"][metric]
            for arm in ("top_removed", "bottom_removed"):
                val = s[arm][metric]
                out[f"{metric}_drop_{arm.split('_')[0]}"] = None if full is None or val is None else full - val
            out[f"{metric}_full"] = full
        return out

    def caption(self) -> str:
        """What the segment-masking test shows, in words: the arms' teacher-forced accuracy, and whether the
        result is the paper's (removing the top segments hurts more than the bottom), the opposite, or null."""
        s = self.summary()
        full, top, bottom = (s[a]["tf_accuracy"] for a in ("full", "top_removed", "bottom_removed"))
        n_tasks = len({r.task_id for r in self.rows})
        if full is None or top is None or bottom is None:
            return f"No teacher-forced steps on these {n_tasks} tasks: nothing to compare."
        text = (f"Teacher-forced accuracy on {s['full']['tf_steps']} expert steps of {n_tasks} tasks: all segments "
                f"{full:.1%}, the bottom {self.fraction:.0%} by peak utilization removed {bottom:.1%}, the top "
                f"{self.fraction:.0%} removed {top:.1%}.")
        if top == bottom == full:
            return text + (" **A null result**: neither removal changes the teacher-forced accuracy (AGMR's "
                           "Figure 3 finds the top removal far more harmful).")
        if full - top <= 0 and full - bottom <= 0:
            return text + " **Not as in AGMR's Figure 3**: neither removal lowers the accuracy."
        if full - top > full - bottom:
            return text + " Removing the most-used segments lowers the accuracy more, as in AGMR's Figure 3."
        return text + (" **Not as in AGMR's Figure 3**: removing the most-used segments hurts no more than removing "
                       "the least-used.")

    def table(self):
        """Per-arm summary as a pandas DataFrame."""
        import pandas as pd

        names = {"full": "Traj (all segments)", "bottom_removed": f"bottom {self.fraction:.0%} removed",
                 "top_removed": f"top {self.fraction:.0%} removed"}
        return pd.DataFrame({names[a]: v for a, v in self.summary().items()}).T

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        atomic_write_text(path, _ResultRecord(model_name=self.model_name, fraction=self.fraction,
                                              rows=list(self.rows)).model_dump_json(indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path) -> SegmentMaskingResult:
        rec = _ResultRecord.model_validate_json(Path(path).read_text())
        return cls(rec.model_name, rec.fraction, tuple(rec.rows))


def _tf_counts(agent: Any, expert: Any, task: Any, policy: Any, instruments: Sequence) -> tuple[int, int, float]:
    """(correct steps, scored steps, sum of p(expert action)) of one teacher-forced walk."""
    res = teacher_forced_accuracy(agent, [expert], {expert.task_id: task}, policy, instruments=list(instruments),
                                  progress=False)
    return res.n_correct, res.n_steps, res.mean_p_expert * res.n_steps


def run_segment_masking(
    agent: Any,
    policy: Any,
    heads: HeadSet | Iterable[Head],
    experts: Sequence = (),
    tasks: dict | None = None,
    fraction: float = 0.2,
    env: Any = None,
    episode_tasks: Sequence = (),
    max_steps: int | None = None,
    carrier_heads: HeadSet | Iterable[Head] | str | None = None,
    instruments: Sequence = (),
    expert_plans: dict[str, Sequence[str]] | None = None,
    progress: bool = True,
) -> tuple[SegmentMaskingResult, list[UtilizationEpisode]]:
    """Run the test on every expert (teacher forcing) and every episode task.

    Args:
        agent: an :class:`~workbench.agents.Agent`.
        policy: the memory policy whose entry is masked (e.g. ``build_policy("traj")``).
        heads: the retrieval heads H that C averages.
        experts: expert trajectories with ``meta["admissible"]`` (teacher-forced arm).
        tasks: task_id -> Task for the experts.
        fraction: share of segments removed per arm.
        env: the environment of the episode arm (skipped when ``episode_tasks`` is empty).
        episode_tasks: the tasks of the episode arm.
        max_steps: the episode arm's step limit.
        carrier_heads: recorded in the full runs' :class:`UtilizationEpisode` (see ``utilization_episode``).
        instruments: more instruments active in every run.
        expert_plans: task_id -> expert actions, for the critical step of failed episodes (defaults to the
            given experts' actions).

    Returns:
        ``(result, utilization records of the full-memory runs)``; tasks without memory are skipped.
    """
    heads = HeadSet.of(heads)
    tasks = dict(tasks or {})
    rows: list[SegmentMaskingRow] = []
    records: list[UtilizationEpisode] = []
    for expert in tqdm(list(experts), desc="segment masking [teacher forced]", disable=not progress):
        task = tasks[expert.task_id]
        rec = teacher_forced_utilization(agent, expert, task, policy, heads, carrier_heads=carrier_heads,
                                         instruments=instruments)
        records.append(rec)
        if rec.utilization.matrix == [] or not rec.steps:
            continue
        choice = segments_to_mask(rec.matrix(), fraction)
        correct = {"full": sum(a == b for a, b in zip(rec.actions, rec.expert_actions or []))}
        steps = {"full": len(rec.actions)}
        p_sum = {"full": sum(rec.p_expert or [])}
        for arm, drop in (("bottom_removed", choice.bottom), ("top_removed", choice.top)):
            correct[arm], steps[arm], p_sum[arm] = _tf_counts(
                agent, expert, task, DropSegments(policy, {expert.task_id: drop}), instruments)
        rows.append(SegmentMaskingRow(task_id=expert.task_id, mode="teacher_forced", n_segments=len(choice.c_max),
                                      k=choice.k, top=list(choice.top), bottom=list(choice.bottom),
                                      c_max=[round(c, 5) for c in choice.c_max], correct=correct, steps=steps,
                                      p_expert=p_sum))
    if episode_tasks and env is None:
        raise ValueError("episode_tasks given without env: pass the environment to play them in")
    plans = {e.task_id: e.actions() for e in experts} | dict(expert_plans or {})
    for task in tqdm(list(episode_tasks), desc="segment masking [episodes]", disable=not progress):
        plan = plans.get(task.task_id, ())
        rec, traj = utilization_episode(agent, env, task, policy, heads, expert_plan=plan, max_steps=max_steps,
                                        carrier_heads=carrier_heads, instruments=instruments)
        records.append(rec)
        if rec.utilization.matrix == []:
            continue
        choice = segments_to_mask(rec.matrix(), fraction)
        success = {"full": bool(traj.success)}
        for arm, drop in (("bottom_removed", choice.bottom), ("top_removed", choice.top)):
            run = agent.run(env, task, DropSegments(policy, {task.task_id: drop}), instruments=list(instruments),
                            max_steps=max_steps)
            success[arm] = bool(run.trajectory.success)
        rows.append(SegmentMaskingRow(task_id=task.task_id, mode="episode", n_segments=len(choice.c_max),
                                      k=choice.k, top=list(choice.top), bottom=list(choice.bottom),
                                      c_max=[round(c, 5) for c in choice.c_max], success=success))
    return SegmentMaskingResult(agent.scorer.lm.name, fraction, tuple(rows)), records
