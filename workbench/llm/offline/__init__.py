"""Deterministic offline backends: genuine rule-based algorithms for ALFWorld, named as such. The algorithms live
with their methods (``workbench.methods.<m>.offline``) and register here."""

from workbench.llm.offline.backend import (
    OFFLINE_ALGORITHMS,
    OfflineALFWorldBackend,
    register_algorithm,
)

__all__ = ["OfflineALFWorldBackend", "OFFLINE_ALGORITHMS", "register_algorithm"]
