"""The proactive memory agent (paper 002) and its four ablations behind the MemoryPolicy seam.

Modules: ``bank`` (status, knowledge, procedural; the four tools executed call by call; BM25 prefilter),
``triggers`` (first step, every k steps, optional events), ``variants`` (the method and its ablations as one
registry), ``policy`` (the two phases per triggered step and their records).

Policies registered here: ``proactive``, ``proactive-passive``, ``proactive-always``, ``proactive-advisor``,
``proactive-retrieval`` (options ``interval``, ``triggers``, ``window``, ``backend``).
"""

from typing import Any, ClassVar

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
from workbench.methods.proactive.policy import LEGACY_WINDOW, WINDOW, ProactivePolicy
from workbench.methods.proactive.sft import export_sft, sft_examples
from workbench.methods.proactive.triggers import EVENTS, Trigger
from workbench.methods.proactive.variants import (
    ProactiveVariant,
    get_variant,
    list_variants,
    register_variant,
)

__all__ = ["ProactiveOptions", "ProactivePolicy", "Bank", "BankCallError", "Entry", "Trigger", "EVENTS", "WINDOW", "LEGACY_WINDOW", "PREFILTER_AT",
           "MAX_STATUS_CHARS", "MAX_CONTENT_CHARS", "ProactiveVariant", "get_variant", "list_variants",
           "register_variant", "sft_examples", "export_sft"]


class ProactiveOptions(BackendOptions):
    """The proactive memory agent's options: it runs at step 0 and every ``interval`` steps, and on the extra event
    ``triggers``, reading the last ``window`` steps; ``backend`` runs its two phases.

    Where each comes from: ``interval`` 1 (every step) and ``window`` 8 are the authors' public configuration
    (``trigger_interval=1``, ``sliding_window_size=8``); the paper says "a fixed interval" and "a recent trajectory
    window" without numbers. Run folders that predate ``window`` were played with 10 (ours, before issue 47) and
    read as that (``PREDATES``).
    """

    PREDATES: ClassVar[dict[str, Any]] = {"window": LEGACY_WINDOW}

    interval: int = Field(1, ge=1, strict=True)
    triggers: tuple[str, ...] = ()
    window: int = Field(WINDOW, ge=1, le=1000, strict=True)

    @field_validator("triggers")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in v if t not in EVENTS]
        if bad:
            raise ValueError(f"trigger '{bad[0]}': expected one of {', '.join(EVENTS)}")
        return tuple(v)


def _factory(name: str):
    def build(interval: int, triggers: tuple[str, ...], window: int, backend: str,
              backend_args: tuple[str, ...]) -> ProactivePolicy:
        return ProactivePolicy(name, interval=interval, events=tuple(triggers), window=window,
                               backend=backend_of(backend, backend_args))

    return build


for _name in list_variants():
    register_policy(_name, _factory(_name), options=ProactiveOptions, doc=f"proactive memory agent: {_name}")
