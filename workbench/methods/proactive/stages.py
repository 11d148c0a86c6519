"""The proactive memory agent's LLM stages (bank update through its four tools, intervention, advice), registered
with their deterministic offline algorithms (the advisor runs the intervention algorithm, given no bank).
"""

from __future__ import annotations

from workbench.llm.stages import Stage, register_stages, render_steps
from workbench.methods.proactive.offline import intervene, manage_bank
from workbench.methods.proactive.stage_types import (
    PROACTIVE_TOOLS,
    BankView,
    Intervention,
    ProactiveInput,
)

__all__ = ["STAGE_NAMES"]


def _bank(b: BankView) -> str:
    know = "\n".join(f"- [{e.id}] {e.content}" for e in b.knowledge) or "- (empty)"
    proc = "\n".join(f"- [{e.id}] {e.content}" for e in b.procedural) or "- (empty)"
    return f"Status: {b.status or '(none)'}\nKnowledge:\n{know}\nProcedural:\n{proc}"


def _proactive(p: ProactiveInput) -> dict[str, str]:
    return {"goal": p.goal, "step": str(p.step), "bank": _bank(p.bank),
            "window": render_steps(p.window, offset=max(0, p.step - len(p.window))),
            "current_observation": p.current_observation or "(none)"}


_STAGES = (
    Stage("proactive_update", "proactive_update", ProactiveInput, _proactive, tools=PROACTIVE_TOOLS),
    Stage("proactive_advise", "proactive_advise", ProactiveInput,
          lambda p: {k: v for k, v in _proactive(p).items() if k != "bank"}, output_model=Intervention,
          max_tokens=192),
    Stage("proactive_intervene", "proactive_intervene", ProactiveInput, _proactive, output_model=Intervention,
          max_tokens=256),
)
STAGE_NAMES = tuple(s.name for s in _STAGES)

register_stages(_STAGES, offline={
    "proactive_update": manage_bank,
    "proactive_intervene": intervene,
    "proactive_advise": intervene,
})
