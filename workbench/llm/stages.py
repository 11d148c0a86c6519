"""LLM stages: each pairs a prompt template file with its typed input and typed output (or tools).

``run_stage(backend, "reflector_failure", payload)`` renders the template from the payload, sends it with
the payload itself as ``context`` (offline backends compute from it; model backends read only the prompt)
and returns the validated output. Methods code calls only this, so a vLLM server, a local model and the
deterministic offline algorithm are interchangeable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from workbench.llm.errors import LLMConfigError, LLMOutputError, LLMTransportError
from workbench.llm.ledger import StageCall
from workbench.llm.offline.backend import register_algorithm
from workbench.llm.protocol import Backend, Message, ToolSpec
from workbench.llm.structured import Parsed, chat_json, chat_tools
from workbench.llm.templates import load_template
from workbench.memory.segment_text import segment_text
from workbench.memory.trajectory import MemoryEntry, Step, Trajectory
from workbench.registry import Registry

__all__ = ["Stage", "STAGES", "register_stage", "register_stages", "register_scienceworld_algorithms", "get_stage", "list_stages", "render_stage", "run_stage", "render_memory",
           "render_steps", "render_trajectory"]


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


#: Stages by name. Each method registers its own stages (its ``stages`` module) when ``workbench.methods`` is
#: imported, which a miss does: ``llm`` never imports the methods.
STAGES: Registry[Stage] = Registry("LLM stage", providers=("workbench.methods",), error=LLMConfigError)


def register_stage(stage: Stage) -> Stage:
    """Add a stage to the registry (a name can be registered once)."""
    if (stage.output_model is None) == (not stage.tools):
        raise LLMConfigError(f"stage '{stage.name}' needs exactly one of output_model or tools")
    return STAGES.register(stage.name, stage)


def register_stages(stages: Sequence[Stage], offline: Mapping[str, Callable[[Any], Any]]) -> None:
    """Register a method's stages, each with the deterministic offline algorithm that answers it (``offline``:
    stage name -> algorithm over the stage's validated input)."""
    missing = [st.name for st in stages if st.name not in offline]
    if missing:
        raise LLMConfigError(f"stages {missing} have no offline algorithm: every stage needs one (named so in tables)")
    for st in stages:
        register_stage(st)
        register_algorithm(st.name, st.input_model, offline[st.name])


def register_scienceworld_algorithms(stages: Sequence[Stage], offline: Mapping[str, Callable[[Any], Any]]) -> None:
    """Register the ``offline-scienceworld`` algorithms of some of ``stages`` (already registered by
    :func:`register_stages`): stage name -> algorithm over the stage's validated input."""
    by_name = {st.name: st for st in stages}
    unknown = sorted(set(offline) - set(by_name))
    if unknown:
        raise LLMConfigError(f"offline ScienceWorld algorithms for stages {unknown}, which are not among {sorted(by_name)}")
    for name, algorithm in offline.items():
        register_algorithm(name, by_name[name].input_model, algorithm, benchmark="scienceworld")


def get_stage(name: str) -> Stage:
    return STAGES.get(name)


def list_stages() -> list[str]:
    return sorted(STAGES.names())


# -- rendering helpers: how structured inputs read in a prompt (the methods' stage definitions use them) ---------------------------------------------
def render_memory(m: MemoryEntry) -> str:
    head = f"(memory task: {m.goal})\n"
    if m.initial_observation:
        head += f"Initial observation: {m.initial_observation}\n"
    segs = [f"[segment {k}]\n{segment_text(s)}" for k, s in enumerate(m.segments)]
    return head + ("\n".join(segs) if segs else "(no segments)")


def render_steps(steps: Sequence[Step], offset: int = 0) -> str:
    out = []
    for k, s in enumerate(steps, start=offset):
        lines = [f"[step {k}]", f"Observation: {s.observation}"]
        if s.thought:
            lines.append(f"Thought: {s.thought}")
        lines.append(f"Action: {s.action}")
        out.append("\n".join(lines))
    return "\n".join(out) if out else "(no steps yet)"


def render_trajectory(t: Trajectory) -> str:
    return render_steps(t.steps) + f"\nOutcome: {'success' if t.success else 'failure'}"


def render_stage(stage: Stage | str, payload: BaseModel | dict, benchmark: str = "alfworld"
                 ) -> tuple[list[Message], dict[str, Any]]:
    """Validate ``payload``, render the stage's messages (in ``benchmark``'s words: what its agent is, its
    examples; :func:`workbench.llm.templates.vocabulary`), and build the context sent alongside them.

    Returns:
        ``(messages, context)`` where context is ``{"stage": name, "input": payload as JSON data}``.
    """
    st = get_stage(stage) if isinstance(stage, str) else stage
    data = payload if isinstance(payload, st.input_model) else st.input_model.model_validate(
        payload.model_dump() if isinstance(payload, BaseModel) else payload)
    messages = load_template(st.template).render(benchmark, **st.fields(data))
    return messages, {"stage": st.name, "input": data.model_dump(mode="json")}


def run_stage(backend: Backend, stage: Stage | str, payload: BaseModel | dict, *, temperature: float = 0.0,
              max_tokens: int | None = None, seed: int | None = 0, repair: bool = True,
              ledger: list[StageCall] | None = None, benchmark: str = "alfworld") -> Parsed[Any]:
    """Run one stage on ``backend`` and return its validated output; ``benchmark``: whose words its prompt speaks
    (the episode's task's ``Task.benchmark``).

    ``Parsed.value`` is the stage's output model, or a list of validated ToolCalls for tool stages. ``ledger``: a
    list that gets this call's :class:`~workbench.llm.ledger.StageCall` (fate, requests, wall time), whatever the
    outcome.

    Raises:
        LLMOutputError: the reply (and the one repair retry) did not validate.
        LLMTransportError: the backend could not be reached.
        pydantic.ValidationError: the payload does not fit the stage's input model.
    """
    st = get_stage(stage) if isinstance(stage, str) else stage
    messages, context = render_stage(st, payload, benchmark)
    params = dict(temperature=temperature, max_tokens=max_tokens or st.max_tokens, seed=seed, context=context,
                  repair=repair)
    t0 = time.perf_counter()
    mode = str(getattr(backend, "mode", "algorithm" if getattr(backend, "uses_context", False) else "prompt"))

    def note(fate: str, requests: int, reason: str | None = None, tokens: int | None = None) -> None:
        if ledger is not None:
            ledger.append(StageCall(stage=st.name, backend=str(getattr(backend, "name", type(backend).__name__)),
                                    model=str(getattr(backend, "model", "")), mode=mode, fate=fate,  # type: ignore[arg-type]
                                    requests=requests, ms=(time.perf_counter() - t0) * 1000, reason=reason,
                                    completion_tokens=tokens))

    try:
        if st.tools:
            out = chat_tools(backend, messages, st.tools, stage=st.name, **params)
        else:
            assert st.output_model is not None
            out = chat_json(backend, messages, st.output_model, stage=st.name, **params)
    except LLMOutputError as e:
        note("rejected", max(len(e.raw), 1), reason=e.reason[:300])
        raise
    except LLMTransportError as e:
        note("failed", getattr(e, "attempts", 1), reason=str(e)[:300])
        raise
    used = [r.usage.get("completion_tokens") for r in out.results]
    note("repaired" if out.repaired else "valid", len(out.results), reason=out.problems[0][:300] if out.problems else None,
         tokens=sum(u for u in used if u is not None) if any(u is not None for u in used) else None)
    return out
