"""The memory controls are memory policies like any other (a grid or `workbench run --memory` runs them):
another task type's best-retrieved trajectory, and a random same-type trajectory of another game."""

from workbench.agents.policy import build_policy
from workbench.envs.alfworld import load_alfworld_tasks
from workbench.eval.config import RunConfig
from workbench.memory.task_info import game_key


def test_controls_choose_the_wrong_type_and_a_random_same_type_entry():
    tasks = load_alfworld_tasks("valid_unseen")[:12]
    other, rand, traj = (build_policy(n, "bm25") for n in ("other_type", "random_same", "traj"))
    chosen = []
    for task in tasks:
        goal = f"your task is to: {task.task_type}"
        blocks = {}
        for name, policy in (("other", other), ("rand", rand), ("traj", traj)):
            policy.begin(task, goal, "room")
            blocks[name] = policy.memory(0, [])
        assert blocks["other"].entry.task_type != task.task_type
        assert blocks["rand"].entry.task_type == task.task_type == blocks["traj"].entry.task_type
        assert game_key(blocks["rand"].entry.task_id) != game_key(task.task_id)
        assert blocks["other"].meta["memory_entry"] == blocks["other"].entry.entry_id
        chosen.append(blocks["rand"].entry.entry_id)
    again = build_policy("random_same")
    for task, eid in zip(tasks, chosen):  # seeded per task: the same entry every run
        again.begin(task, "g", "room")
        assert again.memory(0, []).entry.entry_id == eid
    assert len(set(chosen)) > 1
    RunConfig(out="x", memory="other_type", tasks="none", teacher_forcing_tasks="all")  # a valid run
