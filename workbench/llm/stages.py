"""LLM stages: each pairs a prompt template file with its typed input and typed output (or tools).

``run_stage(backend, "reflector_failure", payload)`` renders the template from the payload, sends it with
the payload itself as ``context`` (offline backends compute from it; model backends read only the prompt)
and returns the validated output. Methods code calls only this, so a vLLM server, a local model and the
deterministic offline algorithm are interchangeable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from workbench.llm.edits import segment_text
from workbench.llm.errors import LLMConfigError
from workbench.llm.inputs import (
    BankView,
    CurateInput,
    DirectFailureEditInput,
    DirectSuccessEditInput,
    FailureRefinerInput,
    ProactiveInput,
    ReflectorInput,
    RetrievalAnalyzerInput,
    StateParserInput,
    SuccessRefinerInput,
    WorkflowInput,
    WriterInput,
)
from workbench.llm.protocol import Backend, Message, ToolSpec
from workbench.llm.schemas import (
    CandidateWrites,
    Cheatsheet,
    DirectEdit,
    FailureReflection,
    Intervention,
    ParsedState,
    Refinement,
    RetrievalAnalysis,
    SuccessReflection,
    Workflow,
)
from workbench.llm.structured import Parsed, chat_json, chat_tools
from workbench.llm.templates import load_template
from workbench.llm.tools import PROACTIVE_TOOLS
from workbench.memory.trajectory import MemoryEntry, Step, Trajectory

__all__ = ["Stage", "register_stage", "get_stage", "list_stages", "render_stage", "run_stage"]


@dataclass(frozen=True)
class Stage:
    """One LLM stage.

    Attributes:
        name: registry name (also the ``stage`` key of the context).
        template: prompt file stem in ``workbench/llm/prompts/``.
        input_model: pydantic model of the payload.
        fields: payload -> template placeholder values.
        output_model: pydantic model of the reply, or None for a tool-calling stage.
        tools: the tools a tool-calling stage may call.
        max_tokens: default reply budget.
    """

    name: str
    template: str
    input_model: type[BaseModel]
    fields: Callable[[Any], dict[str, str]]
    output_model: type[BaseModel] | None = None
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 512


_STAGES: dict[str, Stage] = {}


def register_stage(stage: Stage) -> Stage:
    """Add a stage to the registry (a name can be registered once)."""
    if stage.name in _STAGES:
        raise LLMConfigError(f"stage '{stage.name}' is already registered")
    if (stage.output_model is None) == (not stage.tools):
        raise LLMConfigError(f"stage '{stage.name}' needs exactly one of output_model or tools")
    _STAGES[stage.name] = stage
    return stage


def get_stage(name: str) -> Stage:
    try:
        return _STAGES[name]
    except KeyError:
        raise LLMConfigError(f"unknown stage '{name}'; registered: {list_stages()}") from None


def list_stages() -> list[str]:
    return sorted(_STAGES)


# -- rendering helpers: how structured inputs read in a prompt ---------------------------------------------
def _memory(m: MemoryEntry) -> str:
    head = f"(memory task: {m.goal})\n"
    if m.initial_observation:
        head += f"Initial observation: {m.initial_observation}\n"
    segs = [f"[segment {k}]\n{segment_text(s)}" for k, s in enumerate(m.segments)]
    return head + ("\n".join(segs) if segs else "(no segments)")


def _steps(steps: Sequence[Step], offset: int = 0) -> str:
    out = []
    for k, s in enumerate(steps, start=offset):
        lines = [f"[step {k}]", f"Observation: {s.observation}"]
        if s.thought:
            lines.append(f"Thought: {s.thought}")
        lines.append(f"Action: {s.action}")
        out.append("\n".join(lines))
    return "\n".join(out) if out else "(no steps yet)"


def _traj(t: Trajectory) -> str:
    return _steps(t.steps) + f"\nOutcome: {'success' if t.success else 'failure'}"


def _bank(b: BankView) -> str:
    know = "\n".join(f"- [{e.id}] {e.content}" for e in b.knowledge) or "- (empty)"
    proc = "\n".join(f"- [{e.id}] {e.content}" for e in b.procedural) or "- (empty)"
    return f"Status: {b.status or '(none)'}\nKnowledge:\n{know}\nProcedural:\n{proc}"


def _proactive(p: ProactiveInput) -> dict[str, str]:
    return {"goal": p.goal, "step": str(p.step), "bank": _bank(p.bank),
            "window": _steps(p.window, offset=max(0, p.step - len(p.window))),
            "current_observation": p.current_observation or "(none)"}


for _stage in (
    Stage("retrieval_analyzer", "retrieval_analyzer", RetrievalAnalyzerInput,
          lambda p: {"goal": p.succeeded.goal, "memory": _memory(p.memory), "failed": _traj(p.failed),
                     "succeeded": _traj(p.succeeded)}, output_model=RetrievalAnalysis),
    Stage("reflector_failure", "reflector_failure", ReflectorInput,
          lambda p: {"goal": p.trajectory.goal, "memory": _memory(p.memory), "trajectory": _traj(p.trajectory),
                     "expert_plan": "\n".join(f"{k}. {a}" for k, a in enumerate(p.expert_plan)) or "(none)"},
          output_model=FailureReflection),
    Stage("reflector_success", "reflector_success", ReflectorInput,
          lambda p: {"goal": p.trajectory.goal, "memory": _memory(p.memory), "trajectory": _traj(p.trajectory)},
          output_model=SuccessReflection),
    Stage("refiner_failure", "refiner_failure", FailureRefinerInput,
          lambda p: {"goal": p.memory.goal, "memory": _memory(p.memory),
                     "reflection": json.dumps(p.reflection.model_dump(), indent=1),
                     "utilization": "\n".join(f"{k}: {v:.4f}" for k, v in enumerate(p.utilization))
                     + (f"\n(reference: this memory's median peak score is {p.scale:.4f})" if p.scale is not None
                        else "")},
          output_model=Refinement, max_tokens=768),
    Stage("refiner_success", "refiner_success", SuccessRefinerInput,
          lambda p: {"goal": p.memory.goal, "memory": _memory(p.memory),
                     "candidates": "\n".join(f"- {r.index}: {r.reason}" for r in p.reflection.redundant_segments)
                     or "(none)",
                     "utilization": "\n".join(f"{k}: {sum(r) / max(len(r), 1):.4f}, {max(r, default=0.0):.4f}"
                                              for k, r in enumerate(p.utilization))},
          output_model=Refinement, max_tokens=768),
    Stage("reflector_edit_failure", "reflector_edit_failure", DirectFailureEditInput,
          lambda p: {"goal": p.memory.goal, "memory": _memory(p.memory),
                     "reflection": json.dumps(p.reflection.model_dump(), indent=1)},
          output_model=DirectEdit, max_tokens=768),
    Stage("reflector_edit_success", "reflector_edit_success", DirectSuccessEditInput,
          lambda p: {"goal": p.memory.goal, "memory": _memory(p.memory),
                     "candidates": "\n".join(f"- {r.index}: {r.reason}" for r in p.reflection.redundant_segments)
                     or "(none)"},
          output_model=DirectEdit, max_tokens=768),
    Stage("awm_induce", "awm_induce", WorkflowInput,
          lambda p: {"task_type": p.task_type,
                     "examples": "\n\n".join(f"Run {n} (task: {e.goal})\n" + "\n".join(s.action for s in e.segments)
                                             for n, e in enumerate(p.examples, start=1))},
          output_model=Workflow, max_tokens=512),
    Stage("dc_curate", "dc_curate", CurateInput,
          lambda p: {"goal": p.goal, "task_type": p.task_type,
                     "previous": "\n".join(f"- [{e.topic}] {e.insight} (uses: {e.uses})" for e in p.previous.entries)
                     or "(empty: this is the first task)",
                     "examples": "\n\n".join(f"Run {n} (task: {e.goal})\n" + "\n".join(s.action for s in e.segments)
                                             for n, e in enumerate(p.examples, start=1)) or "(none retrieved)"},
          output_model=Cheatsheet, max_tokens=1536),
    Stage("arbiter_writer", "arbiter_writer", WriterInput,
          lambda p: {"goal": p.goal, "step": str(p.step), "previous_action": p.previous_action or "(none)",
                     "observation": p.observation,
                     "state": p.state.model_dump_json() if p.state else "(not parsed)",
                     "memory": "\n".join(f"- {m}" for m in p.memory) or "- (empty)"},
          output_model=CandidateWrites, max_tokens=768),
    Stage("arbiter_state_parser", "arbiter_state_parser", StateParserInput,
          lambda p: {"goal": p.goal, "history": _steps(p.history), "observation": p.observation},
          output_model=ParsedState),
    Stage("proactive_update", "proactive_update", ProactiveInput, _proactive, tools=PROACTIVE_TOOLS),
    Stage("proactive_advise", "proactive_advise", ProactiveInput,
          lambda p: {k: v for k, v in _proactive(p).items() if k != "bank"}, output_model=Intervention,
          max_tokens=192),
    Stage("proactive_intervene", "proactive_intervene", ProactiveInput, _proactive, output_model=Intervention,
          max_tokens=256),
):
    register_stage(_stage)


def render_stage(stage: Stage | str, payload: BaseModel | dict) -> tuple[list[Message], dict[str, Any]]:
    """Validate ``payload``, render the stage's messages, and build the context sent alongside them.

    Returns:
        ``(messages, context)`` where context is ``{"stage": name, "input": payload as JSON data}``.
    """
    st = get_stage(stage) if isinstance(stage, str) else stage
    data = payload if isinstance(payload, st.input_model) else st.input_model.model_validate(
        payload.model_dump() if isinstance(payload, BaseModel) else payload)
    messages = load_template(st.template).render(**st.fields(data))
    return messages, {"stage": st.name, "input": data.model_dump(mode="json")}


def run_stage(backend: Backend, stage: Stage | str, payload: BaseModel | dict, *, temperature: float = 0.0,
              max_tokens: int | None = None, seed: int | None = 0, repair: bool = True) -> Parsed[Any]:
    """Run one stage on ``backend`` and return its validated output.

    ``Parsed.value`` is the stage's output model, or a list of validated ToolCalls for tool stages.

    Raises:
        LLMOutputError: the reply (and the one repair retry) did not validate.
        LLMTransportError: the backend could not be reached.
        pydantic.ValidationError: the payload does not fit the stage's input model.
    """
    st = get_stage(stage) if isinstance(stage, str) else stage
    messages, context = render_stage(st, payload)
    params = dict(temperature=temperature, max_tokens=max_tokens or st.max_tokens, seed=seed, context=context,
                  repair=repair)
    if st.tools:
        return chat_tools(backend, messages, st.tools, stage=st.name, **params)
    assert st.output_model is not None
    return chat_json(backend, messages, st.output_model, stage=st.name, **params)
