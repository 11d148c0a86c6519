"""MemArbiter (decision-time memory arbitration, paper 001) and its baselines behind the MemoryPolicy seam.

Modules: ``items`` (atomic items), ``banks`` (five banks / one pool, validity, update rules), ``signals``
(d_b,t and eta_i,t), ``gate`` (temporal presentation gate), ``assembly`` (P_t under an o200k budget),
``variants`` (MemArbiter and its ablations as one registry), ``policy`` (the per-step pipeline and its
records), ``flat`` (Flat Recency, Flat Retrieval).

Policies registered here: ``arbiter`` (options ``budget``, ``ablation``, ``backend``), ``flat-recency`` and
``flat-retrieval`` (option ``budget``).
"""

from workbench.agents.policy import register_policy
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
    "ArbiterPolicy", "FlatRecency", "FlatRetrieval", "DEFAULT_BUDGET", "ROW_FIELDS", "ABLATIONS",
    "ArbiterVariant", "get_variant", "list_variants", "register_variant",
    "Item", "BANK_ORDER", "FunctionalBanks", "SinglePool", "InvalidWriteError", "check_write",
    "Context", "DynamicSignals", "FixedSignals", "PoolSignals", "GateConfig", "TemporalGate", "IndependentGate",
    "Candidate", "AssembledBlock", "PriorityAllocation", "FixedShares", "assemble", "OPEN", "CLOSE",
]


def _arbiter(budget: int | None = None, ablation: str | None = None, backend=None, **_: object) -> ArbiterPolicy:
    return ArbiterPolicy(budget=budget or DEFAULT_BUDGET, variant=ablation or "arbiter", backend=backend)


def _recency(budget: int | None = None, **_: object) -> FlatRecency:
    return FlatRecency(budget or DEFAULT_BUDGET)


def _retrieval(budget: int | None = None, **_: object) -> FlatRetrieval:
    return FlatRetrieval(budget or DEFAULT_BUDGET)


register_policy("arbiter", _arbiter, options=("budget", "ablation", "backend"))
register_policy("flat-recency", _recency, options=("budget",))
register_policy("flat-retrieval", _retrieval, options=("budget",))
