"""ALFWorld: task lists, normalisation, both grammars, data-root errors, experts that really win."""

import pytest

from workbench.envs import (
    ALFWorldEnv,
    DataRootError,
    load_alfworld_tasks,
    normalize_observation,
    planner_trajectory,
    split_initial_observation,
    to_admissible,
)
from workbench.envs.alfworld import alfworld_data_root


def test_splits_and_types():
    assert [len(load_alfworld_tasks(s)) for s in ("valid_unseen", "valid_seen", "valid_train")] == [134, 140, 200]
    looks = load_alfworld_tasks("valid_unseen", ["look"])
    assert looks and all(t.task_type == "look" for t in looks)
    ids = [t.task_id for t in load_alfworld_tasks("valid_unseen")]
    assert len(set(ids)) == 134


def test_normalisation():
    assert normalize_observation("You arrive at loc 24. On the desk 2, you see a alarmclock 1.") == \
        "On the desk 2, you see a alarmclock 1."
    room, goal = split_initial_observation(
        "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room.\n\nYour task is to: put a mug in desk.")
    assert room == "You are in the middle of a room." and goal == "put a mug in desk."


def test_both_grammars_map_to_admissible():
    adm = ["go to desk 1", "put mug 1 in/on desk 1", "look"]
    assert to_admissible("put mug 1 in/on desk 1", adm) == "put mug 1 in/on desk 1"
    assert to_admissible("move mug 1 to desk 1", adm) == "put mug 1 in/on desk 1"
    assert to_admissible("put mug 1 on desk 1", adm) == "put mug 1 in/on desk 1"
    assert to_admissible("jump", adm) is None
    assert to_admissible("put mug 1 in/on desk 1", ["move mug 1 to desk 1"]) == "move mug 1 to desk 1"


def test_missing_data_root_names_the_env_var(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_ALFWORLD_DATA", str(tmp_path / "nope"))
    with pytest.raises(DataRootError, match="WORKBENCH_ALFWORLD_DATA"):
        alfworld_data_root()
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("WORKBENCH_ALFWORLD_DATA", str(empty))
    with pytest.raises(DataRootError, match="WORKBENCH_ALFWORLD_DATA"):
        load_alfworld_tasks("valid_unseen")


def test_user_data_root_without_manifest_is_scanned(monkeypatch, tmp_path):
    """A user's own alfworld-download layout (no manifest) is found by scanning json_2.1.1/."""
    src = load_alfworld_tasks("valid_unseen")[0]
    import pathlib
    import shutil

    game = pathlib.Path(src.path)
    dst = tmp_path / "json_2.1.1" / "valid_unseen" / game.parent.parent.name / game.parent.name
    shutil.copytree(game.parent, dst)
    monkeypatch.setenv("WORKBENCH_ALFWORLD_DATA", str(tmp_path))
    tasks = load_alfworld_tasks("valid_unseen")
    assert len(tasks) == 1 and tasks[0].task_type == src.task_type
    with pytest.raises(DataRootError, match="no split 'valid_seen'"):
        load_alfworld_tasks("valid_seen")


@pytest.mark.integration
def test_planner_expert_wins_and_step_limit_holds():
    env = ALFWorldEnv(max_steps=3)
    task = load_alfworld_tasks("valid_unseen", ["heat"])[0]
    traj = planner_trajectory(ALFWorldEnv(), task)
    assert traj.success and traj.steps[-1].done and len(traj.meta["admissible"]) == traj.n_steps
    assert all("You arrive at loc" not in s.observation for s in traj.steps)
    res = env.reset(task)
    for _ in range(3):
        res = env.step("look")
    assert res.done and not res.won


@pytest.mark.integration
def test_memoised_text_grammar_gives_identical_games():
    """The TextWorld parse cache changes cost, not text: same observations and admissible commands."""
    from workbench.envs import textworld_cache

    task = load_alfworld_tasks("valid_unseen", ["clean"])[0]
    plan = ALFWorldEnv().expert_plan(task) + ["look", "inventory", "jump"]

    def play():
        env = ALFWorldEnv(fast_text=False)
        res = env.reset(task)
        seen = [(res.observation, res.admissible_commands)]
        for a in plan:
            res = env.step(a)
            seen.append((res.observation, res.admissible_commands))
        env.close()
        return seen

    textworld_cache.uninstall()
    plain = play()
    textworld_cache.install()
    try:
        assert play() == plain
    finally:
        textworld_cache.install()


def test_data_root_lookup_order_and_the_fetch_command(monkeypatch, tmp_path, capsys):
    """$WORKBENCH_ALFWORLD_DATA, then the repository's default, then alfworld-download's folder; the first that
    holds games (an empty json_2.1.1/ holds none) is used and said; with none, the error lists where it looked
    and names alfworld-download."""
    from workbench.envs import alfworld as mod

    def games_in(root):
        game = root / "json_2.1.1" / "valid_seen" / "task" / "trial" / "game.tw-pddl"
        game.parent.mkdir(parents=True)
        game.write_text("{}")
        return root

    games = games_in(tmp_path / "alf")
    monkeypatch.delenv("WORKBENCH_ALFWORLD_DATA", raising=False)
    monkeypatch.setattr(mod, "_ANNOUNCED", set())
    empty_shared = tmp_path / "empty-shared"
    (empty_shared / "json_2.1.1").mkdir(parents=True)
    monkeypatch.setattr(mod, "_REPO_DEFAULT", empty_shared)  # an empty json_2.1.1/ is passed over
    monkeypatch.setenv("ALFWORLD_DATA", str(games))
    assert mod.alfworld_data_root() == games
    assert f"ALFWorld games from {games} ($ALFWORLD_DATA" in capsys.readouterr().err
    mod.alfworld_data_root()
    assert capsys.readouterr().err == ""  # said once per process
    shared = games_in(tmp_path / "shared")
    monkeypatch.setattr(mod, "_REPO_DEFAULT", shared)
    assert mod.alfworld_data_root() == shared  # the repository's default comes before alfworld-download's
    monkeypatch.setattr(mod, "_REPO_DEFAULT", tmp_path / "no-shared")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "empty-cache"))
    with pytest.raises(DataRootError, match="alfworld-download") as e:
        mod.alfworld_data_root()
    assert "no-shared" in str(e.value) and "empty-cache" in str(e.value)
