"""Notebook 06's run grid and its intervention table."""

from __future__ import annotations

from workbench.methods.proactive.experiments import intervention_table, proactive_configs


def test_the_grid_is_the_action_agent_alone_and_every_variant(tmp_path):
    cfgs = proactive_configs("smollm2-135m-alfworld", "valid_unseen", "0:2", 50, tmp_path, interval=3,
                             triggers=["failed"])
    assert [c.memory for c in cfgs] == ["none", "proactive", "proactive-passive", "proactive-always",
                                        "proactive-advisor", "proactive-retrieval"]
    assert cfgs[0].interval is None and {c.interval for c in cfgs[1:]} == {3}
    assert cfgs[1].method == "proactive/k=3+failed"


def test_the_table_carries_the_reminder_re_score():
    m = {"n_episodes": 2, "success_rate": 0.5, "avg_steps": 10.0,
         "interventions": {"interventions_per_episode": 1.5, "silence_rate": 0.4, "reminder_o200k": 20.0,
                           "memory_calls_per_episode": 6, "latency_ms_per_call": 3.0, "errors_per_episode": 0,
                           "reminder_effect": {"n": 3, "mean_delta_p": 0.05, "changed": 1 / 3, "followed": 0.5}}}
    t = intervention_table({"proactive": m, "none": {"n_episodes": 2, "success_rate": 0.0, "avg_steps": 50.0}})
    assert t.loc["proactive", "mean Δp(action)"] == 0.05 and t.loc["proactive", "success_%"] == 50.0
    assert t.loc["none"].drop(["episodes", "success_%", "avg_steps"]).isna().all()  # no memory agent, no numbers
