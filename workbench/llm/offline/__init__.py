"""Deterministic offline backends: genuine rule-based algorithms for ALFWorld, named as such."""

from workbench.llm.offline.backend import OFFLINE_ALGORITHMS, OfflineALFWorldBackend

__all__ = ["OfflineALFWorldBackend", "OFFLINE_ALGORITHMS"]
