"""The counterfactual re-score of reminders: the same state with and without the reminder line."""

from __future__ import annotations

import pytest

from workbench.agents.counterfactual import is_warning, mentioned_commands, reminder_effect

ADM = ["go to shelf 1", "go to shelf 10", "open drawer 1", "take pen 1 from desk 1"]


def test_mentions_are_whole_commands():
    assert mentioned_commands("you already did 'go to shelf 1' twice", ADM) == ["go to shelf 1"]  # not shelf 10
    assert mentioned_commands("The pen is on the desk.", ADM) == []


def test_effect_record():
    warn = "Stop repeating: you already did 'go to shelf 1'."
    assert is_warning(warn) and not is_warning("Try 'open drawer 1'.")
    e = reminder_effect(warn, ADM, [0.1, 0.2, 0.6, 0.1], [0.7, 0.1, 0.1, 0.1])
    assert e["changed"] and e["action_without"] == "go to shelf 1" and e["followed"] is True
    assert (e["p_action"], e["p_action_without"]) == (0.6, 0.1)
    tip = reminder_effect("Try 'open drawer 1'.", ADM, [0.7, 0.1, 0.1, 0.1], [0.7, 0.1, 0.1, 0.1])
    assert not tip["changed"] and tip["followed"] is False
    assert reminder_effect("Be careful.", ADM, [1, 0, 0, 0], [1, 0, 0, 0])["followed"] is None
    # an instruction that says "instead" is no warning: choosing what it names is following it
    assert reminder_effect("Go to shelf 1 instead.", ADM, [0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1])["followed"]
    assert is_warning("Do not open drawer 1 again.") and not is_warning("Go to shelf 1 instead.")
    # selection-free: the distance between the distributions, and the other choice's side
    assert e["tv"] == pytest.approx(0.6) and (e["p_alt_with"], e["p_alt_without"]) == (0.1, 0.7)
    assert tip["tv"] == 0.0


def test_intervention_metrics_aggregate_the_effects():
    from workbench.eval.interventions import _effects

    agg = _effects([{"p_action": 0.6, "p_action_without": 0.1, "changed": True, "followed": True},
                    {"p_action": 0.5, "p_action_without": 0.5, "changed": False, "followed": None}])
    assert agg == {"n": 2, "mean_delta_p": pytest.approx(0.25), "median_p_action_without": pytest.approx(0.3),
                   "changed": 0.5, "followed": 1.0, "n_judged": 1}
