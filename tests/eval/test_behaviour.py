"""Failure response, recurrence, episodic share and intervention metrics on constructed trajectories."""

from __future__ import annotations

import pytest

from workbench.eval.behaviour import (
    common_failure_rates,
    episodic_share,
    failures,
    max_memory_o200k,
    recurrence_rates,
    task_behaviour,
)
from workbench.eval.interventions import intervention_metrics
from workbench.eval.metrics import SR_KS, episode_metrics
from workbench.memory.trajectory import Step, Trajectory

NOPE = "Nothing happens."


def traj(task: str, actions: list[str], outcomes: list[str], steps_meta: list[dict] | None = None) -> Trajectory:
    """``outcomes[k]`` is what action k produced."""
    obs = ["start"] + outcomes[:-1]
    meta = {"final_observation": outcomes[-1], **({"steps": steps_meta} if steps_meta else {})}
    return Trajectory(task_id=task, task_type="pick", goal="g", initial_observation="room",
                      steps=tuple(Step(observation=o, action=a) for o, a in zip(obs, actions)), success=False, meta=meta)


def test_task_rates():
    t = traj("t1", ["open drawer 1", "open drawer 1", "go to desk 1", "open drawer 1", "go to desk 1", "go to desk 1"],
             [NOPE, NOPE, "On the desk 1, you see nothing.", NOPE, "On the desk 1, you see nothing.", "ok"])
    assert failures(t) == [0, 1, 3]
    r = task_behaviour(t)
    assert r["one_step_recovery"] == pytest.approx(2 / 3)  # after 0: failed again; after 1 and 3: executed
    assert r["failed_action_repetition"] == pytest.approx(1 / 3)
    assert r["adjacent_repetition"] == pytest.approx(2 / 5)
    # (obs, action) pairs: (start, open), (NOPE, open), (NOPE, go), (desk, open), (NOPE, go) <- again, (desk, go)
    assert r["state_action_recurrence"] == pytest.approx(1 / 6)


def test_common_failure_tasks_and_macro_average():
    a1 = traj("t1", ["x", "y"], [NOPE, "ok"])  # recovers
    a2 = traj("t2", ["x", "x", "z"], [NOPE, NOPE, "ok"])  # 1/2 recover, 1/2 repeat
    b1 = traj("t1", ["x", "x"], [NOPE, "ok"])
    b2 = traj("t2", ["z"], ["ok"])  # no failure: t2 is not a common-failure task
    rates = common_failure_rates({"a": [a1, a2], "b": [b1, b2]})
    assert rates["tasks"] == ["t1"]
    assert rates["a"] == {"one_step_recovery": 1.0, "failed_action_repetition": 0.0}
    assert rates["b"] == {"one_step_recovery": 1.0, "failed_action_repetition": 1.0}
    assert recurrence_rates([a1, a2])["adjacent_repetition"] == pytest.approx((0 + 0.5) / 2)
    # over each run's own failure tasks: a's t1 and t2 (t2: one of two failures recovered, one repeated)
    from workbench.eval.behaviour import own_failure_rates

    assert own_failure_rates([a1, a2]) == {"failure_tasks": 2, "failed_executions": 3,
                                           "one_step_recovery_own": pytest.approx((1 + 0.5) / 2),
                                           "failed_action_repetition_own": pytest.approx((0 + 0.5) / 2)}
    assert own_failure_rates([b2]) == {"failure_tasks": 0, "failed_executions": 0, "one_step_recovery_own": None,
                                       "failed_action_repetition_own": None}


def test_episodic_share_reads_the_wm_records():
    wm = lambda ep, tot: {"wm": {"o200k": tot, "budget": 500, "bank_tokens": {"episodic": ep}}}
    t = traj("t1", ["a", "b", "c"], ["ok", NOPE, "ok"], [wm(10, 100), wm(20, 100), wm(50, 100)])
    assert episodic_share([t]) == {"n_failures": 1, "failed_action_prompt": 0.2, "next_prompt": 0.5}
    assert max_memory_o200k([t]) == 100
    assert episodic_share([traj("t2", ["a"], [NOPE])]) is None


def test_intervention_metrics():
    p = lambda **kw: {"proactive": {"trigger": "interval", "silent": False, "reminder": None, "n_calls": 2,
                                    "latency_ms": 10.0, "errors": [], **kw}}
    steps = [p(silent=True), p(reminder="do x", reminder_o200k=3) | {"reminder": "do x", "reminder_tokens": 4},
             p(trigger=None, n_calls=0, latency_ms=0.0)]
    m = intervention_metrics([traj("t", ["a", "b", "c"], ["o", "o", "o"], steps)])
    assert m["interventions_per_episode"] == 1 and m["silence_rate"] == 0.5
    assert (m["reminder_o200k"], m["reminder_tokens"], m["memory_calls_per_episode"], m["latency_ms_per_call"]) == (3, 4, 4, 5.0)
    assert intervention_metrics([traj("t", ["a"], ["o"])]) is None


def test_episode_metrics_has_them_all():
    m = episode_metrics([traj("t1", ["x", "y"], [NOPE, "ok"])])
    assert list(m["sr_at_k"]) == [str(k) for k in SR_KS] and SR_KS == tuple(range(5, 55, 5))
    assert m["behaviour"]["one_step_recovery"] == 1.0 and m["behaviour"]["failing_tasks"] == 1
    assert "interventions" not in m and "episodic_share" not in m


def test_budget_use_says_whether_the_budget_bound():
    from workbench.eval.behaviour import budget_use

    step = lambda size, cut: {"wm": {"o200k": size, "budget": 500, "bank_tokens": {}},
                              "arbiter": {"cut": cut, "items": []}}
    t = traj("t1", ["a", "b", "c", "d"], ["ok"] * 4, [step(100, []), step(200, []), step(300, []), step(496, ["i7"])])
    use = budget_use([t])
    assert use["P_t_median_o200k"] == 250 and 300 < use["P_t_p95_o200k"] < 496
    assert use["steps_with_items_cut"] == 0.25
    flat = traj("t2", ["a"], ["ok"], [{"wm": {"o200k": 80, "budget": 500, "bank_tokens": {}}}])
    assert budget_use([flat])["steps_with_items_cut"] is None  # a flat policy records no cut
    assert budget_use([traj("t3", ["a"], ["ok"])]) == {}
