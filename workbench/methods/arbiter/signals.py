"""Decision-relevance signals: bank demand d_b,t and item relevance eta_i,t, as functions of the parsed state.

The decision context c_t of step t: the parsed state s_t (subgoal g_t, entities E_t, information needs N_t,
location, holding), the previous subgoal g_{t-1}, and the previous action's outcome. Word sets:
K(g_t) = content words of g_t (``bm25_tokens``) plus the entity types of E_t; K(i) = the entity types of item i
(its content words when it names no entity); K(N_t) = content words of the needs minus "where", "is".

    sim(i, g_t)  = |K(i) & K(g_t)| / |K(i)|                              (0 when K(i) is empty)
    rec(i, t)    = exp(-(t - last_seen_i) / tau_b)                       tau: task state 2, episodic 6
    abnormal_t   = 1 if a_{t-1} failed ("Nothing happens."), else 0: the paper's "abnormal outcome" (a repeated
                   action that worked is no abnormal outcome; loops are the Episodic bank's duplicates, merged
                   into one event that counts its repeats, see ``banks.py``)
    u(i)         = 1 if episodic event i records a failure (what recovery from a failure needs to see), else 0

Bank demand (paper section 3.3), each in [0, 1]:

    d_goal       = 1.0 at t = 0 or when g_t != g_{t-1} (a subgoal was just completed), else 0.7
    d_task_state = rec(latest snapshot, t)                               recency of the state snapshot
    d_constraint = max(0.3 [any active], abnormal_t, max_{c applicable} max(sim(c, g_t), 0.5))
    d_episodic   = 0.5 abnormal_t + 0.5 max_{e} sim(e, g_t)               abnormal outcome + relevance of events
    d_reference  = max(0.5 [N_t non-empty], max_{r} sim(r, g_t))          open needs, or a stored fact about the
                                                                          subgoal (either one makes the bank needed)

Item relevance:

    goal         eta = 1 for the task goal, else max(0.5, sim(i, g_t))
    constraint   task scope: max(0.5, sim(i, g_t)); situational: 1 where it was learnt (same location and
                 holding), else 0.05 (it does not apply here)
    task_state   eta = rec(i, t)
    episodic     eta = 0.4 sim(i, g_t) + 0.3 rec(i, t) + 0.3 abnormal_t u(i)
    reference    eta = 1 if K(i) meets K(N_t); the room inventory 0.8 while N_t is non-empty or the subgoal names
                 one of its receptacles ("clean the apple with the sinkbasin"), else 0.3;
                 otherwise 0.6 sim(i, g_t) + 0.4 [i is about the current location]

The no-signals ablation (:class:`FixedSignals`) replaces the dynamic bank-level signals with a fixed
allocation (the paper's wording): constant bank weights; item relevance stays the method's. The no-banks pool
(:class:`PoolSignals`) has one demand (1) and one relevance rule for every item: 0.5 sim + 0.5 rec (tau 6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from workbench.envs.alfworld_text import entity_type, is_failure, normalize
from workbench.memory.retrieval import bm25_tokens
from workbench.methods.arbiter.items import TASK_SCOPE, Item
from workbench.methods.arbiter.stage_types import ParsedState

__all__ = ["Context", "Signals", "SignalConfig", "SIGNALS", "DynamicSignals", "FixedSignals", "PoolSignals", "item_keys",
           "goal_keys", "sim", "FIXED_DEMAND", "TAU"]

TAU = {"task_state": 2.0, "episodic": 6.0, "default": 6.0}


@dataclass(frozen=True)
class SignalConfig:
    """The constants of d_b,t and eta_i,t (module docstring), one named field each. All ours: the paper describes the
    signals qualitatively (section 3.3), not their formulas (the user guide's constants table says so per method)."""

    goal_demand_new: float = 1.0  # d_goal at t = 0 or right after a subgoal changed
    goal_demand_steady: float = 0.7  # d_goal otherwise
    constraint_demand_floor: float = 0.3  # d_constraint while any constraint is active
    constraint_applicable: float = 0.5  # a constraint counts as applicable above this eta (and its floor in d)
    task_constraint_floor: float = 0.5  # eta of a task-scope constraint: at least this
    situational_here: float = 1.0  # eta of a situational constraint where it was learnt
    situational_elsewhere: float = 0.05  # ... and anywhere else
    episodic_abnormal: float = 0.5  # d_episodic: weight of an abnormal outcome
    episodic_relevance: float = 0.5  # d_episodic: weight of the best event's similarity
    reference_needs: float = 0.5  # d_reference while information needs are open
    goal_item_floor: float = 0.5  # eta of a goal item other than the task goal: at least this
    episodic_sim: float = 0.4  # eta_episodic = episodic_sim sim + episodic_rec rec + episodic_recovery abnormal u
    episodic_rec: float = 0.3
    episodic_recovery: float = 0.3
    inventory_needed: float = 0.8  # eta of the room inventory while needs are open or the subgoal names a receptacle
    inventory_idle: float = 0.3  # ... otherwise
    reference_sim: float = 0.6  # eta_reference = reference_sim sim + reference_here [about the current location]
    reference_here: float = 0.4
    pool_sim: float = 0.5  # the no-banks pool: eta = pool_sim sim + pool_rec rec
    pool_rec: float = 0.5


SIGNALS = SignalConfig()
FIXED_DEMAND = {"goal": 1.0, "task_state": 0.9, "constraint": 0.8, "episodic": 0.6, "reference": 0.6, "pool": 1.0}
_NEED_STOP = frozenset({"where", "is", "what", "which"})


@dataclass(frozen=True)
class Context:
    """c_t: what the signals read at step t.

    Attributes:
        step: t.
        state: the parsed state s_t.
        previous_subgoal: g_{t-1} (None at t = 0).
        previous_action: a_{t-1} (None at t = 0).
        failed: a_{t-1} was answered "Nothing happens.".
        repeated: a_{t-1} was already taken before, earlier in the episode.
    """

    step: int
    state: ParsedState
    previous_subgoal: str | None = None
    previous_action: str | None = None
    failed: bool = False
    repeated: bool = False

    @property
    def abnormal(self) -> bool:
        """abnormal_t: the previous action's outcome was a failure (module docstring)."""
        return self.failed


def item_keys(item: Item) -> frozenset[str]:
    """K(i): entity types, or content words for an item that names no entity."""
    if item.entities:
        return frozenset(entity_type(e) for e in item.entities if entity_type(e))
    return frozenset(bm25_tokens(item.focal))


def goal_keys(state: ParsedState) -> frozenset[str]:
    """K(g_t): the subgoal's content words and the entity types in the parsed state."""
    return frozenset(bm25_tokens(state.subgoal)) | {entity_type(e) for e in state.entities if entity_type(e)}


def need_keys(state: ParsedState) -> frozenset[str]:
    return frozenset(w for n in state.information_needs for w in bm25_tokens(n) if w not in _NEED_STOP)


def sim(item: Item, keys: frozenset[str]) -> float:
    k = item_keys(item)
    return len(k & keys) / len(k) if k else 0.0


def rec(item: Item, t: int, tau: float) -> float:
    return math.exp(-max(t - item.last_seen, 0) / tau)


class Signals(Protocol):
    name: str

    def demand(self, groups: dict[str, list[Item]], ctx: Context) -> dict[str, float]: ...

    def relevance(self, item: Item, ctx: Context, role: str) -> float: ...


def _recovery_utility(item: Item, ctx: Context) -> bool:
    """u(i): the event records a failure."""
    return ": failed" in item.ambient.lower() or is_failure(item.focal.split("-> ")[-1])


class DynamicSignals:
    """d_b,t and eta_i,t of the module docstring (constants: ``cfg``, :class:`SignalConfig`)."""

    name = "dynamic"

    def __init__(self, cfg: SignalConfig = SIGNALS) -> None:
        self.cfg = cfg

    def demand(self, groups: dict[str, list[Item]], ctx: Context) -> dict[str, float]:
        c, s, t = self.cfg, ctx.state, ctx.step
        g = goal_keys(s)
        out: dict[str, float] = {}
        for bank, items in groups.items():
            if bank == "goal":
                new = t == 0 or (ctx.previous_subgoal is not None and ctx.previous_subgoal != s.subgoal)
                out[bank] = c.goal_demand_new if new else c.goal_demand_steady
            elif bank == "task_state":
                out[bank] = max((rec(i, t, TAU["task_state"]) for i in items), default=0.0)
            elif bank == "constraint":
                applicable = [i for i in items if self._constraint(i, ctx) > c.constraint_applicable]
                out[bank] = max(c.constraint_demand_floor if items else 0.0, float(ctx.abnormal),
                                max((max(sim(i, g), c.constraint_applicable) for i in applicable), default=0.0))
            elif bank == "episodic":
                out[bank] = c.episodic_abnormal * ctx.abnormal + c.episodic_relevance * max(
                    (sim(i, g) for i in items), default=0.0)
            elif bank == "reference":
                out[bank] = max(c.reference_needs * bool(s.information_needs),
                                max((sim(i, g) for i in items), default=0.0))
            else:
                out[bank] = 1.0
        return out

    def _constraint(self, item: Item, ctx: Context) -> float:
        c = self.cfg
        if item.scope == TASK_SCOPE:
            return max(c.task_constraint_floor, sim(item, goal_keys(ctx.state)))
        here = f"at={ctx.state.location or 'start'}|holding={ctx.state.holding or 'nothing'}"
        return c.situational_here if item.scope == here else c.situational_elsewhere

    def relevance(self, item: Item, ctx: Context, role: str) -> float:
        c, s, t = self.cfg, ctx.state, ctx.step
        if item.bank == "goal":
            return 1.0 if item.source == "task" else max(c.goal_item_floor, sim(item, goal_keys(s)))
        if item.bank == "constraint":
            return self._constraint(item, ctx)
        if item.bank == "task_state":
            return rec(item, t, TAU["task_state"])
        if item.bank == "episodic":
            return (c.episodic_sim * sim(item, goal_keys(s)) + c.episodic_rec * rec(item, t, TAU["episodic"])
                    + c.episodic_recovery * (ctx.abnormal and _recovery_utility(item, ctx)))
        if item.bank == "reference":
            if item_keys(item) & need_keys(s):
                return 1.0
            if len(item.entities) > 2:  # the room inventory: where to look, or where the subgoal's receptacle is
                names_target = bool(item_keys(item) & frozenset(bm25_tokens(s.subgoal)))
                return c.inventory_needed if s.information_needs or names_target else c.inventory_idle
            here = normalize(s.location or "")
            about_here = bool(here) and any(normalize(e) == here for e in item.entities)
            return c.reference_sim * sim(item, goal_keys(s)) + c.reference_here * about_here
        return c.pool_sim * sim(item, goal_keys(s)) + c.pool_rec * rec(item, t, TAU["default"])


class FixedSignals(DynamicSignals):
    """w/o Dynamic Signals: the bank-level signals replaced by a fixed allocation, constant bank weights
    (``FIXED_DEMAND``) whatever the state; item relevance is :class:`DynamicSignals`' (the paper ablates the
    "dynamic bank-level signals")."""

    name = "fixed"

    def demand(self, groups: dict[str, list[Item]], ctx: Context) -> dict[str, float]:
        return {bank: FIXED_DEMAND.get(bank, 1.0) for bank in groups}


class PoolSignals:
    """One pool: demand 1, eta = 0.5 sim(i, g_t) + 0.5 rec(i, t) for every item, whatever its label."""

    name = "pool"

    def demand(self, groups: dict[str, list[Item]], ctx: Context) -> dict[str, float]:
        return {bank: 1.0 for bank in groups}

    def relevance(self, item: Item, ctx: Context, role: str) -> float:
        c = SIGNALS
        return c.pool_sim * sim(item, goal_keys(ctx.state)) + c.pool_rec * rec(item, ctx.step, TAU["default"])
