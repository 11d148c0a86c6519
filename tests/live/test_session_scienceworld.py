"""A live session on ScienceWorld: the task id names the benchmark, the agent is built as ScienceWorld's runs build it
(its instructions, prompt budget, constrained decode), a session stepped to its end is the batch episode, and a
re-score can be narrowed to the candidates in question. Real ScienceWorld JVMs, a tiny random Llama by path."""

from __future__ import annotations

import pytest

from workbench.envs.base import Task
from workbench.live import Session, SessionError, find_task
from workbench.live.session import benchmark_of


def test_a_task_id_names_its_benchmark_and_a_wrong_one_names_the_closest():
    assert benchmark_of("test/find-animal/225") == "scienceworld"
    assert benchmark_of("valid_unseen/pick_and_place_simple-Book-None-SideTable-329/trial_T1") == "alfworld"
    t = find_task("test/find-animal/225")
    assert (t.benchmark, t.task_type, t.meta["variation"]) == ("scienceworld", "find-animal", 225)
    assert find_task("test/find-animal/225", ("test@1",)).index != t.index  # its place in the capped split
    with pytest.raises(SessionError, match="closest: test/find-animal/225"):
        find_task("test/find-animl/225")
    with pytest.raises(SessionError, match="not in|no scienceworld task"):
        find_task("dev/find-animal/225", ("dev",))
    with pytest.raises(SessionError, match="expected one of train, dev, test"):
        find_task("test/find-animal/225", ("valid_unseen",), env="scienceworld")


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    from workbench.models import load_model

    return load_model(str(tiny_model_dir))


@pytest.fixture(scope="module")
def task() -> Task:
    return find_task("test/find-animal/225")


def test_a_task_of_one_benchmark_is_refused_under_another(lm, task):
    with pytest.raises(SessionError, match="is a scienceworld task"):
        Session(lm, task, memory="none", env="alfworld")


@pytest.mark.parametrize("memory,options,match", [
    ("arbiter", {}, "offline-alfworld, ALFWorld's deterministic algorithms.*options=\\{'backend'"),
    ("proactive", {}, "offline-alfworld"),
    ("awm", {}, "built for ALFWorld"),
])
def test_a_policy_that_cannot_play_scienceworld_is_refused_before_anything_starts(task, memory, options, match):
    # the model is a name never loaded: the refusal comes first, as a batch run's (RunConfig) does
    with pytest.raises(ValueError, match=match):
        Session("no-such-model", task, memory=memory, options=options)


def test_a_method_with_an_llm_for_its_stages_passes_the_check(task):
    # the check lets it through; what stops it is the model name, which comes after (nothing else started)
    with pytest.raises(Exception) as e:
        Session("no-such-model", task, memory="arbiter", options={"backend": "llama-server"})
    assert "no-such-model" in str(e.value) and "offline-alfworld" not in str(e.value)


@pytest.mark.parametrize("max_steps", [0, -3, 2.5, True])
def test_a_step_limit_must_be_a_whole_number_of_steps(task, max_steps):
    with pytest.raises(ValueError, match="max_steps"):
        Session("no-such-model", task, memory="none", max_steps=max_steps)


@pytest.mark.game
@pytest.mark.integration
def test_a_scienceworld_session_stepped_to_its_end_is_the_batch_episode(lm, task):
    from workbench.agents.loop import Agent
    from workbench.agents.policy import build_policy
    from workbench.envs.benchmarks import make_env

    env = make_env("scienceworld", 3)
    try:
        batch = Agent.for_benchmark(lm, "scienceworld").run(env, task, build_policy("none"), max_steps=3)
    finally:
        env.close()
    with Session(lm, task.task_id, memory="none", max_steps=3) as s:
        assert s.env_name == "scienceworld" and s.agent.decode == "constrained"
        played = s.run()
        assert s.done and len(played) == 3
        assert s.trajectory().model_dump() == batch.trajectory.model_dump()
        assert s.trajectory().meta["score"] == batch.trajectory.meta["score"]
        assert s.env.pid is not None
    assert s.env.pid is None  # the JVM is stopped at the end of the with block
    with pytest.raises(SessionError, match="session is closed"):
        s.run()


@pytest.mark.game
@pytest.mark.integration
def test_a_rescore_narrowed_to_some_candidates_and_clear_memory_on_a_working_memory_block(lm, task):
    from workbench.agents.edits import ClearMemory

    with Session(lm, task, memory="flat-recency", max_steps=4) as s:
        s.step()
        state = s.state
        assert len(state.candidates) > 100  # ScienceWorld's valid actions: why a re-score can be narrowed
        few = [state.candidates[3], state.candidates[0], state.candidates[3]]
        r = s.rescore([ClearMemory()], candidates=few)
        assert r.candidates == (state.candidates[3], state.candidates[0])  # in the order given, once each
        assert sum(r.p) == pytest.approx(1.0) and sum(r.p_edited) == pytest.approx(1.0)
        assert not r.noop and r.prompt.history_span is None  # the working-memory layout shows no history
        assert r.edited_prompt.history_span is not None and r.edited_prompt.memory_tokens == 0
        exact = s.rescore([ClearMemory()], candidates=few, exact=True)
        assert r.p == pytest.approx(exact.p, abs=1e-5) and r.p_edited == pytest.approx(exact.p_edited, abs=1e-5)
        assert s.distribution(few) == pytest.approx(dict(zip(r.candidates, r.p)), abs=1e-6)
        for bad, match in ((["fly to the moon"], "not admissible"), ([], "not admissible"),
                           ("look around", "not one string")):
            with pytest.raises(SessionError, match=match):
                s.rescore([], candidates=bad)
        assert s.step_index == 1  # nothing played by looking
        # the state's prefix is cached once; each candidate set keeps its own factual p, as exact as the first time
        full = s.rescore([ClearMemory()])
        again = s.rescore([ClearMemory()], candidates=few)
        whole = s.rescore([ClearMemory()], exact=True)
        assert full.candidates == state.candidates and again == r
        assert full.p == pytest.approx(whole.p, abs=1e-5) and full.p_edited == pytest.approx(whole.p_edited, abs=1e-5)
        f = s.fork([])  # a fork: a JVM of its own, the same benchmark and decode, the actions replayed
        try:
            assert (f.env_name, f.agent.decode) == ("scienceworld", "constrained")
            assert [p.action for p in f.played] == [p.action for p in s.played]
            assert f.state.candidates == state.candidates and f.env.pid != s.env.pid
        finally:
            f.close()
