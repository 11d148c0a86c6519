"""Ablation and utilization plumbing on a tiny model: arms, caches, C per run, segment dropping, records on disk."""

from __future__ import annotations

import pytest
from agent_tiny import ENTRY, PLAN, TASK, FixedEntry, PlanEnv, build_agent_lm, expert

import workbench.studies.head_masking as ablation_mod
from workbench.agents import Agent
from workbench.attention import DropSegments
from workbench.memory.render import render_pieces
from workbench.methods.agmr.recording import (
    load_utilization,
    representative,
    save_utilization,
    teacher_forced_utilization,
    utilization_episode,
)
from workbench.studies.head_masking import (
    ConditionScore,
    HeadAblationResult,
    ablation_conditions,
    run_head_ablation,
)
from workbench.studies.segment_masking import (
    SegmentMaskingResult,
    SegmentMaskingRow,
    run_segment_masking,
)

TASKS = {TASK.task_id: TASK}


@pytest.fixture(scope="module")
def agent():
    return Agent.from_model(build_agent_lm(), keep_prompts=True)


def test_ablation_conditions_draw_random_heads_away_from_the_top():
    top = [(0, 1), (1, 3)]
    conds = ablation_conditions(top, n_layers=2, n_heads=4, n_random=3, seed=7)
    assert [c.group for c in conds] == ["icl", "traj", "top", "random", "random", "random"]
    assert conds[2].heads == tuple(top) and conds[0].heads == conds[1].heads == ()
    rand = [c.heads for c in conds[3:]]
    assert all(len(h) == 2 and not set(h) & set(top) for h in rand)
    assert [c.seed for c in conds[3:]] == [7, 8, 9]
    assert ablation_conditions(top, 2, 4, n_random=3, seed=7) == conds  # rebuildable
    both = ablation_conditions(top, 2, 4, n_random=1, baselines=("icl", "none"))
    assert [c.group for c in both] == ["none", "icl", "traj", "top", "random"]
    with pytest.raises(ValueError, match="baselines"):
        ablation_conditions(top, 2, 4, baselines=("traj",))


def test_ablation_metrics_are_gains_relative_to_icl_and_changes_relative_to_traj():
    def row(group, tf, sr=None, seed=None):
        return ConditionScore(name=f"{group}{seed if seed is not None else ''}", group=group, memory="traj", heads=[], seed=seed, tf_accuracy=tf,
                              success_rate=sr)

    res = HeadAblationResult("m", 2, (row("none", 0.1, 0.0), row("icl", 0.2, 0.0), row("traj", 0.6, 0.5), row("top", 0.3, 0.1),
                                      row("random", 0.5, 0.4, 0), row("random", 0.7, 0.6, 1)))
    m = res.metrics()
    assert m["tf_accuracy_memory_gain"] == pytest.approx(0.4)
    assert m["tf_accuracy_gain_left_top"] == pytest.approx(0.1)
    assert m["tf_accuracy_gain_left_random"] == pytest.approx(0.4)
    assert m["success_rate_change_top"] == pytest.approx(-0.4)
    assert m["tf_accuracy_memory_gain_vs_none"] == pytest.approx(0.5)
    assert m["tf_accuracy_gain_left_top_vs_none"] == pytest.approx(0.2)
    assert res.summary()["random"]["tf_accuracy_sd"] == pytest.approx(0.1414, abs=1e-3)
    assert list(res.table().index) == ["none", "icl", "traj", "top", "random0", "random1"]


def test_head_ablation_runs_every_arm_and_reuses_its_cache(agent, tmp_path, monkeypatch):
    policies = {"icl": FixedEntry(None, "icl"), "traj": FixedEntry()}
    kwargs = dict(experts=[expert()], tasks=TASKS, n_random=2, env=PlanEnv(), episode_tasks=[TASK], max_steps=3,
                  cache_dir=tmp_path, progress=False)
    res = run_head_ablation(agent, policies, [(0, 1), (1, 2)], **kwargs)
    assert [r.group for r in res.rows] == ["icl", "traj", "top", "random", "random"]
    assert all(r.tf_steps == len(PLAN) and r.n_episodes == 1 for r in res.rows)
    assert res.rows[2].heads == [(0, 1), (1, 2)]
    path = res.save(tmp_path / "ablation.json")
    assert HeadAblationResult.load(path) == res

    def boom(*a, **k):
        raise AssertionError("an arm was recomputed despite its cache")

    monkeypatch.setattr(ablation_mod, "_score_arm", boom)
    assert run_head_ablation(agent, policies, [(0, 1), (1, 2)], **kwargs) == res


def test_drop_segments_removes_and_renumbers(agent):
    policy = DropSegments(FixedEntry(), {TASK.task_id: [1, 3]})
    policy.begin(TASK, "g", "r")
    block = policy.memory(0, [])
    assert [s.action for s in block.entry.segments] == [ENTRY.segments[i].action for i in (0, 2, 4)]
    assert sorted({p[1] for p in block.pieces if p[1] is not None}) == [0, 1, 2]
    assert list(block.pieces) == [p for p in render_pieces(block.entry)]
    prompt = agent.builder.build("room", "goal", memory=block.pieces)
    assert prompt.n_segments == 3 and "take tomato 1" not in agent.builder.decode(prompt)
    other = DropSegments(FixedEntry(), {"another/task": [0]})
    other.begin(TASK, "g", "r")
    assert len(other.memory(0, []).pieces) == len(render_pieces(ENTRY))


def test_teacher_forced_utilization_record(agent, tmp_path):
    rec = teacher_forced_utilization(agent, expert(), TASK, FixedEntry(), [(0, 1), (1, 2)], carrier_heads="all",
                                     top_m=3)
    C = rec.matrix()
    assert C.C.shape == (len(ENTRY.segments), len(PLAN)) and C.heads == ((0, 1), (1, 2))
    assert rec.expert_actions == list(PLAN) and rec.steps == list(range(len(PLAN)))
    assert rec.c_max == pytest.approx([float(v) for v in C.segment_max()], abs=1e-4)
    wrong = [t for t, (a, b) in enumerate(zip(rec.actions, rec.expert_actions)) if a != b]
    assert rec.critical_step == (wrong[0] if wrong else None)
    assert len(rec.carriers) == len(ENTRY.segments) and len(rec.carriers[0][0]) == 3
    # carriers rank all 8 heads: the top one carries at least as much as any retrieval head on that cell
    assert rec.carriers[0][0][0][2] >= rec.carriers[0][0][-1][2]
    path = save_utilization(tmp_path / "utilization.jsonl", [rec])
    assert load_utilization(path) == [rec]


def test_utilization_episode_on_a_failed_run_has_a_critical_step(agent):
    rec, traj = utilization_episode(agent, PlanEnv(), TASK, FixedEntry(), [(0, 1)], expert_plan=PLAN, max_steps=2)
    assert not traj.success and rec.success is False and rec.matrix().C.shape == (len(ENTRY.segments), 2)
    assert rec.critical_step is not None and rec.ideal_segment is not None
    assert rec.pattern in ("attended_but_wrong", "missed_relevant", "distracted_by_irrelevant")
    assert representative([rec], 1) == [rec]


def test_segment_masking_runs_both_arms(agent):
    res, records = run_segment_masking(agent, FixedEntry(), [(0, 1)], experts=[expert()], tasks=TASKS,
                                       env=PlanEnv(), episode_tasks=[TASK], max_steps=3, progress=False)
    tf, ep = res.rows
    assert tf.mode == "teacher_forced" and ep.mode == "episode" and len(records) == 2
    assert tf.k == 1 and len(tf.top) == len(tf.bottom) == 1 and tf.top != tf.bottom
    assert tf.steps == {"full": 5, "bottom_removed": 5, "top_removed": 5}
    assert set(ep.success) == {"full", "bottom_removed", "top_removed"}


def test_segment_masking_summary_pools_steps():
    def row(tid, full, top, bottom, steps):
        return SegmentMaskingRow(task_id=tid, mode="teacher_forced", n_segments=5, k=1, top=[0], bottom=[4],
                                 c_max=[1.0] * 5, correct={"full": full, "top_removed": top, "bottom_removed": bottom},
                                 steps={"full": steps, "top_removed": steps, "bottom_removed": steps})

    res = SegmentMaskingResult("m", 0.2, (row("a", 8, 4, 8, 10), row("b", 2, 0, 1, 10)))
    m = res.metrics()
    assert m["tf_accuracy_full"] == pytest.approx(0.5)
    assert m["tf_accuracy_drop_top"] == pytest.approx(0.3) and m["tf_accuracy_drop_bottom"] == pytest.approx(0.05)
    assert m["success_rate_drop_top"] is None
