"""The retrieval supervision set (AGMR appendix C.1): prompts right before a key step + the memory that supports it.

A record pairs the complete prompt before a key decision step (``formatted_prompt``, its ``token_ids``) with the
token positions of the memory snippet that should be retrieved there (``key_spans``). Head scoring
(:func:`workbench.attention.score_heads`) reads ``(token_ids, key_positions)`` from it.

Two sources of transitions, both "memory turned a wrong decision into the right one":

* ``task-level`` (the paper's): tasks that fail without memory and succeed with the retrieved trajectory. An
  analyzer compares the two runs and names the key step of the successful run and the supporting memory segment.
* ``step-level`` (for models that fail every episode, e.g. an untrained 135M model): teacher-forced steps on the
  expert plan where the model's choice is wrong with memory ``none`` and equals the expert's action with ``traj``.
  The key step is that step; the supporting segment is chosen by the analyzer.

Analyzers. ``template`` (deterministic, the default): the supporting segment is the memory segment whose action
has the same ALFWorld action template as the target action (``go to X``, ``take X from Y``, ``put X in/on Y``,
``open X``, ``close X``, ``clean/heat/cool X with Y``, ``use X``, ``examine X``, ``look``, ``inventory``),
preferring the same object type, then the same receptacle type, ties to the earliest segment; a target whose
template no segment shares yields no record. Any :class:`workbench.llm.Backend` instead runs the
``retrieval_analyzer`` stage (an LLM, or ``offline-alfworld``'s rules); its ``key_segment`` is validated against
the memory. Either way the key span is the chosen segment's *action* tokens (and thought tokens, when the memory
has thoughts) as the prompt layout placed them: spans are never recovered by string search.

User files (JSONL of :class:`SupervisionRecord`) load with :func:`load_supervision`; a bad record is an error
naming the file, the record and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from tqdm.auto import tqdm

from workbench.envs.base import Task
from workbench.memory.trajectory import Trajectory, read_jsonl, write_jsonl
from workbench.prompts.layout import BuiltPrompt, PromptBuilder

__all__ = [
    "SupervisionRecord",
    "StepTransition",
    "step_transitions",
    "task_transitions",
    "template_segment",
    "teacher_forced_prompt",
    "build_step_level",
    "build_task_level",
    "load_supervision",
    "save_supervision",
    "supervision_pairs",
    "supervision_summary",
]

Source = Literal["task-level", "step-level", "user"]
KEY_KINDS = ("action", "thought")  # the parts of a segment that make up its key context (never observations)


class SupervisionRecord(BaseModel):
    """One ``(key_context, formatted_prompt)`` pair of the retrieval supervision set (JSONL-serialisable).

    Attributes:
        task_id: the task the prompt belongs to.
        step: the key decision step (index into the trajectory the prompt was built from).
        key_context: text of the supporting memory snippet.
        formatted_prompt: the decoded prompt right before the key step (its last token plays q_t).
        token_ids: the prompt's tokens for ``model_name``'s tokenizer.
        key_spans: ``[start, end)`` token positions of the key context in ``token_ids``.
        target_action: the action the memory should support (the expert's / the successful run's).
        source: ``task-level``, ``step-level`` or ``user``.
        analyzer: what chose the supporting segment (``template``, ``llm:<backend>``, ...).
        model_name: the model whose tokenizer produced ``token_ids``.
        split: the task split.
        memory_entry: the memory entry shown in the prompt.
        key_segment: the index of the supporting segment in that entry.
        wrong_action: the action chosen without memory (what memory corrected), when known.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    step: int = Field(ge=0)
    key_context: str = Field(min_length=1)
    formatted_prompt: str
    token_ids: list[int] = Field(min_length=1)
    key_spans: list[tuple[int, int]] = Field(min_length=1)
    target_action: str
    source: Source
    analyzer: str
    model_name: str | None = None
    split: str = ""
    memory_entry: str | None = None
    key_segment: int | None = None
    wrong_action: str | None = None

    @field_validator("key_spans")
    @classmethod
    def _ordered(cls, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        for start, end in spans:
            if not 0 <= start < end:
                raise ValueError(f"span ({start}, {end}) must satisfy 0 <= start < end (end exclusive)")
        return spans

    @model_validator(mode="after")
    def _inside(self) -> SupervisionRecord:
        last = max(end for _, end in self.key_spans)
        if last > len(self.token_ids):
            raise ValueError(f"key_spans reach token {last} but token_ids holds {len(self.token_ids)} tokens")
        if last == len(self.token_ids):
            raise ValueError("key_spans cover the last prompt token, which is the query q_t itself")
        return self

    @property
    def key_positions(self) -> list[int]:
        """Every token position of the key context, ascending."""
        return sorted({p for start, end in self.key_spans for p in range(start, end)})

    def pair(self) -> tuple[list[int], list[int]]:
        """``(token_ids, key_positions)``, the :data:`SupervisionPair` that ``score_heads`` reads."""
        return list(self.token_ids), self.key_positions


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


def _parse(action: str):
    # ALFWorld's action grammar lives with the offline LLM backends; imported here, not at module level, so
    # the attention layer does not load the LLM package unless supervision is built.
    from workbench.envs.alfworld_text import parse_action

    return parse_action(action)


def template_segment(segment_actions: Sequence[str], target_action: str) -> int | None:
    """The ``template`` analyzer: the segment whose action supports ``target_action`` (module docstring).

    Args:
        segment_actions: the action of every memory segment, in order.
        target_action: the action to support.

    Returns:
        The segment index, or None when no segment shares the target's action template.
    """
    want = _parse(target_action)
    if want.template == "other":
        return None
    wx, wy = want.types
    best: tuple[int, int] | None = None
    choice = None
    for k, action in enumerate(segment_actions):
        got = _parse(action)
        if got.template != want.template:
            continue
        gx, gy = got.types
        score = (int(bool(wx) and gx == wx), int(bool(wy) and gy == wy))
        if best is None or score > best:  # strict: ties keep the earliest segment
            best, choice = score, k
    return choice


def teacher_forced_prompt(builder: PromptBuilder, expert: Trajectory, task: Task, policy: Any, step: int):
    """The prompt teacher forcing scores at ``step`` of ``expert`` under ``policy``, and the policy's block.

    Replays ``policy`` over the expert's history exactly as :func:`workbench.eval.teacher_forced_accuracy` does.

    Returns:
        ``(BuiltPrompt, MemoryBlock)``.
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


def _segment_actions(pieces: Sequence) -> list[str]:
    n = 1 + max((p[1] for p in pieces if p[1] is not None), default=-1)
    actions = [""] * n
    for kind, seg, text in pieces:
        if seg is not None and kind == "action":
            actions[seg] = text.strip().removeprefix(">").strip()
    return actions


def _llm_segment(backend: Any, entry, failed: Trajectory, succeeded: Trajectory) -> tuple[int, int, str]:
    """``(key_step, key_segment, key_action)`` from the ``retrieval_analyzer`` stage, validated."""
    from workbench.llm import RetrievalAnalyzerInput, run_stage

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
    from workbench.llm import get_backend

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


def save_supervision(path: str | Path, records: Iterable[SupervisionRecord]) -> Path:
    """Write records as JSONL (atomically)."""
    path = Path(path)
    write_jsonl(path, list(records))
    return path


def load_supervision(path: str | Path) -> list[SupervisionRecord]:
    """Read a supervision JSONL (ours or user-made).

    Raises:
        FileNotFoundError: no such file.
        TrajectoryFormatError: a record is malformed; the message names the file, the record and the field.
    """
    return read_jsonl(path, SupervisionRecord)


def supervision_pairs(records: Iterable[SupervisionRecord], lm: Any | None = None) -> list[tuple[list[int], list[int]]]:
    """``(token_ids, key_positions)`` per record, for :func:`score_heads`.

    Args:
        lm: when given, every record must have been tokenized for a model of this name or its token ids must
            decode to the record's ``formatted_prompt`` with ``lm``'s tokenizer (token ids of another tokenizer
            would point at the wrong tokens).
    """
    out = []
    for i, rec in enumerate(records):
        if lm is not None and rec.model_name not in (None, lm.name):
            if lm.tokenizer.decode(rec.token_ids) != rec.formatted_prompt:
                raise ValueError(
                    f"supervision record {i} ({rec.task_id} step {rec.step}): tokenized for '{rec.model_name}', "
                    f"whose token ids do not decode to its formatted_prompt with {lm.name}'s tokenizer; rebuild the "
                    "supervision set for this model"
                )
        out.append(rec.pair())
    return out


def supervision_summary(records: Sequence[SupervisionRecord]) -> dict[str, float | int]:
    """Counts and sizes of a supervision set: pairs per source, tasks, mean key / prompt tokens."""
    n = len(records)
    return {
        "pairs": n,
        "task-level": sum(r.source == "task-level" for r in records),
        "step-level": sum(r.source == "step-level" for r in records),
        "user": sum(r.source == "user" for r in records),
        "tasks": len({r.task_id for r in records}),
        "mean key tokens": round(sum(len(r.key_positions) for r in records) / n, 1) if n else 0,
        "mean prompt tokens": round(sum(len(r.token_ids) for r in records) / n, 1) if n else 0,
    }
