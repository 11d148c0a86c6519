"""The three published methods, each a package of small files behind the MemoryPolicy seam.

Importing this package registers their memory policies (``workbench.agents.get_policy``): ``arbiter`` (and its
ablations through ``ablation=``), ``flat-recency``, ``flat-retrieval``; ``proactive`` and its ablations ``proactive-passive``, ``proactive-always``,
``proactive-advisor``, ``proactive-retrieval``; ``awm`` (AGMR's workflow-memory baseline). AGMR itself refines a
memory base offline (``workbench.methods.agmr.refine``) that ``traj`` then evaluates.
"""

from workbench.methods import agmr, arbiter, proactive  # noqa: F401  (registers the policies)

__all__ = ["agmr", "arbiter", "proactive"]
