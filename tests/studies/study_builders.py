"""Builders for the report tests: run tuples as ``load_run`` returns them, from outcomes alone."""

from __future__ import annotations

from workbench.memory.trajectory import Step, Trajectory


def traj(task: str, success: bool, actions: tuple[str, ...] = ("look",), task_type: str = "pick") -> Trajectory:
    return Trajectory(task_id=task, task_type=task_type, goal="g", success=success,
                      steps=tuple(Step(observation="room", action=a) for a in actions))


def run(outcomes: dict[str, bool], memory: str = "none", budget: int | None = None, adopted: list | None = None,
        sr_at_k: dict | None = None, actions: tuple[str, ...] = ("look",), **metrics) -> tuple:
    """``(trajectories, metrics, config)`` of a run whose episodes succeed as ``outcomes`` says (each taking
    ``actions``)."""
    trajs = [traj(t, ok, actions) for t, ok in outcomes.items()]
    rate = sum(outcomes.values()) / len(outcomes) if outcomes else None
    m = {"n_episodes": len(trajs), "success_rate": rate, "avg_steps": 1.0,
         "sr_at_k": sr_at_k or {"15": rate, "50": rate}, **metrics}
    return trajs, m, {"run": {"memory": memory, "budget": budget}, "adopted": adopted or []}


def outcomes(n: int, solved: set[int]) -> dict[str, bool]:
    """Tasks ``t0 .. t{n-1}``, those in ``solved`` successful."""
    return {f"t{i}": i in solved for i in range(n)}
