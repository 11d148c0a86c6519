"""The MemArbiter and proactive explorers' step views, from records a policy replay writes (no model)."""

from __future__ import annotations

import pytest

from workbench.envs.memory_base import expert_trajectories_for
from workbench.methods.arbiter import ArbiterPolicy
from workbench.methods.arbiter.assembly import block_text
from workbench.methods.proactive import ProactivePolicy
from workbench.training.layouts import task_of
from workbench.viz import (
    arbiter_block_text,
    arbiter_explorer,
    arbiter_step_view,
    proactive_explorer,
    proactive_step_view,
)


def replayed(policy, expert):
    """The expert trajectory with the records the policy writes at each step (as a run would store them)."""
    policy.begin(task_of(expert), expert.goal, expert.initial_observation)
    records, blocks = [], []
    for k, st in enumerate(expert.steps):
        b = policy.memory(k, list(expert.steps[:k]))
        blocks.append(b)
        records.append(dict(b.record))
        policy.observe(st, expert.steps[k + 1].observation if k + 1 < expert.n_steps else "")
    return expert.model_copy(update={"meta": {**expert.meta, "steps": records}}), blocks


@pytest.fixture(scope="module")
def expert():
    return next(e for e in expert_trajectories_for("valid_unseen") if e.task_type == "clean")


@pytest.mark.parametrize("variant", ["arbiter", "no-banks"])
def test_arbiter_view_rebuilds_the_prompts_block_exactly(expert, variant):
    traj, blocks = replayed(ArbiterPolicy(budget=500, variant=variant), expert)
    for k, b in enumerate(blocks):
        assert arbiter_block_text(traj, k) + "\n" == block_text(b.working_memory)
    view = arbiter_step_view(traj, 2, utilization=[{"step": 2, "item": "G1", "u_token": 1.5}])
    assert {"bank", "gate", "shown", "d", "eta", "transition", "attention/token", "text"} <= set(view.columns)
    with pytest.raises(ValueError, match="not a MemArbiter step"):
        arbiter_step_view(traj, 999)
    assert "workbench-arbiter-explorer" in arbiter_explorer([traj])._dom_classes


def test_proactive_view_replays_the_bank(expert):
    pol = ProactivePolicy()
    traj, _ = replayed(pol, expert)
    last = proactive_step_view(traj, expert.n_steps - 1)
    assert set(last["bank"]) == set(pol.bank.entries)  # the calls, replayed, give the policy's own bank
    assert last["trigger"] == "interval" and last["action"] == expert.steps[-1].action
    assert "workbench-proactive-explorer" in proactive_explorer([traj])._dom_classes


def test_proactive_view_shows_both_kinds_of_counterfactual(expert):
    """A scoring agent's re-score shows p with and without; a writing agent's shows what it wrote without."""
    from workbench.agents.counterfactual import reminder_effect, written_reminder_effect
    from workbench.viz.memory_explorers import _proactive_html

    traj, _ = replayed(ProactivePolicy(), expert)
    k, action = 1, expert.steps[1].action
    reminder = f"Do not repeat '{action}'."
    steps = [dict(r) for r in traj.meta["steps"]]
    steps[k]["proactive"] = {**steps[k]["proactive"], "reminder": reminder}
    steps[k] |= {"reminder": reminder, "reminder_effect": reminder_effect(reminder, [action, "look"], [0.6, 0.4],
                                                                         [0.3, 0.7])}
    html = _proactive_html(traj.model_copy(update={"meta": {**traj.meta, "steps": steps}}), k)
    assert "with the reminder 0.600, without 0.300" in html and "would choose <code>look</code> (changed)" in html
    assert "followed: False" in html  # it warned against the action taken
    steps[k]["reminder_effect"] = written_reminder_effect(reminder, [action, "look"], action, "inventory")
    html = _proactive_html(traj.model_copy(update={"meta": {**traj.meta, "steps": steps}}), k)
    assert "p(" not in html and "would write <code>inventory</code> (changed)" in html
