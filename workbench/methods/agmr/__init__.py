"""AGMR: attention-guided memory refinement with re-execution verification (paper 000, section 3, Algorithm 1).

``refine`` runs Algorithm 1 over a split into an auditable copy of a memory base (every commit a new version with
its provenance; ``workbench refine`` / ``workbench memory log|diff|rollback``); ``workbench run --memory traj
--memory-base DIR`` evaluates the refined base. ``awm`` (workflow memory) and ``dc-rs`` (Dynamic Cheatsheet,
retrieval and synthesis) are Table 1's memory baselines, registered as memory policies of those names.
"""

from workbench.agents.policy import register_policy
from workbench.methods.agmr.awm import WorkflowMemory, instantiate
from workbench.methods.agmr.dc import DynamicCheatsheet
from workbench.methods.agmr.evaluate import (
    SCENARIOS,
    model_verifier,
    recorded_verifier,
    refined_share,
    refinement_cases,
    scenario_groups,
    success_by_scenario,
)
from workbench.methods.agmr.refine import (
    OUTCOMES,
    REFINE_DIR,
    VARIANTS,
    Attempt,
    Execution,
    RefineConfig,
    RefinementError,
    Refiner,
    TaskRecord,
    execute,
    load_executions,
    load_log,
    refine,
    refine_stats,
)

__all__ = ["WorkflowMemory", "instantiate", "DynamicCheatsheet", "execute", "RefineConfig", "RefinementError", "Refiner", "Execution", "Attempt", "TaskRecord", "refine", "refine_stats", "load_log", "load_executions", "REFINE_DIR", "VARIANTS", "OUTCOMES", "SCENARIOS", "model_verifier", "recorded_verifier", "refined_share", "refinement_cases", "scenario_groups", "success_by_scenario"]


def _awm(backend, memory_base=None):
    from workbench.envs.memory_base import default_memory_base
    from workbench.memory.base import MemoryBase

    return WorkflowMemory(MemoryBase(memory_base) if memory_base else default_memory_base(), backend)


register_policy("awm", _awm, options=("backend", "memory_base"))


def _dc(backend, memory_base=None):
    from workbench.envs.memory_base import default_memory_base
    from workbench.memory.base import MemoryBase

    return DynamicCheatsheet(MemoryBase(memory_base) if memory_base else default_memory_base(), backend)


register_policy("dc-rs", _dc, options=("backend", "memory_base"))
