"""``offline-alfworld``: a deterministic Backend whose answers are computed by ALFWorld rules, not a model.

It reads the structured payload that :func:`workbench.llm.stages.run_stage` sends as ``context``
(``{"stage": name, "input": {...}}``), runs the stage's algorithm, and replies exactly like a model would:
JSON text for schema stages, tool calls (native, or the ``<tool_call>`` text form) for tool stages. The
reply then goes through the same parsing and validation as a real model's, so methods code cannot tell
the difference, and CI exercises the real path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from workbench.llm.errors import LLMConfigError
from workbench.llm.protocol import ChatResult, Message, ToolSpec
from workbench.llm.tools import format_text_tool_call
from workbench.registry import Registry

__all__ = ["OfflineALFWorldBackend", "OfflineScienceWorldBackend", "OFFLINE_ALGORITHMS",
           "OFFLINE_SCIENCEWORLD_ALGORITHMS", "register_algorithm"]

#: Stage name -> (its input model, the deterministic algorithm that answers it). Each method registers the
#: algorithms of its stages beside their definitions (``workbench.methods.<m>.stages``), imported on a miss.
OFFLINE_ALGORITHMS: Registry[tuple[type[BaseModel], Callable[[Any], Any]]] = Registry(
    "offline algorithm", providers=("workbench.methods",), error=LLMConfigError)


#: ScienceWorld's: the stages of AGMR's refinement only (the memory policies' stages need an LLM there)
OFFLINE_SCIENCEWORLD_ALGORITHMS: Registry[tuple[type[BaseModel], Callable[[Any], Any]]] = Registry(
    "offline ScienceWorld algorithm", providers=("workbench.methods",), error=LLMConfigError)


def register_algorithm(stage: str, input_model: type[BaseModel], algorithm: Callable[[Any], Any],
                       benchmark: str = "alfworld") -> None:
    """Register the offline algorithm that answers ``stage`` from its validated payload, on ``benchmark``."""
    registry = {"alfworld": OFFLINE_ALGORITHMS, "scienceworld": OFFLINE_SCIENCEWORLD_ALGORITHMS}.get(benchmark)
    if registry is None:
        raise LLMConfigError(f"offline algorithms exist for alfworld and scienceworld, not '{benchmark}'")
    registry.register(stage, (input_model, algorithm))


class OfflineALFWorldBackend:
    """Deterministic rule-based answers for every ALFWorld LLM stage.

    Args:
        tool_format: ``native`` returns tool calls as structured calls; ``text`` prints them in the
            ``<tool_call><function=...>`` form, exercising the text fallback parser.
    """

    name = "offline-alfworld"
    model = "alfworld-rules-v1"
    algorithms = OFFLINE_ALGORITHMS
    uses_context = True  # answers are computed from the payload (also keys the response cache)
    mode = "algorithm"  # see workbench.llm.ledger

    def __init__(self, tool_format: Literal["native", "text"] = "native") -> None:
        self.tool_format = tool_format
        self.stats: dict[str, int] = {"calls": 0}

    def cache_identity(self) -> dict[str, Any]:
        return {"tool_format": self.tool_format}

    def chat(
        self,
        messages: Sequence[Message],  # noqa: ARG002 -- the payload, not the prose, is the input
        *,
        tools: Sequence[ToolSpec] | None = None,  # noqa: ARG002
        schema: type[BaseModel] | None = None,  # noqa: ARG002
        temperature: float = 0.0,  # noqa: ARG002 -- rules are deterministic
        max_tokens: int = 512,  # noqa: ARG002
        seed: int | None = None,  # noqa: ARG002
        context: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """Answer from ``context``; raises LLMConfigError when there is no stage payload to compute from."""
        stage = (context or {}).get("stage")
        if stage not in self.algorithms:
            if stage is None:
                raise LLMConfigError(
                    f"{self.name} computes answers from the structured stage payload, and got none. Call it through "
                    f"workbench.llm.run_stage (its stages: {sorted(self.algorithms.names())})")
            raise LLMConfigError(f"{self.name} has no algorithm for stage {stage!r} (its stages: "
                                 f"{sorted(self.algorithms.names())}): give that stage an LLM backend")
        input_model, algorithm = self.algorithms.get(stage)
        try:
            payload = input_model.model_validate((context or {}).get("input"))
        except ValidationError as e:
            raise LLMConfigError(f"{self.name}: payload for stage '{stage}' is invalid: {e}") from None
        out = algorithm(payload)
        self.stats["calls"] += 1
        if isinstance(out, list):  # a tool stage
            if self.tool_format == "text":
                text = "\n".join(format_text_tool_call(c.name, c.arguments) for c in out)
                return ChatResult(text=text, finish_reason="stop", backend=self.name, model=self.model)
            return ChatResult(tool_calls=tuple(out), finish_reason="tool_calls" if out else "stop",
                              backend=self.name, model=self.model)
        return ChatResult(text=out.model_dump_json(), finish_reason="stop", backend=self.name, model=self.model)


class OfflineScienceWorldBackend(OfflineALFWorldBackend):
    """Deterministic rule-based answers for AGMR's refinement stages on ScienceWorld
    (:mod:`workbench.methods.agmr.offline.scienceworld`): the plan-tracking reflector over the task's gold path and
    the attention-guided refiner's rule with ScienceWorld's action kinds. Other stages are refused by name."""

    name = "offline-scienceworld"
    model = "scienceworld-rules-v1"
    algorithms = OFFLINE_SCIENCEWORLD_ALGORITHMS
