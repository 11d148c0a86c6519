"""AGMR: attention-guided memory refinement with re-execution verification (paper 000, section 3, Algorithm 1).

``refine`` runs Algorithm 1 over a split into an auditable copy of a memory base (every commit a new version with
its provenance; ``workbench refine`` / ``workbench memory log|diff|rollback``); ``workbench run --memory traj
--memory-base DIR`` evaluates the refined base. ``awm`` (workflow memory) and ``dc-rs`` (Dynamic Cheatsheet,
retrieval and synthesis) are Table 1's memory baselines, registered as memory policies of those names.
"""

from workbench.agents.policy import MemoryBaseOptions, register_policy
from workbench.envs.memory_base import default_memory_base
from workbench.llm.options import BackendOptions, backend_of
from workbench.memory.base import MemoryBase
from workbench.methods.agmr import stages  # noqa: F401  (registers its LLM stages and offline algorithms)
from workbench.methods.agmr.awm import WorkflowMemory, instantiate
from workbench.methods.agmr.dc import DynamicCheatsheet
from workbench.methods.agmr.records import OUTCOMES, Attempt, Execution, TaskRecord
from workbench.methods.agmr.refine import Refiner, execute, refine
from workbench.methods.agmr.refine_config import VARIANTS, RefineConfig, RefinementError
from workbench.methods.agmr.refine_folder import (
    REFINE_DIR,
    load_executions,
    load_log,
    refine_stats,
)
from workbench.methods.agmr.verify import model_verifier, recorded_verifier

__all__ = ["WorkflowMemory", "instantiate", "DynamicCheatsheet", "execute", "RefineConfig", "RefinementError", "Refiner", "Execution", "Attempt", "TaskRecord", "refine", "refine_stats", "load_log", "load_executions", "REFINE_DIR", "VARIANTS", "OUTCOMES", "model_verifier", "recorded_verifier"]


class BaselineOptions(BackendOptions, MemoryBaseOptions):
    """Table 1's memory baselines (AWM, Dynamic Cheatsheet): the backend of their LLM stages and the memory base
    they start from."""


def _base(memory_base: str | None) -> MemoryBase:
    return MemoryBase(memory_base) if memory_base else default_memory_base()


def _awm(backend: str, backend_args: tuple[str, ...], memory_base: str | None) -> WorkflowMemory:
    return WorkflowMemory(_base(memory_base), backend_of(backend, backend_args))


def _dc(backend: str, backend_args: tuple[str, ...], memory_base: str | None) -> DynamicCheatsheet:
    return DynamicCheatsheet(_base(memory_base), backend_of(backend, backend_args))


register_policy("awm", _awm, options=BaselineOptions, doc="Agent Workflow Memory (Table 1 baseline)")
register_policy("dc-rs", _dc, options=BaselineOptions, doc="Dynamic Cheatsheet, retrieval and synthesis (Table 1)")
