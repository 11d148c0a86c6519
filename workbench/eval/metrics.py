"""Metrics over trajectories: success, steps, memory tokens, SR@k (success within k steps), action patterns,
how far episodes follow their memory."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from statistics import mean

from workbench.eval.behaviour import (
    common_failure_rates,
    episodic_share,
    max_memory_o200k,
    recurrence_rates,
)
from workbench.eval.interventions import intervention_metrics
from workbench.memory.task_info import parse_game_ref
from workbench.memory.trajectory import Trajectory

__all__ = ["SR_KS", "action_patterns", "memory_following", "success_rate_at", "episode_metrics", "by_task_type"]

SR_KS = tuple(range(5, 55, 5))  # every 5 steps, as MemArbiter's Figure 3


def success_rate_at(trajs: list[Trajectory], k: int) -> float:
    """SR@k: fraction of episodes that succeeded within k steps (MemArbiter's SR@15 / SR@50)."""
    if not trajs:
        return 0.0
    return sum(t.success and t.n_steps <= k for t in trajs) / len(trajs)


def _step_mean(trajs: list[Trajectory], key: str, plus: str | None = None) -> float:
    """The mean over episodes of each episode's mean per step: every episode weighs the same, so a failed
    50-step episode does not count five times a 10-step success (AGMR's "average token number of memory
    entries" is one value per retrieved entry). ``plus``: a per-step field added where a step has it."""
    def value(step: dict) -> float:
        return step[key] + (step.get(plus, 0) if plus else 0)

    per_episode = [mean(v) for t in trajs if (v := [value(s) for s in t.meta.get("steps", []) if key in s])]
    return mean(per_episode) if per_episode else 0.0


def action_patterns(trajs: list[Trajectory]) -> dict:
    """How an agent moves, from its actions alone (why a run fails when it fails everywhere).

    Returns:
        ``oscillation``: share of steps, from each episode's third on, that go back to the action of two steps
        before while differing from the last one (A, B, A, B, ...); ``repeat``: share of steps that repeat the last
        action; ``distinct_actions``: mean number of different actions per episode; ``navigation``: share of
        ``go to`` actions; ``took_object``: share of episodes with at least one ``take``; ``put_back``: share of the
        ``take X from Y`` actions whose next action is ``put X in/on Y`` (an undo: the object goes straight back where
        it was; None without takes); over the failed episodes
        only, ``failed_oscillation`` (their oscillation step share) and ``failed_oscillating`` (the share of them
        where at least half the steps from the third on oscillate: a failure that loops between two actions).
    """
    osc = [_oscillations(t.actions()) for t in trajs if not t.success]
    n_later = sum(n for _, n in osc)
    return _moves([t.actions() for t in trajs]) | {
        "failed_oscillation": sum(k for k, _ in osc) / n_later if n_later else 0.0,
        "failed_oscillating": sum(n > 0 and 2 * k >= n for k, n in osc) / len(osc) if osc else 0.0,
    }


def _oscillations(actions: list[str]) -> tuple[int, int]:
    """(steps that go back to the action of two steps before while differing from the last one, steps with one
    two steps before)."""
    return sum(x == z != y for x, y, z in zip(actions, actions[1:], actions[2:])), max(len(actions) - 2, 0)


def _moves(acts: list[list[str]]) -> dict:
    pairs = sum(max(len(a) - 1, 0) for a in acts)  # steps with a last action
    osc = [_oscillations(a) for a in acts]
    later = sum(n for _, n in osc)
    steps = sum(len(a) for a in acts)
    return {
        "oscillation": sum(k for k, _ in osc) / later if later else 0.0,
        "repeat": sum(x == y for a in acts for x, y in zip(a, a[1:])) / pairs if pairs else 0.0,
        "distinct_actions": mean(len(set(a)) for a in acts) if acts else 0.0,
        "navigation": sum(x.startswith("go to ") for a in acts for x in a) / steps if steps else 0.0,
        "took_object": sum(any(x.startswith("take ") for x in a) for a in acts) / len(acts) if acts else 0.0,
        "put_back": _put_back(acts),
    }


def _put_back(acts: list[list[str]]) -> float | None:
    """Share of ``take X from Y`` actions followed at once by ``put X in/on Y`` (None: no take at all)."""
    takes = back = 0
    for a in acts:
        for x, y in zip(a, a[1:] + [""]):
            if x.startswith("take ") and " from " in x:
                obj, _, place = x[len("take "):].partition(" from ")
                takes += 1
                back += y == f"put {obj} in/on {place}"
    return back / takes if takes else None


def memory_following(trajs: list[Trajectory], memory_actions: Mapping[str, Sequence[str]]) -> dict:
    """How far an agent's actions follow the trajectory in its memory, from actions alone.

    ``memory_actions`` maps a task id to the actions of the trajectory retrieved for it (for a run without memory,
    those another run retrieved for the same task: the chance level of the same measures). Episodes whose task
    has no entry are left out.

    Returns:
        ``n_episodes`` (those measured); ``first_action``: share of episodes whose first action is the memory's
        first; ``prefix``: mean number of leading actions the same as the memory's; ``in_memory``: share of the
        episodes' distinct actions that stand verbatim in the memory (pooled); ``took_target``: share of episodes
        that take the object the task is about (from the game's folder name; episodes whose id names no ALFRED
        game are left out of this one).
    """
    measured = [t for t in trajs if t.task_id in memory_actions]
    pairs = [(t.actions(), list(memory_actions[t.task_id])) for t in measured]
    distinct = [set(a) for a, _ in pairs]
    targets = [(a, ref.target_object) for t, (a, _) in zip(measured, pairs)
               if (ref := parse_game_ref(t.task_id)) is not None]
    n_distinct = sum(len(d) for d in distinct)
    return {
        "n_episodes": len(pairs),
        "first_action": mean(bool(a) and bool(m) and a[0] == m[0] for a, m in pairs) if pairs else 0.0,
        "prefix": mean(next((i for i, (x, y) in enumerate(zip(a, m)) if x != y), min(len(a), len(m)))
                       for a, m in pairs) if pairs else 0.0,
        "in_memory": sum(len(d & set(m)) for d, (_, m) in zip(distinct, pairs)) / n_distinct if n_distinct else 0.0,
        "took_target": mean(any(x.startswith(f"take {obj} ") for x in a) for a, obj in targets) if targets else 0.0,
    }


def episode_metrics(trajs: list[Trajectory]) -> dict:
    """Aggregate metrics of a run.

    Returns:
        ``n_episodes``, ``success_rate``, ``avg_steps`` (all episodes), ``avg_steps_success``,
        ``memory_tokens`` (the prompt's memory tokens, model tokenizer: the memory block plus, in proactive
        runs, the reminder or the passively exposed bank injected at that step; each episode's mean per step,
        averaged over episodes), ``prompt_tokens`` (likewise), ``sr_at_k`` ({k: SR@k}, every 5 steps),
        ``action_patterns`` (``action_patterns``), ``behaviour`` (recovery, repetition, recurrence:
        ``workbench.eval.behaviour``), and where the run has the records
        ``avg_score`` (a graded benchmark's mean score, 0-100: ScienceWorld), ``max_memory_o200k`` and
        ``episodic_share`` (working-memory runs), ``interventions`` (proactive runs).
    """
    n = len(trajs)
    succ = [t for t in trajs if t.success]
    return {
        "n_episodes": n,
        "success_rate": len(succ) / n if n else 0.0,
        "avg_steps": mean(t.n_steps for t in trajs) if trajs else 0.0,
        "avg_steps_success": mean(t.n_steps for t in succ) if succ else None,
        "memory_tokens": _step_mean(trajs, "memory_tokens", plus="reminder_tokens"),
        "prompt_tokens": _step_mean(trajs, "prompt_tokens"),
        "sr_at_k": {str(k): success_rate_at(trajs, k) for k in SR_KS},
        "action_patterns": action_patterns(trajs),
        "behaviour": recurrence_rates(trajs) | _own_failure_rates(trajs),
        **_optional("avg_score", _avg_score(trajs)),
        **_optional("max_memory_o200k", max_memory_o200k(trajs)),
        **_optional("episodic_share", episodic_share(trajs)),
        **_optional("interventions", intervention_metrics(trajs)),
    }


def _avg_score(trajs: list[Trajectory]) -> float | None:
    """The mean graded score (0-100) of a graded benchmark's episodes (ScienceWorld); None where they have none."""
    scores = [t.meta.get("score") for t in trajs]
    return mean(scores) if scores and all(isinstance(s, (int, float)) for s in scores) else None


def _optional(key: str, value) -> dict:
    return {} if value is None else {key: value}


def _own_failure_rates(trajs: list[Trajectory]) -> dict:
    """One-step recovery / failed-action repetition over this run's own failing tasks (a table compares runs
    on their common-failure tasks instead: ``behaviour.common_failure_rates``)."""
    rates = common_failure_rates({"run": trajs})
    return {"failing_tasks": len(rates["tasks"]), **rates["run"]}


def by_task_type(trajs: list[Trajectory]) -> dict[str, dict]:
    """``episode_metrics`` per task type."""
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        groups[t.task_type].append(t)
    return {k: episode_metrics(v) for k, v in sorted(groups.items())}
