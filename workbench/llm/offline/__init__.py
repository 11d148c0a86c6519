"""Deterministic offline backends: genuine rule-based algorithms for ALFWorld (and AGMR's refinement on ScienceWorld), named as such. The algorithms live
with their methods (``workbench.methods.<m>.offline``) and register here."""

from workbench.llm.offline.backend import (
    OFFLINE_ALGORITHMS,
    OFFLINE_SCIENCEWORLD_ALGORITHMS,
    OfflineALFWorldBackend,
    OfflineScienceWorldBackend,
    register_algorithm,
)

__all__ = ["OfflineALFWorldBackend", "OfflineScienceWorldBackend", "OFFLINE_ALGORITHMS",
           "OFFLINE_SCIENCEWORLD_ALGORITHMS", "register_algorithm"]
