"""Training sequences under every evaluated layout: uniform draw, the prompts of the evaluation by construction,
and DAgger's labelled on-policy states."""

from __future__ import annotations

from collections import Counter

import pytest

from workbench.envs.memory_base import expert_trajectories_for
from workbench.memory.trajectory import Step
from workbench.prompts.layout import PromptBuilder
from workbench.training.dagger import label_report, label_trajectory, rollout_grid
from workbench.training.data import build_examples, build_policy_examples, unpacked_step
from workbench.training.layouts import (
    LAYOUTS,
    Layout,
    LayoutSampler,
    layout_counts,
    layout_policy,
)


@pytest.fixture(scope="module")
def builder(smol_tokenizer):
    return PromptBuilder(smol_tokenizer, 8192)


@pytest.fixture(scope="module")
def expert():
    return next(e for e in expert_trajectories_for("valid_train") if e.task_type == "clean")


def test_the_draw_is_uniform_over_layouts_and_budgets_and_stable():
    trajs = [e.model_copy(update={"task_id": f"valid_train/x/{i}"}) for i, e in
             enumerate(expert_trajectories_for("valid_train")[:1] * 2800)]
    sampler = LayoutSampler(seed=3)
    chosen = [sampler(t, epoch=0) for t in trajs]
    counts = layout_counts(chosen)
    assert set(counts["by_layout"]) == {l.family for l in LAYOUTS} and len(LAYOUTS) == 14
    assert max(counts["by_layout"].values()) / min(counts["by_layout"].values()) < 1.35
    assert set(counts["by_budget"]) == {"500", "750"}
    assert [sampler(t, 0) for t in trajs[:20]] == chosen[:20]  # a pure function: resumes see the same data


def test_react_layout_is_the_v1_training_prompt(builder, expert):
    old = build_examples(expert, builder)
    new = build_policy_examples(expert, builder, layout_policy(Layout("none")))
    assert [(e.prefix, e.steps) for e in old] == [(e.prefix, e.steps) for e in new]


@pytest.mark.parametrize("layout", [l if not l.budgeted else Layout(l.memory, l.ablation, True, 500) for l in LAYOUTS],
                         ids=lambda l: l.name)
def test_every_layout_builds_the_prompt_the_loop_builds(builder, expert, layout):
    from workbench.agents.loop import build_prompt
    from workbench.training.layouts import task_of

    examples = build_policy_examples(expert, builder, layout_policy(layout))
    steps = [(ex, i) for ex in examples for i in range(len(ex.steps))]
    assert len(steps) == sum(1 for s in expert.steps if s.action not in ("look", "inventory"))
    # replay the same policy like teacher forcing does and compare every step's prompt, token for token
    policy = layout_policy(layout)
    policy.begin(task_of(expert), expert.goal, expert.initial_observation)
    prompts = []
    for k, st in enumerate(expert.steps):
        block = policy.memory(k, list(expert.steps[:k]))
        prompts.append(build_prompt(builder, block, expert.initial_observation, expert.goal, list(expert.steps[:k]),
                                    st.observation).tokens)
        policy.observe(st, expert.steps[k + 1].observation if k + 1 < expert.n_steps else
                       expert.meta.get("final_observation", ""))
    for (ex, i), prompt in zip(steps, prompts):
        toks, _ = unpacked_step(ex, i)
        assert toks[: len(prompt)] == prompt
    text = builder.tokenizer.decode(steps[-1][0].prefix)
    if layout.budgeted:
        assert "Working memory:" in text and "Current observation:" in text  # P_t in place of the history
    else:
        assert "Working memory:" not in text


def test_labels_become_targets_and_unlabelled_states_stay_history(builder, expert):
    labels = [None if k % 2 else a for k, a in enumerate(expert.actions())]
    ex = build_policy_examples(expert, builder, layout_policy(Layout("none")), targets=labels)
    assert [s.action for e in ex for s in e.steps] == [a for a in labels if a is not None]


def test_dagger_labels_an_off_plan_state_with_the_experts_action(expert):
    plan = expert.actions()
    adm = expert.meta["admissible"]
    wrong = next(a for a in adm[1] if a.startswith("go to ") and a != plan[1])
    # the agent goes somewhere else at step 1, then the expert's state-1 commands are admissible again
    steps = [expert.steps[0], Step(observation=expert.steps[1].observation, action=wrong),
             Step(observation="You arrive somewhere.", action=plan[0])]
    meta = {"steps": [{"admissible": adm[0]}, {"admissible": adm[1]}, {"admissible": adm[0]}],
            "final_observation": expert.steps[1].observation}
    traj = expert.model_copy(update={"steps": tuple(steps), "meta": meta, "source": "agent:v1"})
    labels = label_trajectory(traj, plan)
    assert labels[0] == plan[0] and labels[1] == plan[1]
    assert labels[2] == plan[0]  # away from the object: go back to it
    rep = label_report([traj.model_copy(update={"meta": {**meta, "labels": labels}})])
    assert rep["states"] == 3 and rep["agent_differs"] == pytest.approx(1 / 3) and rep["no_answer"] == 0


def test_rollout_grid_is_a_valid_sweep(tmp_path):
    from workbench.eval.sweep import load_grid

    path = rollout_grid(tmp_path / "it0.yaml", str(tmp_path / "runs"), "smollm2-135m-alfworld", 0, 200)
    grid = load_grid(path)
    assert len(grid.configs) == 14 and all(c.record_admissible and c.split == "valid_train" for c in grid.configs)
    covered = Counter()
    from workbench.envs.selection import parse_task_slice

    for c in grid.configs:
        covered.update(parse_task_slice(c.tasks, 200))
    assert sorted(covered) == list(range(200)) and set(covered.values()) == {1}  # every game once
    assert {c.budget for c in grid.configs if c.budget} == {500, 750}
    assert grid.order == "interleaved"  # stopped early, every layout has played its share
    assert {c.dtype for c in grid.configs} == {"float32"}
    # the proactive layouts play the window training renders them with (layout_policy), not today's default
    from workbench.training.layouts import LAYOUTS, layout_policy

    windows = {lay.memory: layout_policy(lay).window for lay in LAYOUTS if lay.memory.startswith("proactive")}
    assert {c.memory: c.window for c in grid.configs if c.memory.startswith("proactive")} == windows
    assert set(windows.values()) == {10}


def test_rollout_grid_records_the_rollouts_dtype(tmp_path):
    from workbench.eval.sweep import load_grid

    path = rollout_grid(tmp_path / "it1.yaml", str(tmp_path / "runs"), "smollm2-135m-alfworld", 1, 200,
                        per_layout="5", dtype="bfloat16")
    assert "dtype: bfloat16" in path.read_text()  # the iteration's grid says how it was played
    assert {c.dtype for c in load_grid(path).configs} == {"bfloat16"}


def test_rollout_grid_per_layout_keeps_each_layouts_first_games(tmp_path):
    from workbench.envs.selection import parse_task_slice
    from workbench.eval.sweep import load_grid
    from workbench.training.dagger import parse_per_layout

    path = rollout_grid(tmp_path / "it1.yaml", str(tmp_path / "runs"), "smollm2-135m-alfworld", 1, 200,
                        per_layout="3,none=99,arbiter=5")
    full = {c.memory + str(c.ablation): c for c in load_grid(rollout_grid(
        tmp_path / "all.yaml", str(tmp_path / "r2"), "smollm2-135m-alfworld", 1, 200)).configs}
    grid = load_grid(path)
    counts = {c.out.rsplit("/", 1)[1]: parse_task_slice(c.tasks, 200) for c in grid.configs}
    assert len(counts["none"]) == 15 and grid.configs[0].tasks == "0:200:14"  # K over the share: the whole share
    assert len(counts["arbiter"]) == 5 and all(len(v) == 3 for k, v in counts.items() if k not in ("none", "arbiter"))
    for c in grid.configs:  # the first K games of the same share as the full grid
        share = parse_task_slice(full[c.memory + str(c.ablation)].tasks, 200)
        assert parse_task_slice(c.tasks, 200) == share[:len(parse_task_slice(c.tasks, 200))]
    assert parse_per_layout(None) == (None, {})
    for bad, msg in (("0", "not K or NAME=K"), ("3,nonee=2", "no layout 'nonee'"), ("x", "not K or NAME=K")):
        with pytest.raises(ValueError, match=msg):
            parse_per_layout(bad)


@pytest.mark.game
def test_dagger_rollout_then_label_end_to_end(tiny_model_dir, tmp_path):
    """Three valid_train games played by a tiny random model (one layout each), then labelled by the oracle."""
    import json

    from workbench.memory.trajectory import Trajectory, read_jsonl
    from workbench.training.dagger import label_iteration, run_rollouts

    run_rollouts(tmp_path, 0, str(tiny_model_dir), n_games=3, max_steps=4)
    report = label_iteration(tmp_path, 0)
    labelled = read_jsonl(tmp_path / "it0" / "labelled.jsonl", Trajectory)
    assert report["episodes"] == len(labelled) == 3 and report["states"] == sum(t.n_steps for t in labelled)
    assert set(report["by_rollout"]) == {"dagger-0/none", "dagger-0/icl", "dagger-0/traj"}
    for t in labelled:
        assert len(t.meta["labels"]) == t.n_steps and all(s.get("admissible") for s in t.meta["steps"])
        assert all(lab is None or lab in s["admissible"] for lab, s in zip(t.meta["labels"], t.meta["steps"]))
    assert report["no_answer"] < 0.5 and json.loads((tmp_path / "it0" / "label_report.json").read_text()) == report


def test_compare_iterations_pairs_the_layout_game_pairs_both_played(tmp_path):
    import json

    from training_builders import STEPS, make_traj

    from workbench.training.dagger import compare_iterations

    def play(it, layout, games):  # games: task suffix -> success
        run = tmp_path / f"it{it}" / "runs" / layout
        run.mkdir(parents=True, exist_ok=True)
        with (run / "trajectories.jsonl").open("a") as f:
            for g, won in games.items():
                t = make_traj(task_id=f"valid_train/clean-{g}/trial_T1", success=won)
                if not won:  # a loop: A, B, A, B, ...
                    t = t.model_copy(update={"steps": tuple(t.steps[k % 2] for k in range(6))})
                f.write(json.dumps(t.model_dump(mode="json")) + "\n")

    play(0, "none", {"g1": True, "g2": False, "g3": False})
    play(0, "arbiter", {"g4": False, "g5": True})
    play(1, "none", {"g1": True, "g2": True})  # g3 not played in it1: not paired
    play(1, "arbiter", {"g4": True, "g5": False, "g6": True})  # g6 not played in it0
    play(1, "traj", {"g7": True})  # a layout it0 never played
    r = compare_iterations(tmp_path, 0, 1)
    assert r["pairs"] == 4
    p = r["paired"]
    assert (p["both"], p["only_a"], p["only_b"], p["neither"]) == (1, 1, 2, 0)
    assert set(r["by_layout"]) == {"none", "arbiter"} and r["by_layout"]["none"]["only_b"] == 1
    # it0 failed 2 of the 4 paired episodes, both by looping; it1 failed one, also looping
    assert r["action_patterns"]["it0"]["failed_oscillating"] == 1.0
    assert r["action_patterns"]["it1"]["failed_oscillating"] == 1.0
    assert r["action_patterns"]["it0"]["distinct_actions"] < len(STEPS)
    (tmp_path / "it2" / "runs").mkdir(parents=True)
    with pytest.raises(ValueError, match="share no"):
        compare_iterations(tmp_path, 1, 2)


def test_rollout_grid_records_the_rollouts_decode(tmp_path):
    """A generate-verbatim iteration executes what the agent writes (its data then holds failed actions); the
    default (score) leaves the grid as earlier iterations wrote it."""
    from workbench.eval.sweep import load_grid

    verbatim = rollout_grid(tmp_path / "v.yaml", str(tmp_path / "runs"), "smollm2-135m-alfworld-v2", 2, 200,
                            per_layout="2", dtype="bfloat16", decode="generate-verbatim")
    assert {c.decode for c in load_grid(verbatim).configs} == {"generate-verbatim"}
    scored = rollout_grid(tmp_path / "s.yaml", str(tmp_path / "runs2"), "smollm2-135m-alfworld-v2", 2, 200,
                          per_layout="2")
    assert "decode" not in scored.read_text() and {c.decode for c in load_grid(scored).configs} == {"score"}


def test_dagger_labels_the_state_after_a_failed_action(expert):
    """A written command ALFWorld rejects leaves the state as it was: the expert's answer is the one it had."""
    plan = expert.actions()
    adm = expert.meta["admissible"]
    steps = [expert.steps[0], Step(observation=expert.steps[1].observation, action="go to desk 99"),
             Step(observation="Nothing happens.", action=plan[1])]
    meta = {"steps": [{"admissible": adm[0]}, {"admissible": adm[1]}, {"admissible": adm[1]}],
            "final_observation": expert.steps[2].observation}
    traj = expert.model_copy(update={"steps": tuple(steps), "meta": meta, "source": "agent:v2"})
    labels = label_trajectory(traj, plan)
    assert labels == [plan[0], plan[1], plan[1]]
    rep = label_report([traj.model_copy(update={"meta": {**meta, "labels": labels}})])
    assert rep["failed_actions"] == 1 and rep["no_answer"] == 0


@pytest.mark.game
def test_a_verbatim_dagger_iteration_holds_failed_actions(tiny_model_dir, tmp_path):
    """Rolled out with decode generate-verbatim, a (tiny, random) agent's written commands are executed as written:
    ALFWorld rejects them, and the labelled data holds those failed actions with the expert's answer after them."""
    from workbench.training.dagger import label_iteration, run_rollouts

    run_rollouts(tmp_path, 0, str(tiny_model_dir), n_games=2, max_steps=3, decode="generate-verbatim")
    assert "decode: generate-verbatim" in (tmp_path / "it0" / "grid.yaml").read_text()
    report = label_iteration(tmp_path, 0)
    assert report["episodes"] == 2 and report["failed_actions"] > 0 and report["no_answer"] < 0.5
