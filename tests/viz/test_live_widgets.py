"""The live widgets in-process (no browser): every number they show is the library's, a bad request is a message
and leaves the session as it was, and the failure browser opens an episode at the step it names. Real ALFWorld
games, a tiny random Llama by path; the actions run in the caller's thread (background=False)."""

from __future__ import annotations

import json
import os

import pytest

from workbench.agents.edits import SetBand
from workbench.eval.failures import failure_findings
from workbench.memory.trajectory import Step, Trajectory
from workbench.models import load_model

pytestmark = [pytest.mark.integration, pytest.mark.game]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from workbench.viz import live

    lm = load_model(str(tiny_model_dir))
    live._MODELS[(str(tiny_model_dir), "float32")] = lm
    return str(tiny_model_dir), lm


def test_the_player_steps_and_its_panel_shows_the_librarys_rescore(tiny):
    from workbench.viz.live import agent_player

    path, lm = tiny
    p = agent_player(path, memory="arbiter", options={"budget": 500}, dtype="float32", background=False,
                     heads=[(0, 0), (1, 1)])
    assert p.session is not None and "step 0" in p.status.value
    for k in range(1, 4):
        p.step_btn.click()
        assert f"<b>step {k}</b>" in p.status.value and "played" in p.status.value
    assert p.dist.value.count("<tr>") > 1 and "live-c" in p.c.value and "live-prompt" in p.prompt.value
    items = [c for c in p._controls if getattr(c, "kind", None) == "item"]
    assert items, "an arbiter state holds items"
    shown = {row[0]: row[3] for row in p.session.state.block.record["arbiter"]["items"]}
    ctl = items[0]
    band = "A" if shown[ctl.item] != "A" else "F"
    ctl.value = band  # the panel re-scores at once
    r = p.last_rescore
    lib = p.session.rescore([SetBand(ctl.item, band)])
    assert r == lib and f"{lib.delta_p:+.6f}" in p.rescored.value and f"{lib.tv:.6f}" in p.rescored.value
    exact = p.session.rescore([SetBand(ctl.item, band)], exact=True)  # the studies' empty-cache scoring
    assert r.delta_p == pytest.approx(exact.delta_p, abs=1e-5) and r.tv == pytest.approx(exact.tv, abs=1e-5)
    step = p.session.step_index
    p.fork_btn.click()  # continue from here with the band switched
    assert p.session.step_index == step and p.session.edits == (SetBand(ctl.item, band),)
    assert "fork" in p.progress.value


def test_a_bad_edit_is_a_message_and_the_session_is_unchanged(tiny):
    from workbench.viz.live import agent_player

    path, _ = tiny
    p = agent_player(path, memory="arbiter", options={"budget": 500}, dtype="float32", background=False)
    heads = next(c for c in p._controls if getattr(c, "kind", None) == "heads")
    heads.value = "L99.H0"  # no such layer
    assert "live-error" in p.rescored.value and "L99" not in p.status.value
    heads.value = "nonsense"
    assert "L&lt;layer&gt;.H&lt;head&gt;" in p.rescored.value
    assert p.session.step_index == 0
    p.options.value = "{not json"
    p.load_btn.click()
    assert "live-error" in p.status.value and "options" in p.status.value and p.session.step_index == 0


def test_failure_findings_name_the_first_abab_step():
    acts = ["look", "go to a", "go to b", "go to a", "go to b", "take x from b", "put x in/on b"]
    t = Trajectory(task_id="t", task_type="pick", goal="g", steps=tuple(Step(observation="o", action=a) for a in acts),
                   success=False)
    got = {f.mode: f.step for f in failure_findings(t, max_steps=7)}
    assert got["oscillation"] == 1 and got["put_back"] == 5
    assert got["step_limit_loop"] == 6  # no repeating tail of 8 steps: the last new action
    loop = ["look", "open a", "go to b", "go to c", "go to b", "go to c", "open a"] + ["go to b", "go to c"] * 5
    obs = ["o"] * len(loop)
    obs[3] = "Nothing happens."  # the answer to loop[2]
    t = Trajectory(task_id="t", task_type="pick", goal="g", success=False,
                   steps=tuple(Step(observation=o, action=a) for o, a in zip(obs, loop)))
    got = {f.mode: f.step for f in failure_findings(t, max_steps=len(loop))}
    assert got["step_limit_loop"] == 4  # from step 4 every action is one of the 8 before it
    assert got["failed_command"] == 2 and got["oscillation"] == 2
    assert "step_limit_loop" not in {f.mode for f in failure_findings(t, max_steps=50)}  # not at its limit


def test_the_failure_browser_opens_an_episode_at_its_step(tiny, tmp_path):
    from workbench.eval.config import RunConfig
    from workbench.eval.run import run
    from workbench.eval.run_folder import read_episodes
    from workbench.viz.live import failure_browser

    path, lm = tiny
    cfg = RunConfig(out=str(tmp_path / "run"), model=lm.name, tasks="0:3", memory="none", max_steps=8,
                    teacher_forcing=False, dtype="float32")
    run(cfg, lm=lm, progress=False)
    found = [f for t in read_episodes(cfg.out) for f in failure_findings(t, 8)]
    if not found:
        pytest.skip("the random model's episodes show no failure mode")
    box = failure_browser(cfg.out, model=lm, background=False)
    button = box.children[2].children[0]
    f = button.finding
    button.click()
    assert box.player.session.step_index == f.step and f"<b>step {f.step}</b>" in box.player.status.value
    assert "reproduced" in box.children[3].value


def test_run_in_the_background_stops_at_the_next_step_and_the_session_stays_whole(tiny):
    import time

    from workbench.viz.live import agent_player

    path, _ = tiny
    p = agent_player(path, memory="traj", dtype="float32", heads=[(0, 0)])  # loaded in this thread
    assert p.session.episode.limit == 50  # a random model rarely wins: Run would play all 50 steps
    p.run_btn.click()  # a thread: the comm handler returns at once
    time.sleep(1.0)
    p.stop_btn.click()
    p.worker.thread.join(60)
    s = p.session
    assert not p.worker.busy and not p.run_btn.disabled
    assert len(s.played) == s.step_index and len(s.trajectory().steps) == s.step_index  # whole steps only
    if not s.episode.won:
        assert not s.done and s.step_index < s.episode.limit  # stopped early, between two whole steps


def test_a_run_folder_of_another_model_is_a_message(tiny, tmp_path, tiny_model_dir):
    from workbench.eval.config import RunConfig
    from workbench.eval.run import run
    from workbench.viz.live import failure_browser

    _, lm = tiny
    cfg = RunConfig(out=str(tmp_path / "run"), model=lm.name, tasks="0:2", memory="none", max_steps=8,
                    teacher_forcing=False, dtype="float32")
    run(cfg, lm=lm, progress=False)
    other = load_model(str(tiny_model_dir), dtype="bfloat16")
    try:
        box = failure_browser(cfg.out, model=other, background=False)
    except ValueError as e:  # no failure mode in these two episodes: nothing to click
        pytest.skip(str(e))
    box.children[2].children[0].click()
    assert "live-error" in box.children[3].value and "played by" in box.children[3].value
    assert box.player.session is None


def test_a_reminder_over_the_budget_is_a_message(tiny):
    from workbench.viz.live import agent_player

    path, _ = tiny
    p = agent_player(path, memory="traj", dtype="float32", background=False)
    box = next(c for c in p._controls if getattr(c, "kind", None) == "reminder")
    box.value = "go to the fridge now. " * 200
    assert "live-error" in p.rescored.value and "over the budget of 512" in p.rescored.value
    box.value = "Open the fridge before you look inside."
    assert p.last_rescore is not None and "ReplaceReminder" in p.rescored.value


def test_the_player_plays_scienceworld_and_closes_the_session_it_replaces(tiny):
    """A ScienceWorld task id plays ScienceWorld (its tasks listed by variation, its agent's constrained decode);
    a memory method defaults to the served LLM there; Load / Reset closes the session it replaces (its JVM)."""
    from workbench.viz.live import agent_player

    path, lm = tiny
    idle = agent_player(path, "test/find-animal/225", memory="arbiter", dtype="float32", load=False)
    assert idle.env == "scienceworld" and json.loads(idle.options.value)["backend"] == "llama-server"
    with pytest.raises(ValueError, match="not in scienceworld's test@1.*split="):
        agent_player(path, "test/find-animal/250", memory="none", split="test@1", load=False)
    p = agent_player(path, "test/find-animal/225", memory="none", dtype="float32", background=False, heads=[(0, 0)])
    try:
        assert p.session.env_name == "scienceworld" and p.session.agent.decode == "constrained"
        assert ("variation 225", "test/find-animal/225") in p.task.options and p.task_type.value == "find-animal"
        p.step_btn.click()
        assert "<b>step 1</b>" in p.status.value
        first, pid = p.session, p.session.env.pid
        p.load_btn.click()  # a new session of the same task: the first one's JVM is stopped
        assert p.session is not first and first.env.pid is None and p.session.step_index == 0
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        p.session.close()
