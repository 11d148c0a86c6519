"""Teacher forcing replays a stateful memory policy exactly as the episode fed it: the policy observes every
step, those whose expert action cannot be scored included, so its memory at the scored steps is the played one."""

from workbench.agents.loop import Agent
from workbench.agents.policy import MemoryBlock
from workbench.agents.teacher_forcing import teacher_forced_accuracy
from workbench.envs.base import Task
from workbench.memory.trajectory import Step, Trajectory


class CountingPolicy:
    """Shows how many outcomes it has observed -- a memory whose content depends on every observe."""

    name = "counting"

    def __init__(self):
        self.observed: list[str] = []
        self.shown: list[int] = []

    def begin(self, task, goal, room):
        self.observed = []

    def memory(self, step, history):
        self.shown.append(len(self.observed))
        assert len(self.observed) == len(history) == step  # the policy has seen every earlier step's outcome
        return MemoryBlock()

    def observe(self, step, next_observation):
        self.observed.append(next_observation)


def test_unscorable_steps_are_still_observed(tiny_lm):
    steps = (Step(observation="room", action="go to desk 1"),
             Step(observation="on the desk 1 you see a pen 1", action="take pen 1 from desk 1"),  # not admissible
             Step(observation="you pick up the pen 1", action="go to shelf 1"))
    traj = Trajectory(task_id="valid_unseen/x/trial", goal="put a pen on the shelf", initial_observation="room",
                      steps=steps, meta={"admissible": [["go to desk 1", "look"], ["look", "inventory"],
                                                        ["go to shelf 1", "look"]],
                                     "final_observation": "you put the pen 1 on the shelf 1"})
    task = Task(task_id=traj.task_id, split="valid_unseen", task_type="pick", path="/nonexistent")
    policy = CountingPolicy()
    res = teacher_forced_accuracy(Agent.from_model(tiny_lm), [traj], {traj.task_id: task}, policy, progress=False)
    assert res.n_steps == 2 and [s["step"] for s in res.per_step] == [0, 2]
    assert policy.shown == [0, 1, 2]  # step 2's memory follows step 1's outcome, though step 1 was skipped
    assert policy.observed == [steps[1].observation, steps[2].observation, "you put the pen 1 on the shelf 1"]
