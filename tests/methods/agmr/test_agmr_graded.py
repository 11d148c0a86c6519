"""AGMR's graded-reward branch (E.2: a failure-branch edit also commits when the reward rises by at least 0.3): on a
graded benchmark (ScienceWorld's score 0-100 in ``meta.score``) an edit that lifts the score enough is committed
without a success, and one that lifts it too little is not."""

from tests.methods.agmr.agmr_builders import TASK, WRONG, ScriptedRefiner, make_base, record, trajectory
from workbench.methods.agmr.records import Execution, reward


class GradedRefiner(ScriptedRefiner):
    """Script rows ``(success, actions, C rows or None, score)``: each execution's trajectory carries its score."""

    def play(self, task, memory, n, base_version, candidate):
        success, actions, rows, score = self.script.pop(0)
        self.shown.append(memory)
        if rows is None:
            rows = [[1.0 if k == 1 else 0.1] * len(actions) for k in range(len(memory.segments))]
        traj = trajectory(actions, success)
        traj = traj.model_copy(update={"meta": traj.meta | {"score": score}})
        return Execution(id=f"{task.task_id}#{n}", task_id=task.task_id, entry_id=memory.entry_id,
                         base_version=base_version, candidate=candidate, memory=memory, trajectory=traj,
                         utilization=record(rows, actions, success))


def test_reward_reads_a_graded_score():
    t = trajectory(WRONG, False)
    assert reward(t) == 0.0
    assert reward(t.model_copy(update={"meta": {"score": 45}})) == 0.45
    assert reward(t.model_copy(update={"meta": {"score": -100}})) == 0.0
    assert reward(trajectory(WRONG, True)) == 1.0


def test_a_gain_of_at_least_the_threshold_commits_without_success(tmp_path):
    base = make_base(tmp_path)
    r = GradedRefiner(base, [(False, WRONG, None, 10), (False, WRONG, None, 45)])
    rec = r.refine_task(TASK, "put a apple in fridge.")
    assert (rec.branch, rec.outcome, rec.committed_version) == ("failure", "committed", 1)
    assert abs(rec.attempts[-1].reward_gain - 0.35) < 1e-9
    assert not rec.attempts[-1].success


def test_a_smaller_gain_is_not_enough_and_the_edit_is_discarded_after_k_attempts(tmp_path):
    base = make_base(tmp_path)
    r = GradedRefiner(base, [(False, WRONG, None, 10), (False, WRONG, None, 30), (False, WRONG, None, 35),
                             (False, WRONG, None, 39)])
    rec = r.refine_task(TASK, "put a apple in fridge.")
    assert rec.outcome != "committed" and len(rec.attempts) == 3
    assert base.get("valid_train/tomato/t1").version == 0


def test_a_scienceworld_refinement_takes_its_benchmarks_defaults_and_refuses_test_and_offline():
    import pytest

    from workbench.methods.agmr.refine_config import RefineConfig, saved_identity

    c = RefineConfig(env="scienceworld", backend="llama-server")
    assert (c.split, c.weak_rule, c.reward_gain, c.max_attempts) == ("dev@2", "global_capped", 0.3, 3)
    with pytest.raises(ValueError, match="never test"):
        RefineConfig(env="scienceworld", backend="llama-server", split="test@10")
    with pytest.raises(ValueError, match="need an LLM"):
        RefineConfig(env="scienceworld")
    alf = RefineConfig()
    assert (alf.split, alf.weak_rule, alf.max_steps, alf.env) == ("valid_seen", "relative", 50, "alfworld")
    old = {k: v for k, v in alf.identity().items() if k not in ("env", "task_types")}  # saved before the options
    assert saved_identity(old | {"reflector_sees_plan": False}) == alf.identity()
    typed = RefineConfig(env="scienceworld", backend="llama-server", task_types=["find-plant", "boil"])
    assert typed.task_types == ("find-plant", "boil") and typed.identity()["task_types"] == ["find-plant", "boil"]
    with pytest.raises(ValueError, match=r"task_types \['pick'\]: scienceworld has no such type"):
        RefineConfig(env="scienceworld", backend="llama-server", task_types=["pick"])


def test_refinement_statistics_tell_commits_by_reward_gain_from_commits_by_success(tmp_path):
    from workbench.methods.agmr.refine_folder import _committed_by

    base = make_base(tmp_path)
    by_gain = GradedRefiner(base, [(False, WRONG, None, 10), (False, WRONG, None, 45)]).refine_task(
        TASK, "put a apple in fridge.")
    base2 = make_base(tmp_path / "second")
    by_success = GradedRefiner(base2, [(False, WRONG, None, 10), (True, WRONG, None, 100)]).refine_task(
        TASK, "put a apple in fridge.")
    assert (by_gain.outcome, by_success.outcome) == ("committed", "committed")
    assert (_committed_by(by_gain), _committed_by(by_success)) == ("reward_gain", "success")


def test_a_scienceworld_refinement_prompts_its_stages_in_scienceworlds_words(tmp_path, monkeypatch):
    import importlib

    refine_module = importlib.import_module("workbench.methods.agmr.refine")  # the package exports refine()

    seen, real = [], refine_module.run_stage

    def recording(backend, stage, payload, **kw):
        seen.append((stage, kw.get("benchmark")))
        return real(backend, stage, payload, **kw)

    monkeypatch.setattr(refine_module, "run_stage", recording)
    base = make_base(tmp_path)
    r = GradedRefiner(base, [(False, WRONG, None, 10), (False, WRONG, None, 45)])
    object.__setattr__(r.config, "env", "scienceworld")  # its stages still answered by the offline algorithms here
    r.refine_task(TASK, "put a apple in fridge.")
    assert seen and {b for _, b in seen} == {"scienceworld"}
