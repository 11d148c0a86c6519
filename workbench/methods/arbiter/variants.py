"""MemArbiter and its ablations as entries of one registry: each variant is a choice of components, never a
flag threaded through the code.

=============  ===============  ================  ===============  ====================
variant        store            signals           gate             allocation
=============  ===============  ================  ===============  ====================
arbiter        FunctionalBanks  DynamicSignals    TemporalGate     PriorityAllocation
no-banks       SinglePool       PoolSignals       TemporalGate     PriorityAllocation
no-signals     FunctionalBanks  FixedSignals      TemporalGate     FixedShares
no-gate        FunctionalBanks  DynamicSignals    IndependentGate  PriorityAllocation
=============  ===============  ================  ===============  ====================

w/o Functional Banks pools every item in one type-agnostic store with one relevance rule and one section;
w/o Dynamic Signals replaces d and eta with constant bank weights, recency and a fixed per-bank share of the
budget; w/o Temporal Gate selects each step's bands from that step's priorities alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workbench.methods.arbiter.assembly import (
    Allocation,
    FixedShares,
    PriorityAllocation,
)
from workbench.methods.arbiter.banks import FunctionalBanks, SinglePool, Store
from workbench.methods.arbiter.gate import Gate, IndependentGate, TemporalGate
from workbench.methods.arbiter.signals import (
    DynamicSignals,
    FixedSignals,
    PoolSignals,
    Signals,
)
from workbench.registry import Registry

__all__ = ["ArbiterVariant", "register_variant", "get_variant", "list_variants", "ABLATIONS"]


@dataclass(frozen=True)
class ArbiterVariant:
    name: str
    store: Callable[[], Store]
    signals: Callable[[], Signals]
    gate: Callable[[], Gate]
    allocation: Callable[[], Allocation]
    description: str = ""


_VARIANTS: Registry[ArbiterVariant] = Registry("MemArbiter variant")


def register_variant(variant: ArbiterVariant) -> ArbiterVariant:
    return _VARIANTS.register(variant.name, variant)


def get_variant(name: str) -> ArbiterVariant:
    return _VARIANTS.get(name)


def list_variants() -> list[str]:
    return _VARIANTS.names()


register_variant(ArbiterVariant("arbiter", FunctionalBanks, DynamicSignals, TemporalGate, PriorityAllocation,
                                "MemArbiter: five banks, dynamic d and eta, temporal gate"))
register_variant(ArbiterVariant("no-banks", SinglePool, PoolSignals, TemporalGate, PriorityAllocation,
                                "w/o Functional Banks: one type-agnostic pool"))
register_variant(ArbiterVariant("no-signals", FunctionalBanks, FixedSignals, TemporalGate, FixedShares,
                                "w/o Dynamic Signals: a fixed allocation"))
register_variant(ArbiterVariant("no-gate", FunctionalBanks, DynamicSignals, IndependentGate, PriorityAllocation,
                                "w/o Temporal Gate: each step selected independently"))
ABLATIONS = tuple(n for n in _VARIANTS.names() if n != "arbiter")
