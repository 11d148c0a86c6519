"""A live session is the batch episode played a decision at a time; looking at a state (re-scoring it) does not
move the decisions that follow; bad requests are typed errors that leave the session as it was. Real ALFWorld
games, a tiny random Llama by path."""

from __future__ import annotations

import pytest

from workbench.agents.edits import DropItem, EditError
from workbench.agents.loop import Agent
from workbench.agents.policy import build_policy
from workbench.envs.alfworld import ALFWorldEnv, load_alfworld_tasks
from workbench.live import Session, SessionError
from workbench.models import load_model

pytestmark = [pytest.mark.integration, pytest.mark.game]


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    return load_model(str(tiny_model_dir))


@pytest.fixture(scope="module")
def task():
    return load_alfworld_tasks("valid_unseen")[0]


def test_a_session_stepped_to_its_end_is_the_batch_episode(lm, task):
    batch = Agent.from_model(lm).run(ALFWorldEnv(max_steps=5), task, build_policy("traj", "bm25"), max_steps=5)
    s = Session(lm, task, memory="traj", retriever="bm25", max_steps=5, heads=[(0, 0), (1, 2)])
    played = s.run()
    assert s.done and len(played) == batch.trajectory.n_steps
    # actions, observations, records, p_action: the head capture watches and changes nothing
    assert s.trajectory().model_dump() == batch.trajectory.model_dump()
    spans = s.attention()
    assert {"task", "observation", "action", "memory_header"} <= {r["kind"] for r in spans}
    assert sum(r["mass"] for r in spans) == pytest.approx(1.0, abs=1e-5)  # the spans tile the prompt
    assert set(spans[0]["by_head"]) == {"L0.H0", "L1.H2"}


def test_looking_at_every_state_does_not_move_the_decisions(lm, task):
    plain = Session(lm, task, memory="traj", retriever="bm25", max_steps=5)
    plain.run()
    looked = Session(lm, task, memory="traj", retriever="bm25", max_steps=5)
    while not looked.done:
        r = looked.rescore([])  # the factual state, scored from an empty cache by the session's second agent
        assert r.tv == 0.0 and r.edited_choice == r.chosen and list(r.candidates) == list(looked.state.candidates)
        played = looked.step()
        assert played.action == r.candidates[r.chosen]  # what the agent played is what the re-score ranks first
    assert looked.trajectory().model_dump() == plain.trajectory().model_dump()


def test_bad_requests_are_typed_errors_and_the_session_is_unchanged(lm, task):
    s = Session(lm, task, memory="traj", retriever="bm25", max_steps=3)
    with pytest.raises(EditError):
        s.rescore([DropItem("no-such-item")])  # a Traj block holds no working-memory items
    with pytest.raises(ValueError, match="not admissible"):
        s.step("fly to the moon")
    assert s.step_index == 0 and not s.played
    s.run()
    with pytest.raises(SessionError, match="episode is over"):
        s.step()
    with pytest.raises(SessionError, match="closest: valid_unseen/"):
        Session(lm, task.task_id[:-3], memory="none")


def test_a_recorded_run_replays_with_the_same_choices_and_p(lm, task, tmp_path):
    from workbench.eval.config import RunConfig
    from workbench.eval.run import run

    cfg = RunConfig(out=str(tmp_path / "run"), model=lm.name, tasks="0:1", memory="traj", retriever="bm25",
                    max_steps=4, teacher_forcing=False)
    run(cfg, lm=lm, progress=False)
    s = Session.from_run(cfg.out, task.task_id, model=lm)
    rows = s.replay()
    assert rows and all(r["same_choice"] for r in rows)
    assert [r["p_action"] for r in rows] == [r["recorded_p_action"] for r in rows]  # bit for bit, same model
    with pytest.raises(SessionError, match="no episode"):
        Session.from_run(cfg.out, "valid_unseen/none", model=lm)


def test_a_fork_replays_to_here_and_plays_on_with_the_edit(lm, task):
    from workbench.agents.edits import ClearMemory

    s = Session(lm, task, memory="traj", retriever="bm25", max_steps=4)
    s.step()
    f = s.fork([ClearMemory()])
    assert f.step_index == 1 and [p.action for p in f.played] == [p.action for p in s.played]
    assert f.state.prompt(f.agent).memory_tokens == 0 < s.state.prompt(s.agent).memory_tokens  # no memory in the fork
    r = s.rescore([ClearMemory()])
    assert f.distribution() == pytest.approx(dict(zip(r.candidates, r.p_edited)))  # the fork decides as re-scored
    f.run()
    assert s.step_index == 1  # the original is untouched
    from workbench.agents.edits import MaskHeads

    with pytest.raises(EditError, match="re-score"):
        s.fork([MaskHeads([(0, 0)])])


def test_a_live_rescore_reuses_the_prefix_and_agrees_with_the_studies_scoring(lm, task):
    """The live path (the state's cached prefix, reused up to the first edited token) gives the same numbers every
    time it is asked, and the empty-cache numbers the studies use to float32 rounding."""
    from workbench.agents.edits import MaskSegments

    s = Session(lm, task, memory="traj", retriever="bm25", max_steps=4)
    s.step()
    edits = [MaskSegments((0,))]
    fast, again = s.rescore(edits), s.rescore(edits)
    cached = s._scorer_agent.scorer.cache.get_seq_length()  # the edited prompt's prefix, built on the state's
    exact = s.rescore(edits, exact=True)
    assert fast == again  # both distributions, TV and choices: the same cached prefix each time
    assert fast.p == pytest.approx(exact.p, abs=1e-5) and fast.p_edited == pytest.approx(exact.p_edited, abs=1e-5)
    assert fast.tv > 0 and fast.chosen == exact.chosen
    assert cached == len(fast.edited_prompt.prefix)


def test_a_fork_of_a_fork_keeps_the_first_forks_edits(lm, task):
    from workbench.agents.edits import MaskSegments, RemoveReminder

    s = Session(lm, task, memory="traj", retriever="bm25", max_steps=4)
    s.step()
    f = s.fork([MaskSegments((0,))])
    f.step()
    g = f.fork([MaskSegments((1,))])
    assert g.edits == (MaskSegments((0,)), MaskSegments((1,))) and g.step_index == 2
    assert g.state.prompt(g.agent).memory_tokens < f.state.prompt(f.agent).memory_tokens  # both masks apply
    with pytest.raises(EditError):
        g.fork([RemoveReminder()])  # no reminder here: refused at the fork point, nothing made


def test_closing_a_session_stops_its_policys_llm_server_and_its_game(lm, task):
    """A policy on the served backend owns a llama.cpp process (~1 GB); a session left open in a kernel, and each
    fork of it, would keep one alive until the kernel dies: close() stops it by its PID."""
    import os

    if os.environ.get("WORKBENCH_NO_SERVER") == "1":
        pytest.skip("WORKBENCH_NO_SERVER=1: real llama.cpp server tests disabled")
    with Session(lm, task, memory="proactive", options={"backend": "llama-server"}, max_steps=2) as s:
        server = s.policy.backend.server
        server.start()
        pid = server.proc.pid
        assert server.alive
    assert not server.alive and server.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert s.env._env is None  # the game is closed too
    with pytest.raises(SessionError, match="session is closed"):
        s.step()
    # a policy the caller made is the caller's: its server outlives the session
    from workbench.agents.policy import build_policy

    mine = build_policy("proactive", backend="llama-server")
    with Session(lm, task, policy=mine, max_steps=2):
        mine.backend.server.start()
    try:
        assert mine.backend.server.alive
    finally:
        mine.backend.close()
