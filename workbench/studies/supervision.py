"""Builders of the retrieval supervision set (AGMR appendix C.1): task-level and step-level transitions turned into records."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from workbench.attention.supervision import (
    KEY_KINDS,
    SupervisionRecord,
    _segment_actions,
    template_segment,
)
from workbench.envs.base import Task
from workbench.llm import get_backend, run_stage
from workbench.memory.trajectory import Trajectory
from workbench.methods.agmr.stage_types import RetrievalAnalyzerInput
from workbench.prompts.layout import BuiltPrompt, PromptBuilder

__all__ = ["StepTransition", "step_transitions", "task_transitions", "teacher_forced_prompt", "build_step_level", "build_task_level"]


@dataclass(frozen=True)
class StepTransition:
    """A teacher-forced step that memory corrected: wrong without memory, the expert's action with it."""

    task_id: str
    step: int
    expert: str
    chosen_without: str
    memory_entry: str | None = None


def step_transitions(without: Iterable[dict], with_memory: Iterable[dict]) -> list[StepTransition]:
    """Steps where memory turned a wrong choice into the expert's action.

    Args:
        without: per-step teacher-forced records (``TeacherForcedResult.per_step``) with memory ``none``.
        with_memory: the same for memory ``traj`` on the same tasks.

    Returns:
        One :class:`StepTransition` per ``(task_id, step)`` present in both, wrong in ``without`` and right in
        ``with_memory``, in the order of ``with_memory``.
    """
    base = {(r["task_id"], int(r["step"])): r for r in without}
    out = []
    for r in with_memory:
        w = base.get((r["task_id"], int(r["step"])))
        if w is None or r["chosen"] != r["expert"] or w["chosen"] == w["expert"]:
            continue
        out.append(StepTransition(r["task_id"], int(r["step"]), r["expert"], w["chosen"], r.get("memory_entry")))
    return out


def task_transitions(without: Iterable[Trajectory], with_memory: Iterable[Trajectory]
                     ) -> list[tuple[Trajectory, Trajectory]]:
    """``(failed without memory, succeeded with memory)`` pairs of the same task, in ``with_memory``'s order."""
    failed = {t.task_id: t for t in without if not t.success}
    return [(failed[t.task_id], t) for t in with_memory if t.success and t.task_id in failed]


def teacher_forced_prompt(builder: PromptBuilder, expert: Trajectory, task: Task, policy: Any, step: int):
    """The prompt teacher forcing scores at ``step`` of ``expert`` under ``policy``, and the policy's block.

    Replays ``policy`` over the expert's history exactly as :func:`workbench.eval.teacher_forced_accuracy` does.

    Returns:
        (tuple[BuiltPrompt, MemoryBlock]): the prompt and the policy's block.
    """
    if not 0 <= step < expert.n_steps:
        raise ValueError(f"{expert.task_id}: step {step} outside its {expert.n_steps} expert steps")
    policy.begin(task, expert.goal, expert.initial_observation)
    for k in range(step):
        policy.memory(k, list(expert.steps[:k]))
        policy.observe(expert.steps[k], expert.steps[k + 1].observation)
    block = policy.memory(step, list(expert.steps[:step]))
    prompt = builder.build(
        expert.initial_observation, expert.goal, expert.steps[:step], memory=block.pieces,
        reminder=block.reminder, final_observation=expert.steps[step].observation if step else None,
    )
    return prompt, block


def _key_spans(prompt: BuiltPrompt, segment: int) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in prompt.spans if s.segment == segment and s.kind in KEY_KINDS]


def _llm_segment(backend: Any, entry, failed: Trajectory, succeeded: Trajectory) -> tuple[int, int, str]:
    """``(key_step, key_segment, key_action)`` from the ``retrieval_analyzer`` stage, validated."""
    analysis = run_stage(backend, "retrieval_analyzer",
                         RetrievalAnalyzerInput(memory=entry, failed=failed, succeeded=succeeded)).value
    if analysis.key_segment >= len(entry.segments):
        raise ValueError(f"retrieval analyzer named segment {analysis.key_segment} of a memory with "
                         f"{len(entry.segments)} segments")
    if analysis.key_step >= succeeded.n_steps:
        raise ValueError(f"retrieval analyzer named step {analysis.key_step} of a run with {succeeded.n_steps} steps")
    return analysis.key_step, analysis.key_segment, analysis.key_action


def _analyzer_name(analyzer: Any) -> str:
    if isinstance(analyzer, str):
        if analyzer != "template":
            raise ValueError(f"analyzer '{analyzer}': pass 'template' or a workbench.llm Backend (get_backend(...))")
        return "template"
    return f"llm:{getattr(analyzer, 'name', type(analyzer).__name__)}"


def _record(builder: PromptBuilder, prompt: BuiltPrompt, block: Any, segment: int, **fields
            ) -> SupervisionRecord | None:
    spans = _key_spans(prompt, segment)
    if not spans:
        return None  # the segment was truncated away or holds no action/thought
    text = "".join(p[2] for p in block.pieces if p[1] == segment and p[0] in KEY_KINDS)
    return SupervisionRecord(
        key_context=text, formatted_prompt=builder.decode(prompt), token_ids=prompt.tokens, key_spans=spans,
        memory_entry=block.entry.entry_id if block.entry else None, key_segment=segment, **fields,
    )


def build_step_level(
    builder: PromptBuilder,
    experts: Sequence[Trajectory],
    tasks: dict[str, Task],
    policy: Any,
    transitions: Iterable[StepTransition],
    analyzer: Any = "template",
    model_name: str | None = None,
    split: str = "",
    progress: bool = True,
) -> list[SupervisionRecord]:
    """Step-level supervision: rebuild the memory prompt at every transition step and mark the key segment.

    Args:
        builder: the model's :class:`PromptBuilder` (the one teacher forcing used).
        experts: expert trajectories (those of the transitions' tasks).
        tasks: task_id -> Task.
        policy: the memory policy of the ``with_memory`` run (e.g. ``build_policy("traj")``).
        transitions: from :func:`step_transitions`.
        analyzer: ``"template"`` or a ``workbench.llm`` Backend.
        model_name: recorded with each record (token ids belong to its tokenizer).
        split: recorded with each record.

    Returns:
        One record per transition whose target has a supporting segment; the rebuilt prompt must show the
        memory entry the transition was scored with.
    """
    by_id = {e.task_id: e for e in experts}
    name = _analyzer_name(analyzer)
    out: list[SupervisionRecord] = []
    for tr in tqdm(list(transitions), desc="step-level supervision", disable=not progress):
        expert = by_id.get(tr.task_id)
        if expert is None:
            raise ValueError(f"transition of task {tr.task_id}: no expert trajectory for it was given")
        prompt, block = teacher_forced_prompt(builder, expert, tasks[tr.task_id], policy, tr.step)
        entry_id = block.entry.entry_id if block.entry else None
        if tr.memory_entry is not None and entry_id != tr.memory_entry:
            raise ValueError(f"{tr.task_id} step {tr.step}: the policy now shows memory '{entry_id}' but the "
                             f"teacher-forced run used '{tr.memory_entry}'; rebuild both with the same memory base")
        if not block.pieces:
            continue
        if name == "template":
            segment = template_segment(_segment_actions(block.pieces), tr.expert)
        else:
            failed = expert.model_copy(update={"steps": (*expert.steps[:tr.step], expert.steps[tr.step].model_copy(
                update={"action": tr.chosen_without})), "success": False})
            succeeded = expert.model_copy(update={"steps": expert.steps[: tr.step + 1]})
            _, segment, _ = _llm_segment(analyzer, block.entry, failed, succeeded)
        if segment is None:
            continue
        rec = _record(builder, prompt, block, segment, task_id=tr.task_id, step=tr.step, target_action=tr.expert,
                      source="step-level", analyzer=name, model_name=model_name, split=split,
                      wrong_action=tr.chosen_without)
        if rec is not None:
            out.append(rec)
    return out


def build_task_level(
    builder: PromptBuilder,
    pairs: Iterable[tuple[Trajectory, Trajectory]],
    tasks: dict[str, Task],
    policy: Any,
    analyzer: Any = "template",
    model_name: str | None = None,
    split: str = "",
) -> list[SupervisionRecord]:
    """Task-level supervision (the paper's): the key step of each memory-augmented success.

    With ``analyzer="template"`` the key step is that of the ``offline-alfworld`` retrieval analyzer (the first
    interaction of the successful run the failed run never performed) and the segment is chosen by
    :func:`template_segment`; with a Backend both come from its ``retrieval_analyzer`` answer.

    Args:
        pairs: ``(failed without memory, succeeded with memory)`` from :func:`task_transitions`.
        policy: the memory policy of the successful run (replayed to rebuild its prompt at the key step).
    """
    name = _analyzer_name(analyzer)
    backend = get_backend("offline-alfworld") if name == "template" else analyzer
    out: list[SupervisionRecord] = []
    for failed, succeeded in pairs:
        task = tasks[succeeded.task_id]
        policy.begin(task, succeeded.goal, succeeded.initial_observation)
        block = policy.memory(0, [])
        if block.entry is None or not block.pieces:
            continue
        used = succeeded.meta.get("memory_entry")
        if used is not None and used != block.entry.entry_id:
            raise ValueError(f"{succeeded.task_id}: the policy now shows memory '{block.entry.entry_id}' but the "
                             f"run used '{used}'; rebuild with the same memory base")
        step, segment, action = _llm_segment(backend, block.entry, failed, succeeded)
        if name == "template":
            segment = template_segment(_segment_actions(block.pieces), action)
            if segment is None:
                continue
        prompt, block = teacher_forced_prompt(builder, succeeded, task, policy, step)
        rec = _record(builder, prompt, block, segment, task_id=succeeded.task_id, step=step, target_action=action,
                      source="task-level", analyzer=name, model_name=model_name, split=split)
        if rec is not None:
            out.append(rec)
    return out
