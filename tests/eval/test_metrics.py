"""workbench.eval.metrics: action patterns, the behaviour behind a success rate."""

import pytest

from workbench.eval.metrics import action_patterns, episode_metrics, memory_following
from workbench.memory.trajectory import Step, Trajectory


def _traj(actions, success=False):
    return Trajectory(task_id=f"t{len(actions)}{actions[:1]}", task_type="pick", goal="put a mug in cabinet.",
                      steps=tuple(Step(observation="o", action=a) for a in actions), success=success)


def test_action_patterns_tell_an_oscillating_agent_from_a_working_one():
    stuck = _traj(["go to safe 1", "go to cabinet 4"] * 5)  # A, B, A, B ...
    worker = _traj(["go to countertop 1", "take mug 1 from countertop 1", "go to cabinet 1", "open cabinet 1",
                    "put mug 1 in/on cabinet 1"], success=True)
    p = action_patterns([stuck])
    assert p["oscillation"] == 1.0 and p["repeat"] == 0.0 and p["distinct_actions"] == 2
    assert p["navigation"] == 1.0 and p["took_object"] == 0.0
    both = action_patterns([stuck, worker])
    assert both["oscillation"] == pytest.approx(8 / (8 + 3))  # worker: 3 steps with a two-back action, none equal
    assert both["distinct_actions"] == pytest.approx((2 + 5) / 2)
    assert both["navigation"] == pytest.approx((10 + 2) / 15) and both["took_object"] == 0.5
    waiter = action_patterns([_traj(["look", "look", "look"])])
    assert waiter["repeat"] == 1.0 and waiter["oscillation"] == 0.0  # staying put is not oscillating
    assert action_patterns([_traj(["look"])]) == {"oscillation": 0.0, "repeat": 0.0, "distinct_actions": 1,
                                                  "navigation": 0.0, "took_object": 0.0, "put_back": None,
                                                  "failed_oscillation": 0.0, "failed_oscillating": 0.0}
    # an undo: what is taken goes straight back where it was (the worker's take is carried on, not undone)
    undoer = _traj(["take mug 1 from countertop 1", "put mug 1 in/on countertop 1", "take mug 1 from countertop 1",
                    "put mug 1 in/on countertop 1", "take mug 1 from countertop 1", "go to cabinet 1"])
    assert action_patterns([undoer])["put_back"] == pytest.approx(2 / 3)
    assert action_patterns([worker])["put_back"] == 0.0
    assert action_patterns([undoer, worker])["put_back"] == pytest.approx(2 / 4)
    # over the failed episodes only: the stuck one loops, a failure that keeps moving does not
    wanderer = _traj(["go to safe 1", "go to cabinet 4", "go to safe 1", "go to desk 1", "go to bed 1", "go to shelf 2"])
    failed = action_patterns([stuck, worker, wanderer])
    assert failed["failed_oscillating"] == 0.5 and failed["failed_oscillation"] == pytest.approx((8 + 1) / (8 + 4))
    assert both["failed_oscillation"] == 1.0 and both["failed_oscillating"] == 1.0
    assert episode_metrics([stuck, worker])["action_patterns"] == both


def test_memory_following_measures_copying_against_the_retrieved_trajectory():
    memory = ["go to countertop 1", "take mug 1 from countertop 1", "go to cabinet 1", "put mug 1 in/on cabinet 1"]
    tid = "valid_unseen/pick_and_place_simple-Mug-None-Cabinet-1/trial_T1"
    follower = Trajectory(task_id=tid, task_type="pick", goal="put a mug in cabinet.", success=True,
                          steps=tuple(Step(observation="o", action=a) for a in memory[:2] + ["open cabinet 1"]))
    stuck = Trajectory(task_id="valid_unseen/pick_and_place_simple-Mug-None-Cabinet-1/trial_T2", task_type="pick",
                       goal="put a mug in cabinet.",
                       steps=tuple(Step(observation="o", action=a) for a in ["go to safe 1", "go to countertop 1"] * 3))
    unmatched = _traj(["look"])  # no memory entry for its task: left out
    m = memory_following([follower, stuck, unmatched], {follower.task_id: memory, stuck.task_id: memory})
    assert m["n_episodes"] == 2
    assert m["first_action"] == 0.5 and m["prefix"] == pytest.approx((2 + 0) / 2)
    assert m["in_memory"] == pytest.approx((2 + 1) / (3 + 2))  # distinct actions, pooled over episodes
    assert m["took_target"] == 0.5  # "take mug 1 ..." for the Mug task; the stuck one never takes
    same = memory_following([follower], {follower.task_id: memory[:2]})  # memory shorter than the episode
    assert same["prefix"] == 2 and same["first_action"] == 1.0
    assert memory_following([unmatched], {}) == {"n_episodes": 0, "first_action": 0.0, "prefix": 0.0,
                                                 "in_memory": 0.0, "took_target": 0.0}


def test_memory_tokens_weigh_every_episode_the_same():
    def ep(n, tokens, tid):
        t = _traj(["look"] * n)
        return t.model_copy(update={"task_id": tid, "meta": {"steps": [{"memory_tokens": tokens,
                                                                         "prompt_tokens": tokens + 100}] * n}})
    # a 50-step failure with a 100-token entry and a 10-step episode with a 300-token entry: 200 per episode
    # (pooling the 60 steps would give 133)
    m = episode_metrics([ep(50, 100, "a"), ep(10, 300, "b")])
    assert m["memory_tokens"] == 200 and m["prompt_tokens"] == 300


def test_memory_tokens_count_the_reminders_a_proactive_run_injects():
    # a proactive run: no memory block, a 40-token reminder at one step of two -> 20 memory tokens per step; the
    # prompt's own memory block (here 0) and the reminder add up
    t = _traj(["look", "look"]).model_copy(update={"task_id": "a", "meta": {"steps": [
        {"memory_tokens": 0, "prompt_tokens": 100, "reminder": "the mug is in the fridge", "reminder_tokens": 40},
        {"memory_tokens": 0, "prompt_tokens": 60}]}})
    assert episode_metrics([t])["memory_tokens"] == 20
