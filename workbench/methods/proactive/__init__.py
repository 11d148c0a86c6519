"""The proactive memory agent (paper 002) and its four ablations behind the MemoryPolicy seam.

Modules: ``bank`` (status, knowledge, procedural; the four tools executed call by call; BM25 prefilter),
``triggers`` (first step, every k steps, optional events), ``variants`` (the method and its ablations as one
registry), ``policy`` (the two phases per triggered step and their records).

Policies registered here: ``proactive``, ``proactive-passive``, ``proactive-always``, ``proactive-advisor``,
``proactive-retrieval`` (options ``interval``, ``triggers``, ``backend``).
"""

from workbench.agents.policy import register_policy
from workbench.methods.proactive.bank import (
    MAX_CONTENT_CHARS,
    MAX_STATUS_CHARS,
    PREFILTER_AT,
    Bank,
    BankCallError,
    Entry,
)
from workbench.methods.proactive.policy import WINDOW, ProactivePolicy
from workbench.methods.proactive.sft import export_sft, sft_examples
from workbench.methods.proactive.triggers import EVENTS, Trigger
from workbench.methods.proactive.variants import (
    ProactiveVariant,
    get_variant,
    list_variants,
    register_variant,
)

__all__ = ["ProactivePolicy", "Bank", "BankCallError", "Entry", "Trigger", "EVENTS", "WINDOW", "PREFILTER_AT",
           "MAX_STATUS_CHARS", "MAX_CONTENT_CHARS", "ProactiveVariant", "get_variant", "list_variants",
           "register_variant", "sft_examples", "export_sft"]


def _factory(name: str):
    def build(interval: int | None = None, triggers: tuple[str, ...] = (), backend=None, **_: object) -> ProactivePolicy:
        return ProactivePolicy(name, interval=interval or 1, events=tuple(triggers or ()), backend=backend)

    return build


for _name in list_variants():
    register_policy(_name, _factory(_name), options=("interval", "triggers", "backend"))
