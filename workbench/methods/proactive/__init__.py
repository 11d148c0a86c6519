"""The proactive memory agent (paper 002) and its four ablations behind the MemoryPolicy seam.

Modules: ``bank`` (status, knowledge, procedural; the four tools executed call by call; BM25 prefilter),
``triggers`` (first step, every k steps, optional events), ``variants`` (the method and its ablations as one
registry), ``policy`` (the two phases per triggered step and their records).

Policies registered here: ``proactive``, ``proactive-passive``, ``proactive-always``, ``proactive-advisor``,
``proactive-retrieval`` (options ``interval``, ``triggers``, ``backend``).
"""

from pydantic import Field, field_validator

from workbench.agents.policy import register_policy
from workbench.llm.options import BackendOptions, backend_of
from workbench.methods.proactive import stages  # noqa: F401  (registers its LLM stages and offline algorithms)
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

__all__ = ["ProactiveOptions", "ProactivePolicy", "Bank", "BankCallError", "Entry", "Trigger", "EVENTS", "WINDOW", "PREFILTER_AT",
           "MAX_STATUS_CHARS", "MAX_CONTENT_CHARS", "ProactiveVariant", "get_variant", "list_variants",
           "register_variant", "sft_examples", "export_sft"]


class ProactiveOptions(BackendOptions):
    """The proactive memory agent's options: it runs at step 0 and every ``interval`` steps, and on the extra event
    ``triggers``; ``backend`` runs its two phases."""

    interval: int = Field(1, ge=1)
    triggers: tuple[str, ...] = ()

    @field_validator("triggers")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in v if t not in EVENTS]
        if bad:
            raise ValueError(f"trigger '{bad[0]}': expected one of {', '.join(EVENTS)}")
        return tuple(v)


def _factory(name: str):
    def build(interval: int, triggers: tuple[str, ...], backend: str, backend_args: tuple[str, ...]) -> ProactivePolicy:
        return ProactivePolicy(name, interval=interval, events=tuple(triggers), backend=backend_of(backend, backend_args))

    return build


for _name in list_variants():
    register_policy(_name, _factory(_name), options=ProactiveOptions, doc=f"proactive memory agent: {_name}")
