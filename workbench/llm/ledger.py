"""What became of each LLM stage call: the record every run keeps beside the method's own.

:func:`workbench.llm.run_stage` appends one :class:`StageCall` to the ``ledger`` list it is given: the stage, the
backend and model, how replies were shaped (``mode``: a schema sent as ``response_format``, a grammar in-process, the
prompt only, or an offline algorithm), the fate of the reply, how many requests it took and their wall time. The
method then marks a reply that parsed but could not be applied (a segment that does not exist, a bank write that
breaks a rule) with :func:`reject_last`, so the ledger counts what was *used*:

``valid``     the first reply parsed and was applied
``repaired``  the first did not parse, the one repair retry did, and it was applied
``rejected``  no usable reply: both replies failed to parse, or a parsed one was refused by the method
              (``reason`` says which); nothing was applied
``failed``    the backend could not be reached (a transport error or timeout): the run stops, resumable

``reason`` says why a reply was rejected, or why a repaired call's first reply could not be used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

__all__ = ["FATES", "StageCall", "ledger_records", "reject_last"]

FATES = ("valid", "repaired", "rejected", "failed")


@dataclass(frozen=True)
class StageCall:
    """One stage call and its fate (see the module docstring)."""

    stage: str
    backend: str
    model: str
    mode: str
    fate: Literal["valid", "repaired", "rejected", "failed"]
    requests: int
    ms: float
    reason: str | None = None
    completion_tokens: int | None = None

    def record(self) -> dict[str, Any]:
        """The JSON record (``None`` fields left out)."""
        d = asdict(self)
        d["ms"] = round(self.ms, 1)
        return {k: v for k, v in d.items() if v is not None}


def reject_last(ledger: list[StageCall] | None, stage: str, reason: str) -> None:
    """Mark the ledger's last call of ``stage`` as rejected by the method (it parsed, but was not applied)."""
    if not ledger:
        return
    for k in range(len(ledger) - 1, -1, -1):
        if ledger[k].stage == stage:
            if ledger[k].fate in ("valid", "repaired"):
                ledger[k] = replace(ledger[k], fate="rejected", reason=reason[:300])
            return


def ledger_records(ledger: list[StageCall] | None) -> list[dict[str, Any]]:
    """The records of a ledger's calls; none for calls the offline algorithms answered (always valid, no model, no
    time worth a record), so an offline run's files stay byte for byte what they were and equal across executors."""
    return [c.record() for c in ledger or () if c.mode != "algorithm"]
