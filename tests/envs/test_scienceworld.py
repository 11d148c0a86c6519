"""ScienceWorld behind the Environment Protocol: tasks and splits (no JVM), and real episodes in the wheel's JVM
(``game``)."""

import os
import signal
import time

import pytest

from workbench.envs import scienceworld as sw
from workbench.envs.benchmarks import benchmark, default_max_steps, load_tasks, make_env
from workbench.envs.scienceworld import (
    ETO_TYPES,
    LONG_TYPES,
    STEP_LIMITS,
    TASK_TYPES,
    JavaMissingError,
    ScienceWorldEnv,
    SimulatorDiedError,
    load_scienceworld_tasks,
    parse_env_spec,
    parse_split,
    task_of,
)


def test_thirty_types_with_a_step_limit_each_and_etos_where_eto_has_one():
    assert len(TASK_TYPES) == 30 and set(STEP_LIMITS) == set(TASK_TYPES)
    assert len(ETO_TYPES) == 24 and set(ETO_TYPES) <= set(TASK_TYPES)
    assert STEP_LIMITS["boil"] == 100 and STEP_LIMITS["find-animal"] == 15 and STEP_LIMITS["lifespan-longest-lived"] == 10
    # the AGMR paper's E.1: the types with max_steps >= 60, dropped from its SciWorld test set
    assert set(LONG_TYPES) == {"boil", "change-the-state-of-matter-of", "freeze", "melt",
                               "measure-melting-point-known-substance", "grow-fruit", "chemistry-mix"}
    assert all(STEP_LIMITS[t] >= 10 for t in TASK_TYPES)


def test_test_at_10_over_etos_types_is_etos_test_set():
    tasks = load_scienceworld_tasks("test@10", list(ETO_TYPES))
    assert len(tasks) == 211  # ETO's eval_agent/data/sciworld/test_indices.json
    by_type = {}
    for t in tasks:
        by_type.setdefault(t.task_type, []).append(t.meta["variation"])
    # a few of ETO's indices, as its file lists them
    assert by_type["boil"] == list(range(21, 30))
    assert by_type["measure-melting-point-known-substance"] == list(range(327, 337))
    assert by_type["chemistry-mix"] == list(range(24, 32))
    assert by_type["identify-life-stages-2"] == [6, 7, 8, 9]
    assert [t.index for t in tasks] == list(range(211))
    assert tasks[0].task_id == "test/boil/21" and tasks[0].split == "test"


def test_splits_are_disjoint_and_caps_take_the_first_variations():
    ids = {s: {t.task_id.split("/", 1)[1] for t in load_scienceworld_tasks(s, ["melt"])} for s in sw.SPLITS}
    assert not (ids["train"] & ids["dev"]) and not (ids["train"] & ids["test"]) and not (ids["dev"] & ids["test"])
    capped = load_scienceworld_tasks("train@3", ["melt", "freeze"])
    assert [t.task_id for t in capped] == ["train/freeze/0", "train/freeze/1", "train/freeze/2",
                                           "train/melt/0", "train/melt/1", "train/melt/2"]


@pytest.mark.parametrize("split,err", [("valid_unseen", "expected one of train, dev, test"),
                                       ("test@0", "at least 1"), ("test@x", "whole number"), ("test@", "whole number"),
                                       ("tests", "expected one of")])
def test_bad_splits_are_clear_errors(split, err):
    with pytest.raises(ValueError, match=err):
        parse_split(split)


def test_bad_types_ids_and_env_names_are_clear_errors():
    with pytest.raises(ValueError, match="no task type.*boiling.*types: boil"):
        load_scienceworld_tasks("test", ["boiling"])
    with pytest.raises(ValueError, match="has no test variation 3"):
        task_of("test/boil/3")
    with pytest.raises(ValueError, match="expected <split>/<task type>/<variation>"):
        task_of("boil-21")
    with pytest.raises(ValueError, match="unknown simplification.*teleport.*known: none, easy"):
        parse_env_spec("scienceworld:teleport")
    assert parse_env_spec("scienceworld") == "easy" and parse_env_spec("scienceworld:none") == ""
    assert parse_env_spec("scienceworld:teleportAction,openDoors") == "teleportAction,openDoors"
    with pytest.raises(ValueError, match="in this order: scienceworld:teleportAction,openDoors"):
        parse_env_spec("scienceworld:openDoors,teleportAction")
    with pytest.raises(ValueError, match="unknown benchmark 'webshop'.*alfworld, scienceworld"):
        benchmark("webshop")
    with pytest.raises(ValueError, match="ALFWorld takes no options"):
        benchmark("alfworld:easy")


def test_the_registry_names_both_benchmarks_and_their_defaults():
    assert default_max_steps("alfworld") == 50
    assert default_max_steps("scienceworld") == max(STEP_LIMITS.values())
    assert len(load_tasks("scienceworld", "dev@1")) == 30


def test_no_java_is_a_clear_error(monkeypatch):
    sw.java_version.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with pytest.raises(JavaMissingError, match="install a Java runtime 11 or newer.*openjdk-17"):
            ScienceWorldEnv().reset(load_scienceworld_tasks("test@1", ["melt"])[0])
    finally:
        sw.java_version.cache_clear()


# ---- real episodes in the JVM -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def env():
    e = make_env("scienceworld")
    yield e
    e.close()


def _task(kind: str, split: str = "test@1"):
    return load_scienceworld_tasks(split, [kind])[0]


@pytest.mark.game
def test_the_gold_path_wins_with_score_100_and_rewards_that_add_up_to_it(env):
    task = _task("use-thermometer")
    plan = env.expert_plan(task)
    res = env.reset(task)
    assert "Your task is to: " in res.observation and env.goal().startswith("measure the temperature")
    assert env.max_steps == STEP_LIMITS["use-thermometer"] == 30
    assert len(res.admissible_commands) > 50 and "reset task" not in res.admissible_commands
    assert len(set(res.admissible_commands)) == len(res.admissible_commands)
    total = 0.0
    for a in plan:
        res = env.step(a)
        total += res.reward
        assert res.reward >= 0
    assert res.won and res.done and env.score == 100 and total == pytest.approx(1.0)


@pytest.mark.game
def test_a_wrong_focus_ends_the_episode_keeping_the_best_score(env):
    task = _task("find-animal")
    res = env.reset(task)
    focus = next(a for a in res.admissible_commands if a.startswith("focus on") and "door" in a)
    res = env.step(focus)
    assert res.done and not res.won and env.score == 0 and res.reward == 0


@pytest.mark.game
def test_the_step_limit_is_the_types_capped_by_the_runs(env):
    capped = ScienceWorldEnv(max_steps=3)
    try:
        capped.reset(_task("boil"))
        assert capped.max_steps == 3
        for _ in range(3):
            res = capped.step("look around")
        assert res.done and not res.won
    finally:
        capped.close()
    env.reset(_task("boil"))
    assert env.max_steps == 100


@pytest.mark.game
def test_close_stops_the_jvm_by_pid_and_a_killed_jvm_is_a_clear_error_then_a_fresh_one():
    e = ScienceWorldEnv(fresh_jvm=False)  # so the fresh JVM comes of the dead one, not of the reset
    try:
        e.reset(_task("melt"))
        pid = e.pid
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        with pytest.raises(SimulatorDiedError, match="JVM stopped answering during step 0.*next reset starts a fresh"):
            e.step("look around")
        res = e.reset(_task("melt"))  # a fresh JVM
        assert e.pid != pid and res.admissible_commands
        pid = e.pid
    finally:
        e.close()
    time.sleep(0.3)
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read()


@pytest.mark.game
def test_a_worker_replays_an_episode_whose_jvm_died_on_a_fresh_one(tiny_lm, tmp_path, monkeypatch):
    from workbench.eval.config import RunConfig
    from workbench.eval.jobs import Job, Worker
    from workbench.models.registry import DEFAULT_AGENT

    cfg = RunConfig(out=str(tmp_path / "r"), env="scienceworld", split="test@1", tasks="0", memory="none",
                    decode="constrained", max_steps=4, teacher_forcing=False, task_types=("find-animal",))
    worker = Worker(threads=None, models={(DEFAULT_AGENT, "float32"): tiny_lm})
    killed = []
    real_step = ScienceWorldEnv.step

    def step(self, action):
        if self._steps == 2 and not killed:
            killed.append(self.pid)
            os.kill(self.pid, signal.SIGKILL)
            time.sleep(0.3)
        return real_step(self, action)

    monkeypatch.setattr(ScienceWorldEnv, "step", step)
    try:
        out = worker.play(Job(cfg, load_scienceworld_tasks("test@1", ["find-animal"])[0]))
        env = worker._envs[("scienceworld", 4)]
        assert killed and env.pid != killed[0]
        traj = out["trajectory"]
        assert len(traj["steps"]) == 4 and traj["meta"]["score"] >= 0 and traj["task_id"] == "test/find-animal/225"
    finally:
        worker.close()


@pytest.mark.game
def test_after_an_ambiguous_action_the_candidates_are_the_option_numbers():
    e = ScienceWorldEnv(step_limits=False)
    try:
        task = load_scienceworld_tasks("train@1", ["grow-fruit"])[0]
        plan = e.expert_plan(task)
        res = e.reset(task)
        seen = False
        for a in plan:
            if res.observation.startswith("Ambiguous request"):
                seen = True
                assert res.admissible_commands[0] == "0" and all(c.isdigit() for c in res.admissible_commands)
                assert a in res.admissible_commands  # the gold path answers with one of them
            res = e.step(a)
        assert seen and res.won
    finally:
        e.close()


@pytest.mark.game
def test_gold_paths_drop_their_no_op_door_openings_and_still_win():
    from workbench.envs.scienceworld_experts import gold_trajectory

    e = ScienceWorldEnv(step_limits=False)
    try:
        traj = gold_trajectory(e, load_scienceworld_tasks("train@1", ["use-thermometer"])[0])
    finally:
        e.close()
    assert traj.success and traj.meta["score"] == 100 and traj.meta["dropped_no_ops"] >= 1
    assert not any(s.observation == "The door is already open." for s in traj.steps)
    assert traj.meta["within_limit"] == (traj.n_steps <= STEP_LIMITS["use-thermometer"])


@pytest.mark.game
def test_a_hung_jvm_is_stopped_after_the_call_timeout_and_a_fresh_one_starts():
    e = ScienceWorldEnv(fresh_jvm=False)  # so the fresh JVM comes of the hung one, not of the reset
    try:
        e.call_timeout_s = 2.0
        e.reset(_task("melt"))
        pid = e.pid
        os.kill(pid, signal.SIGSTOP)  # alive, but answers nothing
        t0 = time.monotonic()
        with pytest.raises(SimulatorDiedError, match="no answer in 2 s: hung"):
            e.step("look around")
        assert time.monotonic() - t0 < 30
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read()
        e.reset(_task("melt"))
        assert e.pid != pid
    finally:
        e.close()


@pytest.mark.game
def test_a_variation_is_the_same_world_in_every_jvm_whatever_it_played_before():
    """Three variations whose object order and gold path changed from one JVM to the next before JVM_OPTIONS (the
    simulator's identity-hashed sets): played in a fresh JVM, and in another after other tasks, they are the same
    observations and the same gold actions."""
    from workbench.envs.scienceworld_experts import gold_trajectory

    ids = ["train/lifespan-shortest-lived/9", "train/test-conductivity/6", "train/identify-life-stages-2/0"]
    tasks = {t.task_id: t for t in load_scienceworld_tasks("train@10", [i.split("/")[1] for i in ids])}
    runs = []
    for history in ([], ["train/test-conductivity/6", "train/lifespan-shortest-lived/9"]):
        e = ScienceWorldEnv(step_limits=False)
        try:
            for h in history:
                e.reset(tasks[h])
                e.step("look around")
            runs.append({i: gold_trajectory(e, tasks[i]) for i in ids})
        finally:
            e.close()
    for i in ids:
        a, b = runs[0][i], runs[1][i]
        assert a.initial_observation == b.initial_observation and a.success
        assert [(s.action, s.observation) for s in a.steps] == [(s.action, s.observation) for s in b.steps]


def test_run_folders_record_the_jvm_options(tmp_path):
    import json

    from workbench.envs.scienceworld import JVM_OPTIONS
    from workbench.eval.config import RunConfig
    from workbench.eval.run_folder import write_run_config

    write_run_config(RunConfig(out=str(tmp_path), env="scienceworld", split="test@1", memory="none"))
    assert json.loads((tmp_path / "config.json").read_text())["versions"]["jvm_options"] == " ".join(JVM_OPTIONS)


@pytest.mark.game
def test_each_task_loads_into_a_fresh_jvm_and_the_last_one_is_stopped():
    import os

    tasks = load_scienceworld_tasks("test@1", ["find-animal", "find-plant"])
    e = ScienceWorldEnv()
    try:
        e.reset(tasks[0])
        first = e.pid
        e.reset(tasks[1])
        assert e.pid != first
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)  # stopped and reaped
    finally:
        e.close()
    e = ScienceWorldEnv(fresh_jvm=False)
    try:
        e.reset(tasks[0])
        first = e.pid
        e.reset(tasks[1])
        assert e.pid == first  # one JVM, its worlds then depend on its history
    finally:
        e.close()


def test_java_tool_options_keep_the_users_first_and_are_restored(monkeypatch):
    import os

    from workbench.envs.scienceworld import _java_tool_options

    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    with _java_tool_options(("-Xa", "-Xb")):
        assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xa -Xb"
    assert "JAVA_TOOL_OPTIONS" not in os.environ
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmine")
    with _java_tool_options(("-Xa",)):
        assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xmine -Xa"
    assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xmine"


@pytest.mark.game
def test_a_jvm_that_ignores_the_constant_hash_is_a_clear_error(monkeypatch):
    """_JAVA_OPTIONS is read after JAVA_TOOL_OPTIONS: one that sets another hash would give each process its own
    worlds."""
    from workbench.envs.scienceworld import SimulatorError

    monkeypatch.setenv("_JAVA_OPTIONS", "-XX:+UnlockExperimentalVMOptions -XX:hashCode=5")
    e = ScienceWorldEnv()
    try:
        with pytest.raises(SimulatorError, match="ignored -XX:hashCode=2.*_JAVA_OPTIONS"):
            e.reset(_task("find-animal"))
        assert e.pid is None  # stopped
    finally:
        e.close()
