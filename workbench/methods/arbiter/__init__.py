"""MemArbiter (decision-time memory arbitration, paper 001) and its baselines behind the MemoryPolicy seam.

Modules: ``items`` (atomic items), ``banks`` (five banks / one pool, validity, update rules), ``signals``
(d_b,t and eta_i,t), ``gate`` (temporal presentation gate), ``assembly`` (P_t under an o200k budget),
``variants`` (MemArbiter and its ablations as one registry), ``policy`` (the per-step pipeline and its
records), ``flat`` (Flat Recency, Flat Retrieval).

Policies registered here: ``arbiter`` (options ``budget``, ``ablation``, ``backend``), ``flat-recency`` and
``flat-retrieval`` (option ``budget``).
"""

from pydantic import Field, field_validator

from workbench.agents.policy import PolicyOptions, register_policy
from workbench.llm.options import BackendOptions, backend_of
from workbench.methods.arbiter import stages  # noqa: F401  (registers its LLM stages and offline algorithms)
from workbench.methods.arbiter.assembly import (
    CLOSE,
    OPEN,
    AssembledBlock,
    Candidate,
    FixedShares,
    PriorityAllocation,
    assemble,
)
from workbench.methods.arbiter.banks import (
    FunctionalBanks,
    InvalidWriteError,
    SinglePool,
    check_write,
)
from workbench.methods.arbiter.flat import FlatRecency, FlatRetrieval
from workbench.methods.arbiter.gate import GateConfig, IndependentGate, TemporalGate
from workbench.methods.arbiter.items import BANK_ORDER, Item
from workbench.methods.arbiter.policy import DEFAULT_BUDGET, ROW_FIELDS, ArbiterPolicy
from workbench.methods.arbiter.signals import (
    Context,
    DynamicSignals,
    FixedSignals,
    PoolSignals,
)
from workbench.methods.arbiter.variants import (
    ABLATIONS,
    ArbiterVariant,
    get_variant,
    list_variants,
    register_variant,
)

__all__ = [
    "ArbiterOptions", "BudgetOptions", "ArbiterPolicy", "FlatRecency", "FlatRetrieval", "DEFAULT_BUDGET", "ROW_FIELDS", "ABLATIONS",
    "ArbiterVariant", "get_variant", "list_variants", "register_variant",
    "Item", "BANK_ORDER", "FunctionalBanks", "SinglePool", "InvalidWriteError", "check_write",
    "Context", "DynamicSignals", "FixedSignals", "PoolSignals", "GateConfig", "TemporalGate", "IndependentGate",
    "Candidate", "AssembledBlock", "PriorityAllocation", "FixedShares", "assemble", "OPEN", "CLOSE",
]


class BudgetOptions(PolicyOptions):
    """``budget``: the memory block's budget in o200k tokens (the paper's main setting: 500)."""

    budget: int = Field(DEFAULT_BUDGET, gt=0)


class ArbiterOptions(BudgetOptions, BackendOptions):
    """MemArbiter's options: the budget, an ablation (an entry of the variant registry) and the backend of its
    state-parser and candidate-writer stages."""

    ablation: str | None = None

    @field_validator("ablation")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is not None and v not in ABLATIONS:
            raise ValueError(f"ablation '{v}': expected one of {', '.join(ABLATIONS)}")
        return v


def _arbiter(budget: int, ablation: str | None, backend: str, backend_args: tuple[str, ...]) -> ArbiterPolicy:
    return ArbiterPolicy(budget=budget, variant=ablation or "arbiter", backend=backend_of(backend, backend_args))


register_policy("arbiter", _arbiter, options=ArbiterOptions, doc="MemArbiter (paper 001) and its ablations")
register_policy("flat-recency", FlatRecency, options=BudgetOptions, doc="baseline: the most recent lines in budget")
register_policy("flat-retrieval", FlatRetrieval, options=BudgetOptions,
                doc="baseline: BM25 over the observation lines, in budget")
