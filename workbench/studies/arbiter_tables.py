"""MemArbiter's tables over run folders (notebook 05): budget sensitivity, Table 5's behaviour, the written-action grid."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.eval.behaviour import (
    budget_use,
    common_failure_rates,
    episodic_share,
    max_memory_o200k,
    own_failure_rates,
    recurrence_rates,
)
from workbench.eval.compare import paired_outcomes
from workbench.studies.arbiter_grids import ADOPT_ACROSS_BUDGETS, METHODS, REFERENCE

__all__ = ["budget_sensitivity", "verbatim_behaviour_table", "common_failure_sets", "behaviour_table"]


def _same_episode(a, b) -> bool:
    """The same actions, and a memory block of the same o200k size, at every step."""
    def sizes(t):
        return [s.get("wm", {}).get("o200k") for s in t.meta.get("steps", [])]

    return [s.action for s in a.steps] == [s.action for s in b.steps] and sizes(a) == sizes(b)


def budget_sensitivity(runs: dict, sensitivity: Sequence[str], reference_budget: int = 500):
    """Success against the budget on the sensitivity runs' tasks: one row per (method, budget) among ``runs``
    (name -> :func:`~workbench.eval.run_folder.load_run`; Table 2's runs restricted to those tasks) for the
    :data:`ADOPT_ACROSS_BUDGETS` methods without ablation. Columns: tasks, success, the paired comparison with
    the method at ``reference_budget`` on the same tasks (difference in points, discordant pairs, exact McNemar),
    P_t's median / 95th percentile / largest o200k size, the share of steps at which MemArbiter's budget left out
    an item the gate showed, and the share of tasks whose episode is the reference's: the same actions and a block
    of the same size at every step (those adopted from it, where the replay showed the same memory, and those
    played that came out the same: the budget never changed what the agent saw). A DataFrame indexed
    ``<method>-<budget>``."""
    import pandas as pd

    tasks = set.intersection(*({t.task_id for t in runs[n][0]} for n in sensitivity)) if sensitivity else set()
    chosen = {n: r for n, r in runs.items()
              if r[2].get("run", {}).get("memory") in ADOPT_ACROSS_BUDGETS and not r[2]["run"].get("ablation")
              and r[2]["run"].get("budget")}
    ref = {r[2]["run"]["memory"]: {t.task_id: t for t in r[0] if t.task_id in tasks}
           for n, r in chosen.items() if r[2]["run"]["budget"] == reference_budget}
    rows = {}
    for name, (trajs, _, config) in sorted(chosen.items(), key=lambda kv: (kv[1][2]["run"]["memory"],
                                                                          kv[1][2]["run"]["budget"])):
        memory, budget = config["run"]["memory"], config["run"]["budget"]
        mine = [t for t in trajs if t.task_id in tasks]
        outcome = {t.task_id: t.success for t in mine}
        row = {"method": memory, "budget": budget, "tasks": len(mine),
               "success_%": 100 * sum(outcome.values()) / len(mine) if mine else None}
        if memory in ref and budget != reference_budget:
            base = ref[memory]
            pair = paired_outcomes(outcome, {tid: t.success for tid, t in base.items()})
            same = sum(t.task_id in base and _same_episode(t, base[t.task_id]) for t in mine)
            row |= {f"diff_vs_{reference_budget}_pp": 100 * pair["diff"] if pair["diff"] is not None else None,
                    "only_this": pair["only_a"], f"only_{reference_budget}": pair["only_b"],
                    "p_mcnemar": pair["p_mcnemar"],
                    f"same_episode_as_{reference_budget}_%": 100 * same / len(mine) if mine else None}
        row |= {**budget_use(mine), "max_P_t_o200k": max_memory_o200k(mine)}
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def verbatim_behaviour_table(runs: dict):
    """Table 5 of the :func:`verbatim_configs` runs: the three methods' common-failure tasks are the tasks on
    which each of the three written-action runs failed at least one command; the reference row (the action agent
    alone, ``none-verbatim``) is measured on the same tasks and defines none of them."""
    methods = tuple(n for n in runs if not n.startswith(f"{REFERENCE}-"))
    return behaviour_table(runs, common_sets={n: methods for n in runs})


def common_failure_sets(names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each condition -> the conditions whose shared failures define its common-failure tasks: the three methods
    at its budget (paper 4.4: "all three methods", 29 tasks at 500, 32 at 750); an ablation at 500 is measured on
    the 500 set, and so is the reference row (``REFERENCE``, the action agent alone), which defines none of them.
    Other names that are not ``condition_name``s (or budgets without the three methods) share one set, of every
    name but the reference."""
    names = list(names)
    defining = tuple(n for n in names if n != REFERENCE)
    out = {}
    for n in names:
        budget = "500" if n == REFERENCE else n.rsplit("-", 1)[-1]
        trio = tuple(f"{m}-{budget}" for m in METHODS)
        out[n] = trio if all(t in names for t in trio) else defining
    return out


def behaviour_table(runs: dict, common_sets: dict[str, tuple[str, ...]] | None = None):
    """Table 5: (a) one-step recovery and failed-action repetition on the common-failure tasks of each row's
    budget (``common_failure_sets``) and, beside them (``*_own``), on the row's own failure tasks; adjacent
    repetition and state-action recurrence on all tasks; (b) the
    episodic share at a failed action and at the next prompt; plus the largest P_t in o200k tokens and how much
    of the budget P_t used (:func:`workbench.eval.behaviour.budget_use`: does the budget bind?). A DataFrame
    indexed by condition."""
    import pandas as pd

    sets = common_sets or common_failure_sets(list(runs))
    by_set: dict[tuple[str, ...], dict] = {}
    for within in dict.fromkeys(sets.values()):
        members = {n: runs[n] for n in runs if sets[n] == within or n in within}
        by_set[within] = common_failure_rates(members, within=within)
    rows = {}
    for name, trajs in runs.items():
        share = episodic_share(trajs) or {}
        common = by_set[sets[name]]
        rows[name] = {"common_failure_tasks": len(common["tasks"]), "common_failure_of": " ".join(sets[name]),
                      **common[name], **own_failure_rates(trajs), **recurrence_rates(trajs),
                      "episodic_share_failed": share.get("failed_action_prompt"),
                      "episodic_share_next": share.get("next_prompt"), "max_P_t_o200k": max_memory_o200k(trajs),
                      **budget_use(trajs)}
    return pd.DataFrame.from_dict(rows, orient="index")
