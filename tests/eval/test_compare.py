"""Paired comparison of two memory conditions on the same items, with the exact McNemar test."""

import pytest

from workbench.eval.compare import mcnemar_exact, paired_outcomes


def test_mcnemar_exact_matches_the_binomial_tail():
    # 14 vs 3 discordant pairs: 2 * P(X <= 3), X ~ Bin(17, 1/2) = 2 * (1 + 17 + 136 + 680) / 2**17
    assert mcnemar_exact(14, 3) == pytest.approx(2 * 834 / 2 ** 17)
    assert mcnemar_exact(3, 14) == mcnemar_exact(14, 3)
    assert mcnemar_exact(5, 5) == 1.0 and mcnemar_exact(0, 0) == 1.0  # capped at 1; no discordant pairs
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)
    scipy_stats = pytest.importorskip("scipy.stats")
    assert mcnemar_exact(11, 4) == pytest.approx(scipy_stats.binomtest(4, 15, 0.5).pvalue)


def test_paired_outcomes_counts_only_items_both_conditions_scored():
    a = {"t1": True, "t2": True, "t3": False, "t4": False, "t5": True}
    b = {"t1": True, "t2": False, "t3": True, "t4": False, "t6": True}
    r = paired_outcomes(a, b)
    assert (r["n"], r["both"], r["only_a"], r["only_b"], r["neither"]) == (4, 1, 1, 1, 1)
    assert r["rate_a"] == r["rate_b"] == 0.5 and r["diff"] == 0.0 and r["p_mcnemar"] == 1.0
    assert paired_outcomes({}, b)["rate_a"] is None


def _episode(task_id, task_type, actions, success):
    from workbench.memory.trajectory import Step, Trajectory

    return Trajectory(task_id=task_id, task_type=task_type, goal="g", success=success,
                      steps=tuple(Step(observation="o", action=a) for a in actions))


def test_first_divergence_is_the_first_differing_action_or_the_shorter_length():
    from workbench.studies.parting import first_divergence

    a = _episode("t", "look", ["go to bed 1", "take x", "use lamp"], True)
    assert first_divergence(a, _episode("t", "look", ["go to shelf 1", "take x", "use lamp"], False)) == 0
    assert first_divergence(a, _episode("t", "look", ["go to bed 1", "take y"], False)) == 1
    assert first_divergence(a, _episode("t", "look", ["go to bed 1", "take x"], False)) == 2  # a prefix
    assert first_divergence(a, a) is None


def test_parting_table_counts_each_sides_wins_by_where_the_episodes_part():
    from workbench.studies.parting import parting_table

    a = [_episode("t1", "look", ["bed", "take", "use"], True),           # only A, parts at 0
         _episode("t2", "look", ["bed", "take", "use"], True),           # only A, parts at 2
         _episode("t3", "pick", ["desk", "take", "go", "go", "put"], False),  # only B, parts at 4
         _episode("t4", "pick", ["desk"], True),                         # both: not counted
         _episode("t5", "pick", ["desk"], True)]                         # B has not played it
    b = [_episode("t1", "look", ["shelf", "take", "use"], False),
         _episode("t2", "look", ["bed", "take", "put"], False),
         _episode("t3", "pick", ["desk", "take", "go", "go", "go", "put"], True),
         _episode("t4", "pick", ["desk"], True)]
    t = parting_table(a, b, "arb", "react")
    assert list(t.index) == ["all", "look", "pick"]
    assert t.loc["all", "tasks"] == 4 and t.loc["all", "only arb"] == 2 and t.loc["all", "only react"] == 1
    assert t.loc["look", "only arb, parted at 0"] == 1 and t.loc["look", "only arb, parted at 1-3"] == 1
    assert t.loc["pick", "only react, parted at 4+"] == 1 and t.loc["pick", "only arb"] == 0
    assert t.loc["all", "p_mcnemar"] == 1.0
