"""d_b,t and eta_i,t as documented; the temporal gate's hysteresis, patience, decline and role rules."""

from __future__ import annotations

import pytest
from arbiter_builders import ctx, item, state

from workbench.methods.arbiter.gate import (
    GateConfig,
    IndependentGate,
    TemporalGate,
    transition,
)
from workbench.methods.arbiter.signals import (
    DynamicSignals,
    FixedSignals,
    PoolSignals,
    goal_keys,
    sim,
)

SIG = DynamicSignals()


def test_sim_is_the_share_of_the_items_keys_in_the_subgoal():
    it = item(entities=("apple 1", "countertop 1"))
    assert sim(it, goal_keys(state("find a apple"))) == 0.5
    assert sim(it, goal_keys(state("take the apple", entities=("countertop 1",)))) == 1.0
    # an item naming no entity is keyed by its content words: {apple, 1, is, countertop}
    assert sim(item(entities=()), goal_keys(state("find a apple"))) == 0.25


def test_failure_raises_episodic_and_constraint_demand():
    events = [item("E1", "episodic", "Step 2: 'open drawer 1' -> Nothing happens.", "open drawer 1: failed", ("drawer 1",))]
    groups = {"episodic": events, "constraint": []}
    calm = SIG.demand(groups, ctx())
    hurt = SIG.demand(groups, ctx(failed=True))
    assert hurt["episodic"] == calm["episodic"] + 0.5
    assert hurt["constraint"] == 1.0 and calm["constraint"] == 0.0
    # the failed event becomes useful for recovery; a plain old one does not change
    assert SIG.relevance(events[0], ctx(failed=True), "dynamic") == pytest.approx(
        SIG.relevance(events[0], ctx(), "dynamic") + 0.3)


def test_only_a_failed_outcome_is_abnormal_and_only_failure_events_gain_recovery_utility():
    # the paper's episodic demand reads "whether the previous action produced an abnormal outcome": a repeated
    # action that worked is no abnormal outcome, and an ordinary event gains nothing from it
    ev = item("E1", "episodic", "Step 1: 'go to shelf 1' -> ok.", "go to shelf 1: saw bowl 1", ("shelf 1",),
              about="go to shelf 1")
    looping = ctx(repeated=True)
    assert SIG.demand({"episodic": [ev]}, looping)["episodic"] == SIG.demand({"episodic": [ev]}, ctx())["episodic"]
    assert SIG.demand({"constraint": []}, looping)["constraint"] == 0.0
    assert SIG.relevance(ev, ctx(failed=True, repeated=True), "dynamic") == pytest.approx(
        SIG.relevance(ev, ctx(), "dynamic"))


def test_reference_answers_an_information_need():
    apple = item()
    needy = ctx(state=state("find a apple", information_needs=("where is a apple?",)))
    assert SIG.relevance(apple, needy, "dynamic") == 1.0
    mug = item("R2", focal="mug 1 is in/on desk 1.", ambient="mug 1 @ desk 1", entities=("mug 1", "desk 1"))
    assert SIG.relevance(mug, needy, "dynamic") == 0.0
    here = ctx(state=state("find a apple", location="desk 1"))
    assert SIG.relevance(mug, here, "dynamic") == 0.4  # a fact about where the agent stands
    assert SIG.demand({"reference": [apple]}, needy)["reference"] == 0.5  # max(0.5 [needs], sim = 0.5)
    # once the apple has been seen the need is gone, but a fact about the subgoal's object is all the demand
    # there is: it must not be capped at 0.5 behind the episodic events of a loop
    seen = ctx(state=state("take the apple", entities=("apple 1", "countertop 1")))
    assert SIG.demand({"reference": [apple]}, seen)["reference"] == 1.0


def test_the_room_inventory_matters_when_the_subgoal_names_one_of_its_receptacles():
    room = item("R9", focal="The room has countertop 1, sinkbasin 1, fridge 1.", ambient="room: ...",
                entities=("countertop 1", "sinkbasin 1", "fridge 1"))
    assert SIG.relevance(room, ctx(state=state("clean the apple with the sinkbasin")), "dynamic") == 0.8
    assert SIG.relevance(room, ctx(state=state("take the apple", entities=("apple 1", "countertop 1"))),
                         "dynamic") == 0.3  # an entity the parser tracks is not the subgoal naming it


def test_situational_constraint_applies_only_where_it_was_learnt():
    c = item("C1", "constraint", "'open drawer 1' does nothing here.", "avoid: open drawer 1", ("drawer 1",),
             scope="at=drawer 1|holding=nothing")
    assert SIG.relevance(c, ctx(state=state(location="drawer 1")), "situational") == 1.0
    assert SIG.relevance(c, ctx(state=state(location="desk 1")), "situational") == 0.05


def test_goal_demand_peaks_when_the_subgoal_changes():
    g = {"goal": [item("G1", "goal", "Task goal: x.", "goal: x", (), source="task")]}
    assert SIG.demand(g, ctx(step=0))["goal"] == 1.0
    assert SIG.demand(g, ctx(previous_subgoal="find a apple"))["goal"] == 0.7
    assert SIG.demand(g, ctx(previous_subgoal="something else"))["goal"] == 1.0


def test_fixed_and_pool_signals_ignore_the_state():
    ev = item("E1", "episodic", last_seen=3)
    for sig in (FixedSignals(), PoolSignals()):
        a = sig.demand({"episodic": [ev]}, ctx(failed=True))
        b = sig.demand({"episodic": [ev]}, ctx())
        assert a == b
    # w/o dynamic signals fixes the bank-level allocation only (the paper's "dynamic bank-level signals"):
    # item relevance is the method's
    assert FixedSignals().relevance(ev, ctx(failed=True), "dynamic") == SIG.relevance(ev, ctx(failed=True), "dynamic")
    assert PoolSignals().relevance(ev, ctx(failed=True), "dynamic") == PoolSignals().relevance(ev, ctx(), "dynamic")


C = GateConfig()


def run(gate, scores, role="dynamic", demand=1.0):
    z, hist, out = None, (), []
    for s in scores:
        z = gate.decide(z, s, demand, hist, role, True)
        hist = (*hist, s)[-C.history:]
        out.append(z)
    return out


def test_hysteresis_a_focal_item_survives_a_dip_a_new_one_does_not_enter():
    s = C.theta_f - C.delta / 2
    assert run(TemporalGate(), [0.9, s]) == ["F", "F"]
    assert run(TemporalGate(), [s]) == ["A"]
    assert run(IndependentGate(), [0.9, s]) == ["F", "A"]  # no memory: flickers


def test_one_low_step_keeps_ambient_two_hide():
    low = C.theta_a / 2
    assert run(TemporalGate(), [0.3, low, 0.3]) == ["A", "A", "A"]
    assert run(TemporalGate(), [0.3, low, low]) == ["A", "A", "H"]
    assert run(IndependentGate(), [0.3, low]) == ["A", "H"]


def test_reentry_from_hidden_needs_a_margin():
    low = C.theta_a / 2
    border = C.theta_a + C.delta / 2
    assert run(TemporalGate(), [0.3, low, low, border]) == ["A", "A", "H", "H"]
    assert run(TemporalGate(), [0.3, low, low, C.theta_a + C.delta]) == ["A", "A", "H", "A"]


def test_persistent_decline_demotes_a_focal_item_above_threshold():
    falling = [0.95, 0.9, 0.85, 0.8]
    assert run(TemporalGate(), falling) == ["F", "F", "F", "A"]
    assert run(TemporalGate(), [0.95, 0.9, 0.92, 0.8]) == ["F"] * 4  # not persistent


def test_a_declining_item_stays_demoted_until_its_priority_rises():
    # an episodic event's recency decays every step: demoted by the decline, it must not bounce back to focal
    falling = [0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65]
    assert run(TemporalGate(), falling) == ["F", "F", "F", "A", "A", "A", "A"]
    assert run(TemporalGate(), [*falling[:4], 0.9]) == ["F", "F", "F", "A", "F"]  # relevant again: back to focal


def test_focal_goes_through_ambient_before_hidden():
    assert run(TemporalGate(), [0.9, 0.0, 0.0]) == ["F", "A", "H"]  # one step ambient, then out


def test_role_rules():
    assert run(TemporalGate(), [0.0, 0.0, 0.0], role="protected") == ["A", "A", "A"]  # never hidden while active
    assert run(TemporalGate(), [0.95, 0.9, 0.85, 0.8], role="protected") == ["F"] * 4  # exempt from decline
    assert TemporalGate().decide("F", 1.0, 1.0, (), "protected", active=False) == "H"
    assert run(TemporalGate(), [1.0], role="snapshot", demand=0.3) == ["A"]
    assert run(TemporalGate(), [0.05, 0.9, 0.05], role="situational") == ["H", "F", "H"]  # no patience either way
    assert run(IndependentGate(), [0.0], role="protected") == ["A"]


def test_low_bank_demand_makes_items_ineligible_for_focal():
    assert run(TemporalGate(), [0.9], demand=C.eligible - 0.01) == ["A"]


def test_transition_names():
    assert transition(None, "F") == "new->F" and transition("A", "H") == "A->H"
