"""The temporal presentation gate: z_{i,t} = G_{b(i)}(z_{i,t-1}, d_{b(i),t}, eta_{i,t}, h_{i,t-1}), z in {F, A, H}.

The gate reads the item's priority s = d_{b(i),t} * eta_{i,t}, its previous state and its relevance history h
(the last few priorities). Thresholds (``GateConfig``): focal theta_F = 0.45, ambient theta_A = 0.12,
hysteresis delta = 0.10.

    eligible for F   d_{b(i),t} >= 0.25 (bank demand decides whether a bank's items may be focal at all)
    new item         F if s >= theta_F and eligible; A if s >= theta_A; else H
    H -> A           s >= theta_A + delta              (re-entry needs a margin: no flicker at the border)
    H -> F           s >= theta_F and eligible
    A -> F           s >= theta_F and eligible, and s is not declining (an item demoted by a persistent decline
                     returns only once its priority rises again: no F, A, F, A flicker)
    A -> H           s < theta_A at this step and the previous hide_patience - 1 steps (a transient dip keeps A)
    F -> A           s < theta_F - delta, or not eligible, or s fell at each of the last decline_steps steps
                     (a persistent decline demotes even above the threshold)
    F -> H           only through A (never straight from focal to gone)
    otherwise        the previous state is kept

Role rules (by the store's role of the item): ``protected`` (the goal, task constraints) are exempt from the
history rules and never hidden while active: F if s >= theta_F - delta (when already F) or s >= theta_F, else
A. ``snapshot`` (task state): the live snapshot is F when its bank demand is >= theta_F, else A. ``situational``
(a constraint learnt where an action failed): shown while it applies, with no patience either way. Inactive
items (superseded, completed, invalidated) are H. The no-banks pool gives every item the ``dynamic`` role.

:class:`IndependentGate` (the w/o Temporal Gate ablation) selects each step on its own: F if s >= theta_F and
eligible, A if s >= theta_A, else H, with protected items never below A; no previous state, no history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["GateConfig", "Gate", "TemporalGate", "IndependentGate", "transition"]

F, A, H = "F", "A", "H"


@dataclass(frozen=True)
class GateConfig:
    theta_f: float = 0.45
    theta_a: float = 0.12
    delta: float = 0.10
    eligible: float = 0.25
    hide_patience: int = 2
    decline_steps: int = 3
    history: int = 4  # priorities kept per item


def transition(previous: str | None, current: str) -> str:
    """``new->F``, ``A->F`` (promote), ``F->F`` (retain), ``F->A`` (demote), ``A->H`` (hide), ..."""
    return f"{previous or 'new'}->{current}"


class Gate(Protocol):
    name: str

    def decide(self, previous: str | None, s: float, demand: float, history: tuple[float, ...], role: str,
               active: bool) -> str: ...


class _GateBase:
    """What both gates share: a config, and inactive items hidden before any rule."""

    name = "gate"

    def __init__(self, config: GateConfig | None = None) -> None:
        self.cfg = config or GateConfig()

    def decide(self, previous: str | None, s: float, demand: float, history: tuple[float, ...], role: str,
               active: bool) -> str:
        return self._decide(previous, s, demand, history, role) if active else H

    def _decide(self, previous, s, demand, history, role) -> str:
        raise NotImplementedError


class TemporalGate(_GateBase):
    """The stateful gate of the module docstring."""

    name = "temporal"

    def _decide(self, previous, s, demand, history, role) -> str:
        c = self.cfg
        eligible = demand >= c.eligible
        if role == "protected":
            keep = previous == F and s >= c.theta_f - c.delta
            return F if eligible and (s >= c.theta_f or keep) else A
        if role == "snapshot":
            return F if demand >= c.theta_f else A
        if role == "situational":
            return (F if s >= c.theta_f and eligible else A) if s >= c.theta_a else H
        if previous is None:
            return F if s >= c.theta_f and eligible else A if s >= c.theta_a else H
        if previous == H:
            if s >= c.theta_f and eligible:
                return F
            return A if s >= c.theta_a + c.delta else H
        low = [*history[-(c.hide_patience - 1):], s] if c.hide_patience > 1 else [s]
        persistently_low = len(low) >= c.hide_patience and all(x < c.theta_a for x in low)
        recent = [*history[-c.decline_steps:], s]
        declining = len(recent) > c.decline_steps and all(b < a for a, b in zip(recent, recent[1:]))
        if previous == A:
            if s >= c.theta_f and eligible and not declining:
                return F
            return H if persistently_low else A
        # previous == F
        if s < c.theta_f - c.delta or not eligible or declining:
            return A
        return F


class IndependentGate(_GateBase):
    """w/o Temporal Gate: each step's bands from that step's priorities alone (module docstring)."""

    name = "independent"

    def _decide(self, previous, s, demand, history, role) -> str:
        c = self.cfg
        z = F if s >= c.theta_f and demand >= c.eligible else A if s >= c.theta_a else H
        return A if z == H and role == "protected" else z
