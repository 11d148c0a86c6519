"""The band-switch causal test: one item moved at a recorded state, the same state re-scored."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from workbench.agents.loop import Agent
from workbench.envs.memory_base import expert_trajectories_for
from workbench.methods.arbiter import ArbiterPolicy
from workbench.methods.arbiter.assembly import block_text
from workbench.studies.band_switches import band_switch_effects, summarize_band_switches
from workbench.training.layouts import task_of

sys.path.insert(0, str(Path(__file__).parents[2] / "agents"))  # rescore_tiny: the planted memory-copying model
from rescore_tiny import ANSWER, PLACES, ToyWorkingMemory, build_copy_lm, episode  # noqa: E402


@pytest.fixture(scope="module")
def expert():
    return next(e for e in expert_trajectories_for("valid_unseen") if e.task_type == "clean")


def test_counterfactual_moves_one_item_and_leaves_the_policy_as_it_was(expert):
    pol = ArbiterPolicy(budget=500)
    pol.begin(task_of(expert), expert.goal, expert.initial_observation)
    for k in range(3):
        block = pol.memory(k, list(expert.steps[:k]))
        pol.observe(expert.steps[k], expert.steps[k + 1].observation)
    block = pol.memory(3, list(expert.steps[:3]))
    shown = {p.item: p.band for p in block.working_memory if p.kind == "wm_item"}
    focal = next(i for i, b in shown.items() if b == "F")
    before = (dict(pol._bands), pol.store.items())
    cf = pol.counterfactual({focal: "A"})
    moved = {p.item: p.band for p in cf.working_memory if p.kind == "wm_item"}
    assert moved[focal] == "A" and {i: b for i, b in moved.items() if i != focal} == {
        i: b for i, b in shown.items() if i != focal}
    assert focal not in {p.item for p in pol.counterfactual({focal: "H"}).working_memory if p.item}
    assert pol.counterfactual({}).working_memory == block.working_memory  # no change, same block
    assert (dict(pol._bands), pol.store.items()) == before and pol.memory(3, list(expert.steps[:3])) is block
    assert cf.record["wm"]["o200k"] <= 500 and block_text(cf.working_memory) != block_text(block.working_memory)
    with pytest.raises(KeyError, match="no active item"):
        pol.counterfactual({"Z9": "F"})


def test_band_switch_effects_move_the_arbiters_items_through_its_own_reassembly(tiny_lm, expert):
    agent = Agent.from_model(tiny_lm)
    rows = band_switch_effects(agent, ArbiterPolicy(budget=500), expert, expert.meta["admissible"], steps=[2, 3],
                               per_transition=2)
    scored = [r for r in rows if not r["noop"]]
    assert scored and {r["transition"] for r in scored} >= {"F->A", "A->H"}
    assert {r["step"] for r in rows} == {2, 3} and len({(r["step"], r["item"]) for r in rows}) == len(rows)
    for r in scored:
        assert 0 <= r["p"] <= 1 and 0 <= r["p_cf"] <= 1 and r["chosen"] in expert.meta["admissible"][r["step"]]
    summary = summarize_band_switches(rows)
    assert summary[f"all|{scored[0]['transition']}"]["n"] >= 1


class _ToyArbiter(ToyWorkingMemory):
    """The planted model's toy working memory as band_switch_effects reads a MemArbiter policy: each step's item
    rows ``[id, bank, gate band, shown band, eta, transition]`` in the block's record, and the ids it may move."""

    ETAS = {"R1": 0.9, "R2": 0.8, "E1": 0.7, "E2": 0.6}

    @property
    def step_item_ids(self) -> set[str]:
        return {i for _, i, *_ in self.items}

    def memory(self, step, history):
        rows = [[i, bank, band, band, self.ETAS[i], f"{band}->{band}"] for bank, i, _, _, band in self.items]
        return replace(super().memory(step, history), record={"arbiter": {"items": rows}})


def test_band_switches_find_the_focal_answer_item_on_the_planted_model():
    """Moving the item that names the answer out of focus (F->A: its ambient text names no place) takes the
    planted head's copy away: p(answer) falls and the choice flips; moving the items that name nothing barely
    moves it."""
    agent = Agent.from_model(build_copy_lm())
    rows = band_switch_effects(agent, _ToyArbiter(), episode(), [PLACES] * 3, steps=[1], per_transition=2)
    by = {(r["transition"], r["item"]): r for r in rows}
    assert set(by) == {("F->A", "R1"), ("F->A", "E1"), ("A->H", "R2"), ("H->F", "E2")}  # eta order, 2 per transition
    answer = by[("F->A", "R1")]
    assert answer["chosen"] == ANSWER and answer["delta_p"] < -0.3 and answer["flipped"]
    for key in (("F->A", "E1"), ("A->H", "R2"), ("H->F", "E2")):
        assert not by[key]["noop"] and abs(by[key]["delta_p"]) < 0.05 * -answer["delta_p"] and not by[key]["flipped"]
    assert summarize_band_switches(rows)["reference|F->A"]["mean_delta_p"] == answer["delta_p"]


@pytest.mark.game
def test_failure_memory_ablation_rewrites_the_action_without_the_failure_items(tiny_lm, expert, tmp_path,
                                                                               monkeypatch):
    """At a repeated failed command the policy is replayed along the episode and the agent writes again from P_t
    as shown and without the Constraint / Episodic items that record the failure."""
    from workbench.eval.config import RunConfig
    from workbench.memory.trajectory import Step, Trajectory
    from workbench.studies.failure_ablation import (
        FAILURE_ABLATIONS,
        UNQUOTED,
        failure_memory_ablation,
        repeated_failures,
        summarize_failure_ablation,
    )

    bad = "open drawer 99"
    steps = (*expert.steps[:2], Step(observation=expert.steps[2].observation, action=bad),
             Step(observation="Nothing happens.", action=bad), Step(observation="Nothing happens.", action="look"))
    traj = Trajectory(task_id=expert.task_id, task_type=expert.task_type, goal=expert.goal,
                      initial_observation=expert.initial_observation, steps=steps,
                      meta={"final_observation": "Nothing happens."})
    assert repeated_failures(traj) == [3]  # step 4 fails too, but does not repeat step 3's command
    cfg = RunConfig(out=str(tmp_path / "v"), model="tiny", memory="arbiter", budget=500, split="valid_unseen",
                    tasks="all", decode="generate-verbatim")
    import workbench.studies.failure_ablation as generation  # where the study looks generate_action up

    prompts, real = [], generation.generate_action

    def spy(lm, tokens, adm, **kw):
        prompts.append(tiny_lm.tokenizer.decode(tokens))
        return real(lm, tokens, adm, **kw)

    monkeypatch.setattr(generation, "generate_action", spy)
    rows = failure_memory_ablation(tiny_lm, cfg, [traj, expert])  # the expert never repeats a failure: no row
    monkeypatch.setattr(generation, "generate_action", real)
    shown, unquoted = prompts[0], prompts[list(FAILURE_ABLATIONS).index("unquoted")]
    assert bad in shown and bad not in unquoted and UNQUOTED in unquoted  # the items stay, the quote goes
    assert len(rows) == 1 and rows[0]["step"] == 3 and rows[0]["failed"] == bad == rows[0]["recorded"]
    row = rows[0]
    assert all(isinstance(row[v], str) and isinstance(row[f"{v}|repeats"], bool) for v in FAILURE_ABLATIONS)
    assert not row["as shown|noop"] and not row["neither|noop"]  # the failure is in P_t: a constraint, an event
    assert not row["unquoted|noop"]  # P_t quotes the failed command: the unquoted variant rewrites it
    summary = summarize_failure_ablation(rows)
    assert summary["neither"]["states"] == 1 and summary["as shown"]["changed_vs_shown"] == 0

    # kept per episode: a second render reads it (nothing replayed); an episode played again differently is redone
    assert failure_memory_ablation(tiny_lm, cfg, [traj, expert], cache_dir=tmp_path / "a") == rows
    import workbench.agents.policy as policy_module

    def no_replay(*a, **k):
        raise AssertionError("replayed")

    monkeypatch.setattr(policy_module, "replay", no_replay)
    assert failure_memory_ablation(tiny_lm, cfg, [traj, expert], cache_dir=tmp_path / "a") == rows
    other = traj.model_copy(update={"steps": (*steps[:4], Step(observation="Nothing happens.", action="inventory"))})
    with pytest.raises(AssertionError, match="replayed"):
        failure_memory_ablation(tiny_lm, cfg, [other], cache_dir=tmp_path / "a")


@pytest.mark.game
def test_loop_switch_shows_the_hidden_episodic_record_at_a_loop(tiny_lm, expert, tmp_path, monkeypatch):
    """At an A, B, A, B loop of a failed scoring episode, the game and the policy are replayed to the state and it
    is scored again with every hidden Episodic item brought back focal; rows are kept per episode."""
    from workbench.envs.alfworld import ALFWorldEnv
    from workbench.eval.config import RunConfig, select_tasks
    from workbench.memory.trajectory import Step, Trajectory
    from workbench.studies.loop_switch import (
        loop_episodic_switch,
        loop_steps,
        summarize_loop_switch,
    )

    task = {t.task_id: t for t in select_tasks(RunConfig(out="x", tasks="all"))}[expert.task_id]
    env = ALFWorldEnv(max_steps=50)
    try:
        first = env.reset(task)
        a, b = [c for c in first.admissible_commands if c.startswith("go to ")][:2]
        obs, steps = expert.initial_observation, []
        for act in [a, b] * 3:
            steps.append(Step(observation=obs, action=act))
            obs = env.step(act).observation
    finally:
        env.close()
    traj = Trajectory(task_id=expert.task_id, task_type=expert.task_type, goal=expert.goal, success=False,
                      initial_observation=expert.initial_observation, steps=tuple(steps),
                      meta={"final_observation": obs})
    assert loop_steps(traj) == [3, 4, 5] and loop_steps(expert) == []
    cfg = RunConfig(out=str(tmp_path / "r"), model="tiny", memory="arbiter", budget=500, split="valid_unseen",
                    tasks="all")
    rows = loop_episodic_switch(tiny_lm, cfg, [traj, expert])  # the expert succeeded: no row
    assert len(rows) == 1
    row = rows[0]
    assert (row["step"], row["loop"], row["recorded"]) == (3, [a, b], b)
    assert row["switched"] and all(i.startswith("E") for i in row["switched"])  # the loop's events were hidden
    assert not row["noop"] and 0 <= row["p"] <= 1 and 0 <= row["p_cf"] <= 1
    assert row["leaves_loop"] == (row["cf_choice"] not in (a, b))
    summary = summarize_loop_switch(rows)
    assert (summary["states"], summary["with_hidden_episodic"]) == (1, 1)

    assert loop_episodic_switch(tiny_lm, cfg, [traj], cache_dir=tmp_path / "c") == rows
    import workbench.agents.policy as policy_module

    def no_replay(*a, **k):
        raise AssertionError("replayed")

    monkeypatch.setattr(policy_module, "replay", no_replay)
    assert loop_episodic_switch(tiny_lm, cfg, [traj], cache_dir=tmp_path / "c") == rows  # read, not replayed
    with pytest.raises(ValueError, match="decodes 'generate-verbatim', expected 'score'"):
        loop_episodic_switch(tiny_lm, RunConfig(out="x", model="tiny", memory="arbiter", budget=500,
                                                decode="generate-verbatim"), [traj])


@pytest.mark.game
def test_first_step_ablation_scores_step_0_without_each_bank_without_items_and_as_react(tiny_lm, expert, tmp_path,
                                                                                      monkeypatch):
    """Where a working-memory episode's first action differs from the action agent alone's, step 0 is replayed
    and scored with each bank left out, with no item and as the ReAct prompt; the reference is read each time."""
    from workbench.agents.policy import MemoryBlock
    from workbench.eval.config import RunConfig, select_tasks
    from workbench.memory.trajectory import Step, Trajectory
    from workbench.studies.first_step_ablation import (
        first_step_ablation,
        first_step_edits,
        summarize_first_step_ablation,
    )

    task = {t.task_id: t for t in select_tasks(RunConfig(out="x", tasks="all"))}[expert.task_id]
    cfg = RunConfig(out=str(tmp_path / "r"), model="tiny", memory="arbiter", budget=500, split="valid_unseen",
                    tasks="all")
    other = "inventory" if expert.steps[0].action != "inventory" else "look"
    react = Trajectory(task_id=expert.task_id, task_type=expert.task_type, goal=expert.goal, success=False,
                       initial_observation=expert.initial_observation,
                       steps=(Step(observation=expert.initial_observation, action=other),))
    same = react.model_copy(update={"steps": expert.steps[:1]})
    assert first_step_ablation(tiny_lm, cfg, [expert], [same]) == []  # the same first action: nothing to explain
    rows = first_step_ablation(tiny_lm, cfg, [expert], [react], cache_dir=tmp_path / "c")
    assert len(rows) == 1
    row = rows[0]
    assert (row["recorded"], row["react_first"], row["success"]) == (expert.steps[0].action, other, expert.success)
    from workbench.agents.rescore import apply_edits, state_at
    from workbench.eval.config import policy_for

    state = state_at(policy_for(cfg), task, expert, 0, expert.meta["admissible"][0])
    variants = {name: apply_edits(Agent.from_model(tiny_lm), state, edits).block
                for name, edits in first_step_edits(state).items()}
    shown = {p.bank for p in state.block.working_memory if p.kind == "wm_item"}
    assert set(variants) == {"as shown", "no items", "react"} | {f"no {b}" for b in shown}
    assert "goal" in shown and "react" in row and all(row[k] for k in variants)
    assert variants["as shown"] == state.block
    assert [p.kind for p in variants["no items"].working_memory] == ["wm_open", "wm_close"]
    assert variants["react"] == MemoryBlock() and "goal" not in {p.bank for p in variants["no goal"].working_memory}
    summary = summarize_first_step_ablation(rows)
    assert summary.loc["react|all", "states"] == 1
    assert summary.loc["as shown|all", "keeps"] in (0.0, 1.0)

    import workbench.agents.policy as policy_module

    def no_replay(*a, **k):
        raise AssertionError("replayed")

    monkeypatch.setattr(policy_module, "replay", no_replay)
    again = first_step_ablation(tiny_lm, cfg, [expert], [react.model_copy(update={"steps": (Step(
        observation=expert.initial_observation, action="look" if other == "inventory" else "inventory"),)})],
        cache_dir=tmp_path / "c")  # read from the cache, with the reference's first action read again
    assert again[0]["react_first"] != other and {k: v for k, v in again[0].items() if k != "react_first"} == \
        {k: v for k, v in row.items() if k != "react_first"}
