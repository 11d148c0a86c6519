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
