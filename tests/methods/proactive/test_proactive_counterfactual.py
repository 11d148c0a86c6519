"""The counterfactual re-score of reminders: the same state with and without the reminder line."""

from __future__ import annotations

import pytest

from workbench.agents.counterfactual import (
    choice_shift,
    is_warning,
    mentioned_commands,
    reminder_effect,
)

ADM = ["go to shelf 1", "go to shelf 10", "open drawer 1", "take pen 1 from desk 1"]


def test_mentions_are_whole_commands():
    assert mentioned_commands("you already did 'go to shelf 1' twice", ADM) == ["go to shelf 1"]  # not shelf 10
    assert mentioned_commands("The pen is on the desk.", ADM) == []


def test_choice_shift_breaks_ties_as_the_scorer_does():
    # the first of tied maxima, as ActionScorer picks; TV is half the L1 distance
    best, alt, tv = choice_shift([0.4, 0.4, 0.2], [0.1, 0.45, 0.45])
    assert (best, alt) == (0, 1) and tv == pytest.approx(0.3)
    assert choice_shift([0.5, 0.5], [0.5, 0.5]) == (0, 0, 0.0)


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


def test_one_word_commands_count_only_when_quoted():
    from workbench.agents.counterfactual import follows, named_commands

    adm = ["look", "inventory", "go to desk 1"]
    text = "Your task: turn on a desklamp to look at it."
    assert mentioned_commands(text, adm) == ["look"]  # the raw evidence keeps every verbatim match
    assert named_commands(text, ["look"]) == [] and follows(text, "look", ["look"]) is None
    assert reminder_effect(text, adm, [1, 0, 0], [1, 0, 0])["followed"] is None  # the record judges by the same rule
    quoted = "Do not 'look' again; you already did."
    assert named_commands(quoted, ["look"]) == ["look"] and follows(quoted, "go to desk 1", ["look"]) is True
    assert follows("Go to desk 1 now.", "go to desk 1", ["go to desk 1"]) is True


def test_intervention_metrics_judge_followed_by_the_current_rule():
    """A record written under an older rule (a stale ``followed``) is judged again from its mentions."""
    from workbench.eval.interventions import intervention_metrics
    from workbench.memory.trajectory import Step, Trajectory

    def step(reminder, mentions, stale):
        return {"proactive": {"reminder": reminder, "trigger": True, "silent": False}, "reminder": reminder,
                "reminder_effect": {"p_action": 0.5, "p_action_without": 0.4, "changed": False, "tv": 0.1,
                                    "p_alt_with": 0.5, "p_alt_without": 0.4, "mentions": mentions,
                                    "followed": stale}}

    t = Trajectory(task_id="t", goal="g", success=False,
                   meta={"steps": [step("Task: look at the mug under the desklamp.", ["look"], True),
                                   step("Stop: you already did 'go to desk 1'.", ["go to desk 1"], True)]},
                   steps=(Step(observation="o", action="look"), Step(observation="o", action="go to desk 1")))
    eff = intervention_metrics([t])["reminder_effect"]
    assert (eff["n"], eff["n_judged"], eff["followed"]) == (2, 1, 0.0)  # look is unquoted; the warning was ignored


def test_written_reminder_effect_compares_what_was_written():
    from workbench.agents.counterfactual import written_reminder_effect
    from workbench.eval.interventions import _effects

    warn = "'open drawer 1' did nothing before; do not repeat it."
    e = written_reminder_effect(warn, ADM, "Open  Drawer 1", "open drawer 1")
    assert e == {"written": True, "action_without": "open drawer 1", "changed": False, "mentions": ["open drawer 1"],
                 "followed": False}  # case and spacing are not a change; writing it again ignores the warning
    e2 = written_reminder_effect(warn, ADM, "go to shelf 10", "open drawer 1")
    assert e2["changed"] and e2["followed"] is True
    assert _effects([e, e2]) == {"n": 2, "changed": 0.5, "followed": 0.5, "n_judged": 2}  # no p fields to average
