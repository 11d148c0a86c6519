"""Teacher-forced next-action accuracy: does the model pick the expert's next action?

A low-variance companion to success rate. For every step k of an expert trajectory the prompt holds the
expert's own history up to k, the candidates are the commands admissible at k (recorded when the expert
was replayed), and the model is right when its arg-max is the expert's action. One bad early choice
cannot derail the rest, so small differences between memory conditions show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from workbench.agents.loop import Agent, StepInstrument
from workbench.agents.policy import MemoryPolicy, replay
from workbench.envs.base import Task
from workbench.memory.trajectory import Trajectory

__all__ = ["TeacherForcedResult", "teacher_forced_accuracy"]


@dataclass(frozen=True)
class TeacherForcedResult:
    accuracy: float
    n_steps: int
    n_correct: int
    mean_p_expert: float  # mean probability (softmax over candidates) the model gives the expert's action
    per_task: dict  # task_id -> (correct, steps)
    per_step: tuple = ()  # one dict per scored step: task_id, step, expert, chosen, p_expert, memory_entry


def teacher_forced_accuracy(
    agent: Agent,
    experts: list[Trajectory],
    tasks: dict[str, Task],
    policy: MemoryPolicy,
    instruments: list[StepInstrument] = (),
    progress: bool = True,
    on_step: Callable[[dict, Any, list[str]], None] | None = None,
) -> TeacherForcedResult:
    """Accuracy of ``agent`` at predicting the expert's next action under ``policy``'s memory.

    Args:
        experts: expert trajectories with ``meta["admissible"]`` (see ``workbench.envs.experts.replay``).
        tasks: task_id -> Task (the policy's ``begin`` needs the Task, e.g. to exclude its own game).
        on_step: called after every scored step with its ``per_step`` record, the agent's decision (scores
            per candidate) and the candidates, for diagnostics that need more than the arg-max.
    """
    n = correct = 0
    p_sum = 0.0
    per_task: dict[str, tuple[int, int]] = {}
    per_step: list[dict] = []
    for traj in tqdm(experts, desc=f"teacher forcing [{policy.name}]", disable=not progress):
        adm = traj.meta.get("admissible")
        if not adm or len(adm) < traj.n_steps:
            raise ValueError(f"expert trajectory {traj.task_id} has no meta['admissible'] per step; regenerate it")
        agent.scorer.reset()
        ok = 0
        # replay: the policy observes every step, the unscorable ones too, so a stateful memory (MemArbiter's
        # banks, the proactive bank) is at each scored step what it was when the expert played it
        for k, step, history, block in replay(policy, tasks[traj.task_id], traj):
            prompt = agent.build_prompt(block, traj.initial_observation, traj.goal, history, step.observation)
            cands = list(adm[k])
            if step.action not in cands:
                continue  # cannot be scored; counted nowhere
            res = agent.decide(prompt, cands, instruments)
            probs = agent.scorer.normalise(res.scores)
            hit = cands[res.best] == step.action
            ok += hit
            n += 1
            p_expert = probs[cands.index(step.action)]
            p_sum += p_expert
            per_step.append({"task_id": traj.task_id, "step": k, "expert": step.action, "chosen": cands[res.best],
                             "p_expert": round(p_expert, 5), "memory_entry": block.entry.entry_id if block.entry else None})
            if on_step is not None:
                on_step(per_step[-1], res, cands)
        correct += ok
        per_task[traj.task_id] = (ok, traj.n_steps)
    return TeacherForcedResult(
        accuracy=correct / n if n else 0.0, n_steps=n, n_correct=correct,
        mean_p_expert=p_sum / n if n else 0.0, per_task=per_task, per_step=tuple(per_step),
    )
