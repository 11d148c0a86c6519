"""MemArbiter's LLM stages (state parser, candidate writer), registered with their deterministic offline algorithms.
"""

from __future__ import annotations

from workbench.llm.stages import Stage, register_stages, render_steps
from workbench.methods.arbiter.offline import parse_state, write_candidates
from workbench.methods.arbiter.stage_types import (
    CandidateWrites,
    ParsedState,
    StateParserInput,
    WriterInput,
)

__all__ = ["STAGE_NAMES"]


_STAGES = (
    Stage("arbiter_writer", "arbiter_writer", WriterInput,
          lambda p: {"goal": p.goal, "step": str(p.step), "previous_action": p.previous_action or "(none)",
                     "observation": p.observation,
                     "state": p.state.model_dump_json() if p.state else "(not parsed)",
                     "memory": "\n".join(f"- {m}" for m in p.memory) or "- (empty)"},
          output_model=CandidateWrites, max_tokens=768),
    Stage("arbiter_state_parser", "arbiter_state_parser", StateParserInput,
          lambda p: {"goal": p.goal, "history": render_steps(p.history), "observation": p.observation},
          output_model=ParsedState),
)
STAGE_NAMES = tuple(s.name for s in _STAGES)

register_stages(_STAGES, offline={
    "arbiter_writer": write_candidates,
    "arbiter_state_parser": parse_state,
})
