"""AGMR's LLM stages (retrieval analyzer, semantic reflector, refiner, direct edit) and those of Table 1's baselines
(AWM induction, Dynamic Cheatsheet curation): each a prompt template with its typed input and output, registered
into :data:`workbench.llm.stages.STAGES` and, with its deterministic offline algorithm, into
:data:`workbench.llm.offline.OFFLINE_ALGORITHMS`.
"""

from __future__ import annotations

import json

from workbench.llm.stages import (
    Stage,
    register_scienceworld_algorithms,
    register_stages,
    render_memory,
    render_trajectory,
)
from workbench.methods.agmr.offline import scienceworld as sw
from workbench.methods.agmr.offline.awm import induce_workflow
from workbench.methods.agmr.offline.dc import curate
from workbench.methods.agmr.offline.refiner import (
    direct_edit_failure,
    direct_edit_success,
    refine_failure,
    refine_success,
)
from workbench.methods.agmr.offline.reflector import (
    analyze_retrieval,
    reflect_failure,
    reflect_success,
)
from workbench.methods.agmr.stage_types import (
    Cheatsheet,
    CurateInput,
    DirectEdit,
    DirectFailureEditInput,
    DirectSuccessEditInput,
    FailureRefinerInput,
    FailureReflection,
    PatternJudgeInput,
    PatternJudgement,
    Refinement,
    ReflectorInput,
    RetrievalAnalysis,
    RetrievalAnalyzerInput,
    SuccessRefinerInput,
    SuccessReflection,
    Workflow,
    WorkflowInput,
)

__all__ = ["STAGE_NAMES"]


def judge_by_rule(inp: PatternJudgeInput) -> PatternJudgement:
    """The offline answer of ``pattern_judge``: the workbench's rule itself (:func:`workbench.attention.diagnose_column`),
    so a model's labels are compared with exactly what the refinement recorded as ``rule_pattern``."""
    from workbench.attention.diagnosis import diagnose_column

    d = diagnose_column(list(inp.utilization), inp.segment, inp.scale, step=inp.step)
    return PatternJudgement(pattern=d.pattern, rationale="the rule on C[:, j] (offline stand-in for a judge)")


def _plan_section(plan: tuple[str, ...]) -> str:
    """The reflector prompt's "Reference plan" section: shown only when the refinement shows the expert plan
    (``--reflector-sees-plan``); the paper's reflector sees the memory and the trajectory alone."""
    if not plan:
        return ""
    return "\nReference plan for this task:\n" + "\n".join(f"{k}. {a}" for k, a in enumerate(plan)) + "\n"


_STAGES = (
    Stage("retrieval_analyzer", "retrieval_analyzer", RetrievalAnalyzerInput,
          lambda p: {"goal": p.succeeded.goal, "memory": render_memory(p.memory), "failed": render_trajectory(p.failed),
                     "succeeded": render_trajectory(p.succeeded)}, output_model=RetrievalAnalysis),
    Stage("reflector_failure", "reflector_failure", ReflectorInput,
          lambda p: {"goal": p.trajectory.goal, "memory": render_memory(p.memory), "trajectory": render_trajectory(p.trajectory),
                     "expert_plan": _plan_section(p.expert_plan)},
          output_model=FailureReflection),
    Stage("reflector_success", "reflector_success", ReflectorInput,
          lambda p: {"goal": p.trajectory.goal, "memory": render_memory(p.memory), "trajectory": render_trajectory(p.trajectory)},
          output_model=SuccessReflection),
    Stage("refiner_failure", "refiner_failure", FailureRefinerInput,
          lambda p: {"goal": p.memory.goal, "memory": render_memory(p.memory),
                     "reflection": json.dumps(p.reflection.model_dump(), indent=1),
                     "utilization": "\n".join(f"{k}: {v:.4f}" for k, v in enumerate(p.utilization))
                     + (f"\n(reference: this memory's median peak score is {p.scale:.4f})" if p.scale is not None
                        else "")},
          output_model=Refinement, max_tokens=768),
    Stage("refiner_success", "refiner_success", SuccessRefinerInput,
          lambda p: {"goal": p.memory.goal, "memory": render_memory(p.memory),
                     "candidates": "\n".join(f"- {r.index}: {r.reason}" for r in p.reflection.redundant_segments)
                     or "(none)",
                     "utilization": "\n".join(f"{k}: {sum(r) / max(len(r), 1):.4f}, {max(r, default=0.0):.4f}"
                                              for k, r in enumerate(p.utilization))},
          output_model=Refinement, max_tokens=768),
    Stage("reflector_edit_failure", "reflector_edit_failure", DirectFailureEditInput,
          lambda p: {"goal": p.memory.goal, "memory": render_memory(p.memory),
                     "reflection": json.dumps(p.reflection.model_dump(), indent=1)},
          output_model=DirectEdit, max_tokens=768),
    Stage("reflector_edit_success", "reflector_edit_success", DirectSuccessEditInput,
          lambda p: {"goal": p.memory.goal, "memory": render_memory(p.memory),
                     "candidates": "\n".join(f"- {r.index}: {r.reason}" for r in p.reflection.redundant_segments)
                     or "(none)"},
          output_model=DirectEdit, max_tokens=768),
    Stage("pattern_judge", "pattern_judge", PatternJudgeInput,
          lambda p: {"goal": p.memory.goal, "memory": render_memory(p.memory), "step": str(p.step),
                     "correct_action": p.correct_action, "segment": str(p.segment),
                     "utilization": "\n".join(f"{k}: {v:.4f}" for k, v in enumerate(p.utilization))
                     + (f"\n(reference: this memory's median peak score is {p.scale:.4f})" if p.scale is not None
                        else "")},
          output_model=PatternJudgement, max_tokens=256),
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
)
STAGE_NAMES = tuple(s.name for s in _STAGES)

register_stages(_STAGES, offline={
    "retrieval_analyzer": analyze_retrieval,
    "reflector_failure": reflect_failure,
    "reflector_success": reflect_success,
    "refiner_failure": refine_failure,
    "refiner_success": refine_success,
    "reflector_edit_failure": direct_edit_failure,
    "reflector_edit_success": direct_edit_success,
    "pattern_judge": judge_by_rule,
    "awm_induce": induce_workflow,
    "dc_curate": curate,
})

# ScienceWorld: the refinement's stages only (``offline-scienceworld``; AWM, DC-RS and the retrieval analyzer are
# ALFWorld's). The success branch's refiner and w/o AGR's deletions need no action grammar.
register_scienceworld_algorithms(_STAGES, {
    "reflector_failure": sw.reflect_failure,
    "reflector_success": sw.reflect_success,
    "refiner_failure": sw.refine_failure_sw,
    "refiner_success": refine_success,
    "reflector_edit_failure": sw.direct_edit_failure_sw,
    "reflector_edit_success": direct_edit_success,
    "pattern_judge": judge_by_rule,
})
