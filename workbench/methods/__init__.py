"""The three published methods, each a package of small files behind the MemoryPolicy seam.

Importing this package registers their memory policies (``workbench.agents.get_policy``): ``arbiter`` (and its
ablations through ``ablation=``), ``flat-recency``, ``flat-retrieval``; ``proactive`` and its ablations ``proactive-passive``, ``proactive-always``,
``proactive-advisor``, ``proactive-retrieval``.
"""

from workbench.methods import arbiter, proactive  # noqa: F401  (registers the policies)

__all__ = ["arbiter", "proactive"]
