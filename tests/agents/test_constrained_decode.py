"""The ``constrained`` decode in the episode loop: the agent writes an admissible action along the trie (a beam of
BEAM), records what it wrote and how; with a beam as wide as the candidates it acts as ``score`` does."""

import pytest

from tests.attention.agent_tiny import ENTRY, TASK, FixedEntry, PlanEnv, build_agent_lm
from workbench.agents.loop import BEAM, Agent
from workbench.eval.config import RunConfig


@pytest.fixture(scope="module")
def lm():
    return build_agent_lm()


def test_a_constrained_episode_plays_admissible_actions_and_records_how(lm):
    agent = Agent.from_model(lm, decode="constrained")
    traj = agent.run(PlanEnv(max_steps=4), TASK, FixedEntry(ENTRY)).trajectory
    assert traj.n_steps == 4
    for rec, step in zip(traj.meta["steps"], traj.steps):
        assert rec["n_finished"] >= 1 and rec["forwards"] >= 1 and 0 < rec["p_action"] <= 1
        assert rec["top"][0][0] == step.action
        assert "score" not in traj.meta  # ALFWorld-like envs have no graded score


def test_a_beam_as_wide_as_the_candidates_acts_as_score_does(lm):
    scored = Agent.from_model(lm).run(PlanEnv(max_steps=5), TASK, FixedEntry(ENTRY)).trajectory
    wide = Agent.from_model(lm, decode="constrained", beam=64).run(PlanEnv(max_steps=5), TASK, FixedEntry(ENTRY)).trajectory
    assert [s.action for s in wide.steps] == [s.action for s in scored.steps]
    for a, b in zip(wide.meta["steps"], scored.meta["steps"]):
        assert a["p_action"] == pytest.approx(b["p_action"], abs=1e-4)
    assert BEAM == 16


def test_runs_name_their_benchmark_and_refuse_what_it_cannot_do(tmp_path):
    with pytest.raises(ValueError, match="unknown benchmark 'webshop'"):
        RunConfig(out=str(tmp_path / "a"), env="webshop")
    with pytest.raises(ValueError, match="no-teacher-forcing"):
        RunConfig(out=str(tmp_path / "b"), env="scienceworld", split="test@10", teacher_forcing=True)
    sw = RunConfig(out=str(tmp_path / "b"), env="scienceworld", task_types=("boil",))  # ScienceWorld's defaults
    assert (sw.split, sw.decode, sw.teacher_forcing, sw.max_steps) == ("test@10", "constrained", False, 300)
    alf = RunConfig(out=str(tmp_path / "b"))  # ALFWorld's, as always
    assert (alf.split, alf.decode, alf.teacher_forcing, alf.max_steps) == ("valid_unseen", "score", True, 50)
    with pytest.raises(ValueError, match="task_types \\['boil'\\]: alfworld has no such type"):
        RunConfig(out=str(tmp_path / "c"), task_types=("boil",))
    with pytest.raises(ValueError, match="unknown simplification"):
        RunConfig(out=str(tmp_path / "d"), env="scienceworld:hard", teacher_forcing=False)
    cfg = RunConfig(out=str(tmp_path / "e"), env="scienceworld", split="test@10", teacher_forcing=False,
                    task_types=("boil",), decode="constrained", max_steps=100)
    assert cfg.identity()["env"] == "scienceworld"


def test_a_grid_names_its_benchmark(tmp_path):
    from workbench.eval.sweep import GridError, load_grid

    grid = tmp_path / "g.yaml"
    grid.write_text(f"out: {tmp_path / 'o'}\ndefaults: {{env: scienceworld, split: test@10, teacher_forcing: false, "
                    "decode: constrained, task_types: [find-animal]}\nconfigurations:\n  - {name: react, memory: none, "
                    "tasks: all}\n")
    g = load_grid(grid)
    assert [c.env for c in g.configs] == ["scienceworld"]
    grid.write_text(f"out: {tmp_path / 'o'}\ndefaults: {{env: 'scienceworld:hard', teacher_forcing: false}}\n"
                    "configurations:\n  - {name: react, memory: none}\n")
    with pytest.raises(GridError, match="key 'env': .*unknown simplification"):
        load_grid(grid)
    grid.write_text(f"out: {tmp_path / 'o'}\ndefaults: {{env: scienceworld, split: test@10, teacher_forcing: false, "
                    "task_types: [find-animal]}\nconfigurations:\n  - {name: react, memory: none, tasks: '0:11'}\n")
    with pytest.raises(GridError, match="past the split's 10 tasks"):
        load_grid(grid)


def test_a_scienceworld_run_records_the_digest_of_the_default_base_it_reads(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from workbench.eval import run_folder
    from workbench.memory.base import MemoryBase
    from tests.attention.agent_tiny import expert

    base = MemoryBase(tmp_path / "base")
    base.build_from_trajectories([expert("train/find-animal/1")])
    monkeypatch.setattr(run_folder, "benchmark", lambda env: SimpleNamespace(default_memory_base=lambda e: str(base.root)))
    traj = RunConfig(out=str(tmp_path / "t"), env="scienceworld", split="test@1", memory="traj", teacher_forcing=False)
    none = RunConfig(out=str(tmp_path / "n"), env="scienceworld", split="test@1", memory="none", teacher_forcing=False)
    assert run_folder.memory_base_digest(traj) == base.digest()
    assert run_folder.memory_base_digest(none) is None
    assert run_folder.memory_base_digest(RunConfig(out=str(tmp_path / "a"), memory="traj")) is None  # ALFWorld's


def test_an_agent_for_a_benchmark_takes_its_instructions_budget_and_decode(lm):
    from workbench.envs.scienceworld import PROMPT_TOKENS

    sw = Agent.for_benchmark(lm, "scienceworld")
    alf = Agent.for_benchmark(lm, "alfworld")
    assert sw.decode == "constrained" and alf.decode == "score"
    assert sw.builder.max_tokens == min(lm.n_ctx, PROMPT_TOKENS) - 48 and alf.builder.max_tokens == lm.n_ctx - 48
    text = lm.tokenizer.decode(sw.builder._header)
    assert "elementary science experiments" in text
    assert Agent.for_benchmark(lm, "scienceworld", decode="score").decode == "score"


def test_a_scienceworld_policy_reads_its_benchmarks_default_base_and_resume_refuses_a_rebuilt_one(tmp_path, monkeypatch):
    from tests.attention.agent_tiny import expert
    from workbench.eval import config as config_mod
    from workbench.eval import run_folder
    from workbench.memory.base import MemoryBase

    base = MemoryBase(tmp_path / "base")
    base.build_from_trajectories([expert("train/find-animal/1")])
    real = config_mod.benchmark

    def fake(env):
        from dataclasses import replace

        b = real(env)
        return replace(b, default_memory_base=lambda e: str(base.root)) if env != "alfworld" else b

    monkeypatch.setattr(config_mod, "benchmark", fake)
    monkeypatch.setattr(run_folder, "benchmark", fake)
    cfg = RunConfig(out=str(tmp_path / "run"), env="scienceworld", split="test@1", memory="traj",
                    task_types=("find-animal",), retriever="bm25")
    policy = config_mod.policy_for(cfg)
    assert policy.retriever.base.root == base.root
    run_folder.write_run_config(cfg)
    assert run_folder.check_resume(cfg, resume=True) == set()
    base.build_from_trajectories([expert("train/find-animal/2")])  # the default base rebuilt with other content
    with pytest.raises(ValueError, match=r"memory base \(the default\) changed since this run began"):
        run_folder.check_resume(cfg, resume=True)
