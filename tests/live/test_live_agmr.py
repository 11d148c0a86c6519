"""AGMR driven live: one attempt at a time against a working copy that is a refine folder; the verdict's record
and an accepted edit land in the copy exactly as `workbench refine` writes them, the source never changes, a stop
leaves the copy as it was. Real ALFWorld games, a tiny random Llama by path (its verifications fail, so the accept
path wins the candidate's re-execution through an environment that reports the game won)."""

from __future__ import annotations

import dataclasses

import pytest

from workbench.envs.alfworld import load_alfworld_tasks
from workbench.live import Interrupted, LiveRefinement, SessionError
from workbench.memory.base import MemoryBase
from workbench.methods.agmr.refine import Attempted, Executed
from workbench.methods.agmr.refine_config import RefineConfig
from workbench.methods.agmr.refine_folder import load_executions, load_log
from workbench.models import load_model

pytestmark = [pytest.mark.integration, pytest.mark.game]


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    return load_model(str(tiny_model_dir))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A small base of valid_train experts (the default base's entries for two task types)."""
    from workbench.envs.memory_base import default_memory_base

    root = tmp_path_factory.mktemp("src") / "base"
    base = MemoryBase(root)
    base.add_many([e for e in default_memory_base() if e.task_type in ("pick", "look")])
    return root


def _config(**kw):
    return RefineConfig(heads=((0, 0), (1, 1)), retriever="bm25", max_steps=3, **kw)


def _task():
    return next(t for t in load_alfworld_tasks("valid_seen") if t.task_type == "pick")


def test_a_discarded_task_is_logged_as_workbench_refine_logs_it(lm, source, tmp_path):
    digest = MemoryBase(source).digest()
    r = LiveRefinement(lm, tmp_path / "copy", source=source, config=_config(max_attempts=2))
    first = r.begin(_task())
    assert isinstance(first, Executed) and not first.execution.trajectory.success  # a random model fails
    a1 = r.next()
    assert isinstance(a1, Attempted) and a1.before.id == first.execution.id and r.verdict is None
    a2 = r.next()  # the K-th: the verdict comes with it
    assert a2.last and r.verdict is not None and r.verdict.commit is None
    assert r.record.outcome in ("discarded", "error") and [x.task_id for x in load_log(tmp_path / "copy")] == [
        _task().task_id]
    assert [e.id for e in load_executions(tmp_path / "copy")] == list(r.record.executions)
    with pytest.raises(SessionError, match="no verified edit"):
        r.accept()
    with pytest.raises(SessionError, match="refined in this copy already"):
        r.begin(_task())
    assert MemoryBase(source).digest() == digest  # the source is never written


def test_an_accepted_edit_is_a_commit_with_refines_provenance_and_rolls_back(lm, source, tmp_path, monkeypatch):
    digest = MemoryBase(source).digest()
    r = LiveRefinement(lm, tmp_path / "copy", source=source, config=_config(max_attempts=3))
    env = r.env._env
    plays = {"n": 0}
    real_reset, real_step = env.reset, env.step

    def reset(task):
        plays["n"] += 1
        return real_reset(task)

    def step(action):  # the first execution plays the real game; the candidate's re-execution is won at once
        out = real_step(action)
        return dataclasses.replace(out, done=True, won=True, reward=1.0) if plays["n"] >= 2 else out

    monkeypatch.setattr(env, "reset", reset)
    monkeypatch.setattr(env, "step", step)
    first = r.begin(_task())
    if first.execution.trajectory.success:
        pytest.skip("the random model won the first execution")
    a = r.next()
    if a.attempt.error:
        pytest.skip(f"the offline refiner made no edit here: {a.attempt.error}")
    assert a.last and a.verification.trajectory.success and r.verdict.commit is not None
    entry_id = first.entry.entry_id
    copy = MemoryBase(tmp_path / "copy")
    assert copy.get(entry_id).version == first.entry.version  # nothing committed before the user accepts
    rec = r.accept()
    assert rec.outcome == "committed" and rec.committed_version == first.entry.version + 1
    last = MemoryBase(tmp_path / "copy").history(entry_id)[-1]
    assert last.provenance["method"] == "agmr" and last.provenance["refinement_task"] == _task().task_id
    assert last.provenance["verification"] == [a.verification.id]
    assert [x.outcome for x in load_log(tmp_path / "copy")] == ["committed"]
    back = r.roll_back()
    assert back.segments == first.entry.segments and back.version == rec.committed_version + 1
    with pytest.raises(SessionError, match="rolled back already"):
        r.roll_back()  # once: a second press would put the edit back
    assert MemoryBase(source).digest() == digest


def test_a_task_that_committed_nothing_has_nothing_to_roll_back(lm, source, tmp_path):
    r = LiveRefinement(lm, tmp_path / "copy", source=source, config=_config(max_attempts=1))
    r.begin(_task())
    r.run()
    assert r.record.outcome != "committed"
    with pytest.raises(SessionError, match="committed no edit"):
        r.roll_back()


def test_a_second_refinement_on_the_same_copy_retires_the_first(lm, source, tmp_path):
    first = LiveRefinement(lm, tmp_path / "copy", source=source, config=_config())
    LiveRefinement(lm, tmp_path / "copy", source=source, config=_config())  # the cell ran again
    with pytest.raises(SessionError, match="another LiveRefinement opened this working copy"):
        first.begin(_task())


def test_a_stop_interrupts_the_execution_and_the_next_begin_drops_it(lm, source, tmp_path):
    seen = []
    r = LiveRefinement(lm, tmp_path / "copy", source=source, config=_config(),
                       on_progress=lambda text: (seen.append(text), r.stop()))
    with pytest.raises(Interrupted):
        r.begin(_task())  # stopped after the first step of the first execution
    assert seen == ["execution 0: step 1"] and r.verdict is None
    with pytest.raises(SessionError, match="begin"):
        r.next()
    r.on_progress = lambda text: None
    first = r.begin(_task())  # the unfinished task's leftovers are dropped: its ids are free again
    assert first.execution.id.endswith("#0") and not load_log(tmp_path / "copy")


def test_a_copy_is_never_the_base_it_copies(lm, source):
    with pytest.raises(ValueError, match="must not be the base it copies"):
        LiveRefinement(lm, source, source=source, config=_config())
