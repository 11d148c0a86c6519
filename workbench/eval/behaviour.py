"""How an agent responds to failure and repeats itself (MemArbiter's Table 5), and what its memory block held.

A *failed execution* is a step whose action ALFWorld answered "Nothing happens." (the observation after it).
Per episode (task):

    one_step_recovery        share of failed executions whose next action is executed (not answered "Nothing
                             happens."); failures at the episode's last step have no next action and do not count
    failed_action_repetition share of failed executions whose next (normalised) action is the failed one
    adjacent_repetition      share of consecutive action pairs that are identical
    state_action_recurrence  share of steps whose (normalised pre-action observation, action) pair occurred earlier
                             in the episode

Tables macro-average them over tasks, each task weighing the same. The two failure-response rates are averaged
over the *common-failure tasks* of the compared runs, the tasks on which every run has at least one failed
execution (:func:`common_failure_rates`), and beside them over each run's own failure tasks
(:func:`own_failure_rates`: more tasks where the runs fail on different ones, but not the same tasks across
runs); the two recurrence rates over all tasks (:func:`recurrence_rates`).

``episodic_share``: for every failed execution at step k of a working-memory run, the share of the memory
block's o200k tokens that Episodic items took in the prompt that produced the failed action (step k) and in
the next prompt (step k + 1), averaged over failed executions (from each step's ``wm`` record).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import mean

from workbench.envs.alfworld_text import is_failure, normalize
from workbench.memory.trajectory import Trajectory

__all__ = ["outcomes", "failures", "task_behaviour", "recurrence_rates", "common_failure_rates", "own_failure_rates",
           "episodic_share", "max_memory_o200k"]


def outcomes(traj: Trajectory) -> list[str]:
    """The observation each action produced (step k+1's observation; the final one for the last action)."""
    return [s.observation for s in traj.steps[1:]] + [traj.meta.get("final_observation", "")][: traj.n_steps]


def failures(traj: Trajectory) -> list[int]:
    """Steps whose action was answered "Nothing happens."."""
    return [k for k, o in enumerate(outcomes(traj)) if is_failure(o)]


def task_behaviour(traj: Trajectory) -> dict:
    """The four per-episode rates (None where undefined: no failure with a next action, fewer than two steps)."""
    acts = [normalize(a) for a in traj.actions()]
    outs = outcomes(traj)
    fails = [k for k in failures(traj) if k + 1 < len(acts)]
    pairs = list(zip(acts, acts[1:]))
    seen: set = set()
    recur = 0
    for s, a in zip(traj.steps, acts):
        key = (normalize(s.observation), a)
        recur += key in seen
        seen.add(key)
    return {
        "n_failures": len(failures(traj)),
        "one_step_recovery": float(mean(not is_failure(outs[k + 1]) for k in fails)) if fails else None,
        "failed_action_repetition": float(mean(acts[k + 1] == acts[k] for k in fails)) if fails else None,
        "adjacent_repetition": float(mean(x == y for x, y in pairs)) if pairs else None,
        "state_action_recurrence": recur / len(acts) if acts else None,
    }


def _macro(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return mean(vals) if vals else None


def recurrence_rates(trajs: Sequence[Trajectory]) -> dict:
    """Adjacent repetition and state-action recurrence, macro-averaged over the run's tasks."""
    rows = [task_behaviour(t) for t in trajs]
    return {k: _macro([r[k] for r in rows]) for k in ("adjacent_repetition", "state_action_recurrence")}


def common_failure_rates(runs: Mapping[str, Sequence[Trajectory]], within: Sequence[str] | None = None) -> dict:
    """One-step recovery and failed-action repetition of each run, macro-averaged over the common-failure tasks:
    the tasks every run played on which every run of ``within`` (default: all of them) failed an action at
    least once (the paper: "tasks on which all three methods encounter at least one failed execution").

    Returns:
        ``{"tasks": [task ids], run: {"one_step_recovery", "failed_action_repetition"}, ...}``.
    """
    by_run = {name: {t.task_id: t for t in trajs} for name, trajs in runs.items()}
    defining = [by_run[n] for n in (within if within is not None else list(by_run))]
    shared = set.intersection(*(set(d) for d in by_run.values())) if by_run else set()
    common = sorted(tid for tid in shared if all(failures(d[tid]) for d in defining))
    out: dict = {"tasks": common}
    for name, d in by_run.items():
        rows = [task_behaviour(d[tid]) for tid in common]
        out[name] = {k: _macro([r[k] for r in rows]) for k in ("one_step_recovery", "failed_action_repetition")}
    return out


def own_failure_rates(trajs: Sequence[Trajectory]) -> dict:
    """One-step recovery and failed-action repetition macro-averaged over the run's own failure tasks (those with
    at least one failed execution), with their number and the run's failed executions in all."""
    rows = [r for r in map(task_behaviour, trajs) if r["n_failures"]]
    return {"failure_tasks": len(rows), "failed_executions": sum(r["n_failures"] for r in rows),
            **{f"{k}_own": _macro([r[k] for r in rows]) for k in ("one_step_recovery", "failed_action_repetition")}}


def episodic_share(trajs: Sequence[Trajectory]) -> dict | None:
    """Episodic share of the memory block at failed executions and at the next prompt (None: no ``wm`` records
    with bank tokens, or no failure followed by a step)."""
    before, after = [], []
    for t in trajs:
        steps = t.meta.get("steps", [])
        for k in failures(t):
            if k + 1 >= len(steps) or "wm" not in steps[k]:
                continue
            share = [steps[j]["wm"].get("bank_tokens", {}).get("episodic", 0) / steps[j]["wm"]["o200k"]
                     if steps[j]["wm"]["o200k"] else 0.0 for j in (k, k + 1)]
            before.append(share[0])
            after.append(share[1])
    if not before:
        return None
    return {"n_failures": len(before), "failed_action_prompt": mean(before), "next_prompt": mean(after)}


def budget_use(trajs: Sequence[Trajectory]) -> dict:
    """How much of its budget the memory block P_t used: median and 95th percentile of its o200k size over all
    steps, and the share of steps at which the budget left out an item the gate showed (MemArbiter's ``cut``;
    None for a policy that records no cut). Empty for a run without working-memory records."""
    import numpy as np

    steps = [s for t in trajs for s in t.meta.get("steps", []) if "wm" in s]
    if not steps:
        return {}
    sizes = np.array([s["wm"]["o200k"] for s in steps])
    cuts = [bool(s["arbiter"].get("cut")) for s in steps if isinstance(s.get("arbiter"), dict)]
    return {"P_t_median_o200k": float(np.median(sizes)), "P_t_p95_o200k": float(np.percentile(sizes, 95)),
            "steps_with_items_cut": sum(cuts) / len(cuts) if cuts else None}


def max_memory_o200k(trajs: Sequence[Trajectory]) -> int | None:
    """The largest o200k size of any memory block P_t in the run (None: not a working-memory run)."""
    sizes = [s["wm"]["o200k"] for t in trajs for s in t.meta.get("steps", []) if "wm" in s]
    return max(sizes) if sizes else None
