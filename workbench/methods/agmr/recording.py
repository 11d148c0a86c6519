"""C per run, stored with the trajectory: :class:`UtilizationEpisode` records (JSONL) and the runs that make them.

Two ways to get C for a task under a memory policy:

* :func:`utilization_episode`: the agent plays the episode (Figure 4's setting). For a failed run the earliest
  critical error step and the segment supporting the correct action (the *ideal use*) come from the
  deterministic semantic reflector (``offline-alfworld``'s ``reflector_failure`` against the expert plan), and
  :func:`~workbench.attention.diagnose_failure` names the pattern.
* :func:`teacher_forced_utilization`: the model is walked along the expert plan (teacher forcing), one column of
  C per scored step. The critical step is the first step whose choice differs from the expert's; the ideal
  segment is the ``template`` analyzer's for the expert action there. With a model that fails every episode
  this is where C still shows which memory the expert's decisions lean on.

Optionally each record keeps, per (segment, step), the heads that carried the most attention mass to the
segment (``carriers``), for the explorer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from workbench.agents.teacher_forcing import teacher_forced_accuracy
from workbench.attention.diagnosis import diagnose_failure
from workbench.attention.head_set import Head, HeadSet
from workbench.attention.instrument import CaptureInstrument
from workbench.attention.supervision import (
    KEY_KINDS,
    _segment_actions,
    template_segment,
)
from workbench.attention.utilization import (
    UtilizationMatrix,
    UtilizationRecord,
    utilization_matrix,
)
from workbench.memory.trajectory import Trajectory, read_jsonl, write_jsonl
from workbench.methods.agmr.offline.reflector import reflect_failure
from workbench.methods.agmr.stage_types import ReflectorInput

__all__ = ["UtilizationEpisode", "utilization_episode", "teacher_forced_utilization", "save_utilization",
           "load_utilization", "representative"]


class UtilizationEpisode(BaseModel):
    """C of one run with what is needed to read it (JSONL-serialisable).

    Attributes:
        task_id: the task.
        mode: ``episode`` (the agent played) or ``teacher_forced`` (walked along the expert plan).
        model_name: the model.
        memory_entry: the memory entry shown.
        success: episode outcome (None in teacher-forced mode).
        steps: the trajectory step behind each column of C.
        actions: the action the model chose at each column.
        expert_actions: teacher-forced mode: the expert's action at each column.
        p_expert: teacher-forced mode: the probability the model gave the expert's action at each column.
        segment_texts: thought + action text of each memory segment (row labels).
        utilization: C and what it was computed from.
        c_mean: c-bar per segment. c_max: c^max per segment.
        critical_step: column of the earliest critical error (None for a success / no error).
        ideal_segment: the segment supporting the correct action at the critical step.
        correct_action: the correct action at the critical step.
        pattern: :func:`diagnose_failure`'s pattern at the critical step.
        carriers: per segment, per column, the top heads ``[layer, head_index, n_t x mass]`` on that segment.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    mode: Literal["episode", "teacher_forced"]
    model_name: str
    memory_entry: str | None = None
    success: bool | None = None
    steps: list[int]
    actions: list[str]
    expert_actions: list[str] | None = None
    p_expert: list[float] | None = None
    segment_texts: list[str]
    utilization: UtilizationRecord
    c_mean: list[float]
    c_max: list[float]
    critical_step: int | None = None
    ideal_segment: int | None = None
    correct_action: str | None = None
    pattern: str | None = None
    carriers: list[list[list[tuple[int, int, float]]]] = Field(default_factory=list)

    def matrix(self) -> UtilizationMatrix:
        return UtilizationMatrix.from_record(self.utilization)


def _capture_heads(heads: HeadSet, carrier_heads: HeadSet | str | None, lm: Any) -> HeadSet:
    if carrier_heads is None:
        return heads
    extra = HeadSet.all(lm.n_layers, lm.n_heads) if carrier_heads == "all" else HeadSet.of(carrier_heads)
    return HeadSet(heads.heads + tuple(h for h in extra if h not in heads))


def _finish(cap: CaptureInstrument, heads: HeadSet, top_m: int, want_carriers: bool
            ) -> tuple[UtilizationMatrix, list[list[list[tuple[int, int, float]]]]]:
    """C from the retrieval heads' rows (the first |H| rows) and, optionally, the top carriers per cell."""
    if not cap.prompts:
        raise ValueError("no decision step was captured (an empty run?)")
    segments = cap.prompts[0].segment_positions(exclude_observation=True)
    if any(p.segment_positions(exclude_observation=True) != segments for p in cap.prompts):
        raise ValueError("memory segment positions changed within the run; C needs a fixed memory block")
    steps = cap.capture.steps
    n = len(heads)
    C = utilization_matrix([s.rows[:n] for s in steps], segments, [s.prompt_len for s in steps], heads=heads.heads)
    carriers: list[list[list[tuple[int, int, float]]]] = []
    if want_carriers:
        all_heads = cap.capture.heads.heads
        carriers = [[[] for _ in steps] for _ in segments]
        for t, s in enumerate(steps):
            mass = torch.stack([s.rows[:, pos].float().sum(dim=-1) if pos else torch.zeros(len(all_heads))
                                for pos in segments], dim=0) * s.prompt_len  # [segment, head]
            top = torch.topk(mass, k=min(top_m, mass.shape[1]), dim=1)
            for seg in range(len(segments)):
                carriers[seg][t] = [(all_heads[i][0], all_heads[i][1], round(float(v), 4))
                                    for v, i in zip(top.values[seg].tolist(), top.indices[seg].tolist())]
    return C, carriers


def _segment_texts(pieces: Sequence) -> list[str]:
    n = 1 + max((p[1] for p in pieces if p[1] is not None), default=-1)
    texts = [""] * n
    for kind, seg, text in pieces:
        if seg is not None and kind in KEY_KINDS:
            texts[seg] += text
    return [t.strip() for t in texts]


def _record(C: UtilizationMatrix, **fields) -> UtilizationEpisode:
    return UtilizationEpisode(
        utilization=C.to_record(fields["model_name"]),
        c_mean=[round(float(v), 5) for v in C.segment_mean()], c_max=[round(float(v), 5) for v in C.segment_max()],
        **fields,
    )


def _pattern(C: UtilizationMatrix, step: int | None, segment: int | None) -> str | None:
    if step is None or segment is None or not (0 <= segment < C.n_segments and 0 <= step < C.n_steps):
        return None
    return diagnose_failure(C, step, segment).pattern


def utilization_episode(
    agent: Any,
    env: Any,
    task: Any,
    policy: Any,
    heads: HeadSet | Iterable[Head],
    expert_plan: Sequence[str] = (),
    max_steps: int | None = None,
    carrier_heads: HeadSet | Iterable[Head] | str | None = None,
    top_m: int = 5,
    instruments: Sequence[Any] = (),
) -> tuple[UtilizationEpisode, Trajectory]:
    """Play one episode capturing the retrieval heads, and build its :class:`UtilizationEpisode`.

    Args:
        agent: an :class:`~workbench.agents.Agent` (decode ``score``).
        heads: the retrieval heads H (C averages them).
        expert_plan: the task's expert actions; with it a failed run gets a critical step and ideal segment.
        carrier_heads: heads whose per-segment mass is ranked into ``carriers`` (``"all"`` for every head).
        instruments: more instruments active in the same forwards (e.g. a head mask).

    Returns:
        ``(record, trajectory)``.
    """
    heads = HeadSet.of(heads)
    cap = CaptureInstrument(agent, _capture_heads(heads, carrier_heads, agent.scorer.lm))
    cap.reset()
    result = agent.run(env, task, policy, instruments=[*instruments, cap], max_steps=max_steps)
    traj = result.trajectory
    C, carriers = _finish(cap, heads, top_m, carrier_heads is not None)
    block = policy.memory(0, [])
    critical = ideal = correct = None
    if not traj.success and expert_plan and block.entry is not None and block.entry.segments:
        refl = reflect_failure(ReflectorInput(memory=block.entry, trajectory=traj, expert_plan=tuple(expert_plan)))
        critical, ideal, correct = refl.critical_step, refl.supporting_segment, refl.correct_action
    rec = _record(C, task_id=traj.task_id, mode="episode", model_name=agent.scorer.lm.name,
                  memory_entry=traj.meta.get("memory_entry"), success=traj.success,
                  steps=list(range(traj.n_steps)), actions=traj.actions(),
                  segment_texts=_segment_texts(block.pieces), critical_step=critical, ideal_segment=ideal,
                  correct_action=correct, pattern=_pattern(C, critical, ideal), carriers=carriers)
    return rec, traj


def teacher_forced_utilization(
    agent: Any,
    expert: Trajectory,
    task: Any,
    policy: Any,
    heads: HeadSet | Iterable[Head],
    carrier_heads: HeadSet | Iterable[Head] | str | None = None,
    top_m: int = 5,
    instruments: Sequence[Any] = (),
) -> UtilizationEpisode:
    """C of the model walked along ``expert``'s plan under ``policy`` (one column per scored step).

    Args:
        agent: an :class:`~workbench.agents.Agent`.
        expert: an expert trajectory with ``meta["admissible"]``.
        heads: the retrieval heads H.
        carrier_heads: as in :func:`utilization_episode`.
        instruments: more instruments active in the same forwards.
    """
    heads = HeadSet.of(heads)
    cap = CaptureInstrument(agent, _capture_heads(heads, carrier_heads, agent.scorer.lm))
    cap.reset()
    res = teacher_forced_accuracy(agent, [expert], {expert.task_id: task}, policy,
                                  instruments=[*instruments, cap], progress=False)
    C, carriers = _finish(cap, heads, top_m, carrier_heads is not None)
    per_step = list(res.per_step)
    chosen = [r["chosen"] for r in per_step]
    wanted = [r["expert"] for r in per_step]
    block = policy.memory(0, [])
    critical = next((t for t, (a, b) in enumerate(zip(chosen, wanted)) if a != b), None)
    ideal = template_segment(_segment_actions(block.pieces), wanted[critical]) if critical is not None else None
    return _record(C, task_id=expert.task_id, mode="teacher_forced", model_name=agent.scorer.lm.name,
                   memory_entry=per_step[0]["memory_entry"] if per_step else None,
                   steps=[int(r["step"]) for r in per_step], actions=chosen, expert_actions=wanted,
                   p_expert=[float(r["p_expert"]) for r in per_step],
                   segment_texts=_segment_texts(block.pieces), critical_step=critical, ideal_segment=ideal,
                   correct_action=wanted[critical] if critical is not None else None,
                   pattern=_pattern(C, critical, ideal), carriers=carriers)


def save_utilization(path: str | Path, episodes: Iterable[UtilizationEpisode]) -> Path:
    """Write records as JSONL (atomically), e.g. ``<run>/utilization.jsonl`` beside ``trajectories.jsonl``."""
    path = Path(path)
    write_jsonl(path, list(episodes))
    return path


def load_utilization(path: str | Path) -> list[UtilizationEpisode]:
    """Read records written by :func:`save_utilization` (errors name the file, record and field)."""
    return read_jsonl(path, UtilizationEpisode)


def representative(records: Sequence[UtilizationEpisode], n: int = 4) -> list[UtilizationEpisode]:
    """Up to ``n`` records worth a Figure-4 panel: one per failure pattern first (diagnosed records), then the
    other diagnosed ones, then the rest; records without memory segments are never picked."""
    usable = [r for r in records if r.segment_texts and r.steps]
    diagnosed = [r for r in usable if r.pattern is not None]
    picked: list[UtilizationEpisode] = []
    for pattern in ("attended_but_wrong", "missed_relevant", "distracted_by_irrelevant"):
        picked += [r for r in diagnosed if r.pattern == pattern][:1]
    picked += [r for r in diagnosed if r not in picked]
    picked += [r for r in usable if r not in picked]
    return picked[:n]
