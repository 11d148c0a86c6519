"""Expert trajectories for ALFWorld: the planner's plan replayed, and ALFWorld's handcoded searcher.

Planner: ``policy_commands`` read once at reset and replayed in an env that does not request it
(TextWorld replans at every step otherwise, minutes on some games). Optimal and omniscient.

Handcoded: ALFWorld's ``HandCodedTWAgent`` explores like a person. Its TextWorld policies test
``move X to Y`` (the newer grammar) against the admissible commands, so on these old-grammar games it can
never place an object; we show it the admissible commands in its grammar and translate its proposal back
(``to_admissible``), which is what turns it from a near-always-failing into a useful searcher. It is
stochastic (random fallback when stuck): seeded per try, retried, and kept only when it wins.
"""

from __future__ import annotations

import random
import re
import time

from tqdm.auto import tqdm

from workbench.envs.alfworld import ALFWorldEnv
from workbench.envs.base import Environment, StepResult, Task
from workbench.envs.normalize import (
    normalize_observation,
    split_initial_observation,
    to_admissible,
)
from workbench.memory.trajectory import Step, Trajectory

__all__ = ["planner_trajectory", "handcoded_trajectory", "expert_trajectories", "replay"]

_PUT_OLD = re.compile(r"^put (?P<obj>.+?) in/on (?P<recep>.+)$")


def replay(env: Environment, task: Task, actions: list[str], source: str, start: StepResult | None = None,
           keep_admissible: bool = True) -> Trajectory:
    """Play ``actions`` from the task's start and record the trajectory (success = the game says won).

    ``start`` is the result of a reset just done on ``env`` (saves a second PDDL translation); else it resets.
    ``keep_admissible``: keep each step's admissible commands in ``meta["admissible"]`` (what teacher forcing
    scores over; ScienceWorld's run into the thousands a step, so its gold trajectories leave them out).
    """
    res = start or env.reset(task)
    room, goal = split_initial_observation(res.observation)
    obs, steps = res.observation, []
    admissible = [list(res.admissible_commands)]
    won = False
    for a in actions:
        res = env.step(a)
        admissible.append(list(res.admissible_commands))
        steps.append(Step(observation=obs, action=a, reward=res.reward, done=res.done))
        obs, won = res.observation, res.won
        if res.done:
            break
    return Trajectory(
        task_id=task.task_id, task_type=task.task_type, goal=goal, initial_observation=room,
        steps=tuple(steps), success=won, source=source, split=task.split,
        # admissible[k] = commands admissible before step k: what teacher forcing scores over.
        meta={"final_observation": obs, **({"admissible": admissible[: len(steps)]} if keep_admissible else {})},
    )


def planner_trajectory(env: ALFWorldEnv, task: Task) -> Trajectory:
    """The TextWorld planner's plan, read once at reset and replayed in the same (no longer planning) env."""
    start = env.reset(task, plan=True)
    return replay(env, task, env.plan, source="planner", start=start)


def _new_grammar(cmds: list[str]) -> list[str]:
    out = []
    for c in cmds:
        m = _PUT_OLD.match(c)
        out.append(f"move {m.group('obj')} to {m.group('recep')}" if m else c)
    return out


def handcoded_trajectory(task: Task, seed: int = 0, max_steps: int = 50, timeout_s: float = 30.0) -> Trajectory:
    """One try of ALFWorld's handcoded expert (seeded), as a Trajectory (``success`` tells if it won)."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from alfworld.agents.expert import (
        HandCodedAgentFailed,
        HandCodedAgentTimeout,
        HandCodedTWAgent,
    )

    random.seed(seed)
    infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=True)
    env = textworld.start(task.path, request_infos=infos, wrappers=[AlfredDemangler(), AlfredInfos])
    agent = HandCodedTWAgent(max_steps=200)
    state = env.reset()
    agent.reset(task.path)
    agent.observe(state.feedback)
    room, goal = split_initial_observation(state.feedback)
    obs, steps, prev, won = normalize_observation(state.feedback), [], "", False
    admissible: list[list[str]] = []
    start = time.monotonic()
    try:
        for _ in range(max_steps):
            if time.monotonic() - start > timeout_s:
                break
            view = {k: state[k] for k in ("facts", "won", "feedback")}
            view["admissible_commands"] = _new_grammar(list(state["admissible_commands"]))
            try:
                proposal = agent.act(view, 0, state["won"], prev) if prev else agent.act(view, 0, False, "")
            except (HandCodedAgentTimeout, HandCodedAgentFailed):
                break
            action = to_admissible(proposal, list(state["admissible_commands"])) or "look"
            admissible.append(list(state["admissible_commands"]))
            state, reward, done = env.step(action)
            prev = proposal
            steps.append(Step(observation=obs, action=action, reward=float(reward), done=bool(done)))
            obs, won = normalize_observation(state.feedback), bool(state["won"])
            if done or won:
                break
    finally:
        env.close()
    return Trajectory(
        task_id=task.task_id, task_type=task.task_type, goal=goal, initial_observation=room,
        steps=tuple(steps), success=won, source="handcoded", split=task.split,
        meta={"final_observation": obs, "seed": seed, "admissible": admissible},
    )


def _first_winning_handcoded(task: Task, tries: int) -> tuple[Trajectory, int]:
    """The first winning of ``tries`` seeded handcoded-expert runs (the last one if none wins), and its seed."""
    for k in range(tries):
        traj = handcoded_trajectory(task, seed=k)
        if traj.success:
            break
    return traj, k


def _planner_worker(task: Task) -> Trajectory:
    return planner_trajectory(ALFWorldEnv(), task)


def _planner_bounded(pool_box: list, task: Task, timeout_s: float) -> Trajectory | None:
    """The planner's trajectory computed in a worker process, or None after ``timeout_s``.

    TextWorld's planner runs in native code that no signal interrupts, and on a few pick_two games it plans
    for many minutes; a worker process can be terminated.
    """
    import multiprocessing as mp

    if pool_box[0] is None:
        pool_box[0] = mp.get_context("spawn").Pool(1)
    try:
        return pool_box[0].apply_async(_planner_worker, (task,)).get(timeout_s)
    except mp.TimeoutError:
        pool_box[0].terminate()
        pool_box[0] = None
        return None


def expert_trajectories(
    tasks: list[Task], kind: str = "planner", tries: int = 3, progress: bool = True,
    planner_timeout_s: float | None = None,
) -> tuple[list[Trajectory], dict]:
    """Expert trajectories for ``tasks`` and a report ``{"won": n, "total": N, "success_rate": ...}``.

    ``kind="planner"`` replays the planner's plan; with ``planner_timeout_s`` each game's planning is bounded
    and a game that runs over falls back to the handcoded expert (counted in ``planner_timeouts``).
    ``kind="handcoded"`` keeps the first winning of ``tries`` seeded handcoded-expert runs (the last
    failing one if none wins).
    """
    env = ALFWorldEnv()
    out: list[Trajectory] = []
    first_try_wins = 0
    timeouts: list[str] = []
    pool_box: list = [None]
    for task in tqdm(tasks, desc=f"{kind} expert", disable=not progress):
        if kind == "planner" and planner_timeout_s:
            traj = _planner_bounded(pool_box, task, planner_timeout_s)
            if traj is None:
                timeouts.append(task.task_id)
                traj, _ = _first_winning_handcoded(task, tries)
        elif kind == "planner":
            traj = planner_trajectory(env, task)
        elif kind == "handcoded":
            traj, k = _first_winning_handcoded(task, tries)
            first_try_wins += int(k == 0 and traj.success)
        else:
            raise ValueError(f"unknown expert kind '{kind}' (planner, handcoded)")
        out.append(traj)
    env.close()
    if pool_box[0] is not None:
        pool_box[0].terminate()
    won = sum(t.success for t in out)
    report = {"kind": kind, "won": won, "total": len(out), "success_rate": won / max(1, len(out))}
    if kind == "planner" and planner_timeout_s:
        report.update(planner_timeout_s=planner_timeout_s, planner_timeouts=timeouts)
    if kind == "handcoded":
        report.update(tries=tries, first_try_won=first_try_wins)
    return out, report
