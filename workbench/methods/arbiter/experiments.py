"""MemArbiter's evaluation (Tables 2, 4, 5, Figure 3 SR@k) and the two analyses beyond the paper, as functions
notebook 05 calls.

Run folders are ``ROOT/<model>/<condition>`` with conditions named ``<method>-<budget>`` (``arbiter-500``,
``flat-recency-750``, ``arbiter-no-gate-500``), all on the same tasks, model and dtype, read by the one table
renderer.

The paper's agent writes its actions, so an invalid command is a failed execution ("Nothing happens.") that the
Episodic and Constraint banks record and Table 5 (a) measures: ``decode="generate-verbatim"``. The grid's default
is ``decode="score"`` (the admissible command of highest likelihood), because the SmolLM2 agents cannot recover
from a failed execution: they were cloned on admissible actions and never saw one. Measured on the default
profile's two tasks (2026-12-04): agent v2 written verbatim failed every episode of all nine conditions, repeating
the failed action (adjacent repetition 0.91 for MemArbiter at 500; "go to desk 1" while at desk 1), where
scoring solved both with MemArbiter. A scoring agent never fails a command, so Table 5 (a) is empty for it; pass
``decode="generate-verbatim"`` with a model that writes commands (Qwen2.5-7B, Llama-3.1-8B) for the paper's
setting. The two analyses beyond the paper re-score admissible commands and always play in ``score`` mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["arbiter_configs", "verbatim_configs", "verbatim_behaviour_table", "condition_name", "item_attention",
           "band_switches", "behaviour_table", "budget_pairs", "ADOPT_ACROSS_BUDGETS", "sensitivity_configs",
           "budget_sensitivity", "SENSITIVITY_BUDGETS", "reference_configs", "REFERENCE"]

VERBATIM = "verbatim"


def condition_name(memory: str, budget: int, ablation: str | None = None) -> str:
    return f"{memory}{'-' + ablation if ablation else ''}-{budget}"


#: Methods whose block does not grow with the budget unless the budget binds, so at a larger budget they adopt the
#: smallest budget's episodes where the memory is the same at every step (``drive(..., same_memory=...)``). Flat
#: Recency's window of history grows with the budget: it would only wait, so it plays both.
ADOPT_ACROSS_BUDGETS = ("arbiter", "flat-retrieval")


def budget_pairs(cfgs: Sequence, reference_budget: int = 500) -> list[tuple]:
    """``(configuration, reference)`` pairs for :func:`workbench.eval.driver.drive`'s ``same_memory``: each
    :data:`ADOPT_ACROSS_BUDGETS` method without ablation at another budget, with itself at ``reference_budget``
    (where there is none, at its smallest budget among ``cfgs``): 750 and the sensitivity budgets take 500's
    episodes where the block was never cut (the pairs of ``grids/arbiter_valid_unseen.yaml``)."""
    ref = {}
    for c in sorted(cfgs, key=lambda c: (c.budget != reference_budget, c.budget or 0)):
        if c.memory in ADOPT_ACROSS_BUDGETS and c.ablation is None:
            ref.setdefault(c.memory, c)
    return [(c, ref[c.memory]) for c in cfgs
            if c.memory in ref and c.ablation is None and c is not ref[c.memory]]


#: Beyond the paper: budgets under the paper's two, where MemArbiter's and Flat Retrieval's blocks are cut. At 500
#: and 750 they are not (Table 5's P_t columns), so 750 *is* 500 for them; these show what a binding budget does.
SENSITIVITY_BUDGETS = (150, 250)


def sensitivity_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                        budgets: Sequence[int] = SENSITIVITY_BUDGETS, dtype: str = "float32",
                        backend: str | None = None, decode: str = "score") -> list:
    """The budget-sensitivity runs (beyond the paper): each :data:`ADOPT_ACROSS_BUDGETS` method at ``budgets`` on
    ``tasks`` (a slice of Table 2's), in folders ``<method>-<budget>`` beside Table 2's. Paired with Table 2's
    500 by :func:`budget_pairs`, an episode whose block 500 never had to cut is adopted, not played."""
    return [c for c in arbiter_configs(model, split, tasks, max_steps, root, budgets=budgets, ablations=(),
                                       dtype=dtype, backend=backend, decode=decode)
            if c.memory in ADOPT_ACROSS_BUDGETS]


def _same_episode(a, b) -> bool:
    """The same actions, and a memory block of the same o200k size, at every step."""
    def sizes(t):
        return [s.get("wm", {}).get("o200k") for s in t.meta.get("steps", [])]

    return [s.action for s in a.steps] == [s.action for s in b.steps] and sizes(a) == sizes(b)


def budget_sensitivity(runs: dict, sensitivity: Sequence[str], reference_budget: int = 500):
    """Success against the budget on the sensitivity runs' tasks: one row per (method, budget) among ``runs``
    (name -> :func:`~workbench.eval.runner.load_run`; Table 2's runs restricted to those tasks) for the
    :data:`ADOPT_ACROSS_BUDGETS` methods without ablation. Columns: tasks, success, the paired comparison with
    the method at ``reference_budget`` on the same tasks (difference in points, discordant pairs, exact McNemar),
    P_t's median / 95th percentile / largest o200k size, the share of steps at which MemArbiter's budget left out
    an item the gate showed, and the share of tasks whose episode is the reference's: the same actions and a block
    of the same size at every step (those adopted from it, where the replay showed the same memory, and those
    played that came out the same: the budget never changed what the agent saw). A DataFrame indexed
    ``<method>-<budget>``."""
    import pandas as pd

    from workbench.eval.behaviour import budget_use, max_memory_o200k
    from workbench.eval.compare import paired_outcomes

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


def arbiter_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                    budgets: Sequence[int] = (500, 750), ablations: Sequence[str] = ("no-banks", "no-signals", "no-gate"),
                    ablation_budget: int = 500, dtype: str = "float32", backend: str | None = None,
                    decode: str = "score") -> list:
    """MemArbiter, Flat Retrieval and Flat Recency at every budget, and the ablations at ``ablation_budget``
    (``decode``: how the action model acts; the paper's is ``generate-verbatim``, see the module docstring)."""
    from workbench.eval.runner import RunConfig

    out = Path(root) / model
    common = dict(split=split, tasks=tasks, model=model, max_steps=max_steps, dtype=dtype, teacher_forcing=False,
                  decode=decode)
    cfgs = []
    for b in budgets:
        for memory in ("arbiter", "flat-retrieval", "flat-recency"):
            extra = {"backend": backend} if memory == "arbiter" and backend else {}
            cfgs.append(RunConfig(out=str(out / condition_name(memory, b)), memory=memory, budget=b, **extra, **common))
    for a in ablations:
        extra = {"backend": backend} if backend else {}
        cfgs.append(RunConfig(out=str(out / condition_name("arbiter", ablation_budget, a)), memory="arbiter",
                              budget=ablation_budget, ablation=a, **extra, **common))
    return cfgs


METHODS = ("arbiter", "flat-retrieval", "flat-recency")

#: The folder of the reference run: the action agent alone with its raw history (the ReAct layout, no P_t).
REFERENCE = "none"


def reference_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path, dtype: str = "float32",
                      decode: str = "score") -> list:
    """The action agent alone, with the raw history in its prompt (ReAct, ``memory="none"``), on the same tasks,
    model, dtype and decode: not a row of the paper's tables, but what every working-memory method replaces. A
    flat block below it means that block is worse than no arbitration at all for this agent. Notebook 05 reads
    notebook 01's episodes of the same parameters (adopted) instead of playing them again."""
    from workbench.eval.runner import RunConfig

    return [RunConfig(out=str(Path(root) / model / REFERENCE), memory="none", split=split, tasks=tasks, model=model,
                      max_steps=max_steps, dtype=dtype, teacher_forcing=False, decode=decode)]


def verbatim_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path, budget: int = 500,
                     dtype: str = "float32", backend: str | None = None, reference: bool = True) -> list:
    """Table 5 (a) in the paper's setting: MemArbiter, Flat Retrieval and Flat Recency at ``budget`` with the
    actions written by the model and executed as written (``decode="generate-verbatim"``), so a command the game
    cannot execute is a failed execution ("Nothing happens.") that the next steps must recover from. A scoring
    agent (the grid's ``decode="score"``) only picks admissible commands, which ALFWorld always executes, so its
    Table 5 (a) has no failure to measure. Folders ``<memory>-<budget>-verbatim``: :func:`arbiter_configs` at
    ``budget`` without ablations, written; with ``reference``, also the action agent alone with its raw history,
    written (``none-verbatim``: :func:`reference_configs`; notebook 06 plays the same run, and notebook 05 reads it
    from there)."""
    from dataclasses import replace

    cfgs = arbiter_configs(model, split, tasks, max_steps, root, budgets=(budget,), ablations=(), dtype=dtype,
                           backend=backend, decode="generate-verbatim")
    if reference:
        cfgs += reference_configs(model, split, tasks, max_steps, root, dtype=dtype, decode="generate-verbatim")
    return [replace(c, out=f"{c.out}-{VERBATIM}") for c in cfgs]


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

    from workbench.eval.behaviour import (budget_use, common_failure_rates, episodic_share, max_memory_o200k,
                                          own_failure_rates, recurrence_rates)

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


def item_attention(lm, heads, split: str, tasks: str, budget: int = 500, max_steps: int = 50,
                   cache_dir: str | Path | None = None) -> tuple[list, list]:
    """Beyond the paper (a): item-level utilization by the retrieval heads while MemArbiter plays ``tasks``
    (each task's rows and episode kept in ``cache_dir`` as it finishes: a render resumes; None keeps nothing).

    Returns:
        ``(rows, trajectories)``: rows of :func:`workbench.attention.items.item_utilization` with their task id
        (:func:`~workbench.attention.items.focal_vs_ambient` compares the bands within steps), and the episodes
        (the run's own, played again with the heads captured: scoring is deterministic and capture only reads;
        always in ``score`` mode, since utilization is read at the scoring forward).
    """
    from workbench.agents.loop import Agent
    from workbench.attention.items import episode_item_utilization
    from workbench.envs.alfworld import ALFWorldEnv
    from workbench.eval.runner import RunConfig, select_tasks
    from workbench.eval.task_cache import TaskCache, analysis_key
    from workbench.memory.trajectory import Trajectory

    from workbench.methods.arbiter.policy import ArbiterPolicy

    cache = TaskCache(cache_dir, "item_attention", analysis_key(lm, heads=[list(h) for h in heads], split=split,
                                                                  budget=budget, max_steps=max_steps))
    rows: list[dict] = []
    trajs = []
    agent, env = None, None
    try:
        for task in select_tasks(RunConfig(out="-", split=split, tasks=tasks, memory="none")):
            if (done := cache.get(task.task_id)) is None:
                if env is None:
                    agent, env = Agent.from_model(lm, keep_prompts=True), ALFWorldEnv(max_steps=max_steps)
                r, traj = episode_item_utilization(agent, env, task, ArbiterPolicy(budget=budget), heads, max_steps)
                done = {"rows": r, "trajectory": traj.model_dump(mode="json")}
                cache.put(task.task_id, done)
            rows += done["rows"]
            trajs.append(Trajectory.model_validate(done["trajectory"]))
    finally:
        if env is not None:
            env.close()
    return rows, trajs


def band_switches(lm, split: str, tasks: str, budget: int = 500, per_transition: int = 2,
                  steps_per_task: int = 6, cache_dir: str | Path | None = None) -> list[dict]:
    """Beyond the paper (b): the band-switch re-scores (:func:`~workbench.methods.arbiter.causal.band_switch_effects`)
    along the expert trajectories of ``tasks``, at ``steps_per_task`` evenly spread steps of each (each task's rows
    kept in ``cache_dir`` as it finishes; None keeps nothing)."""
    from workbench.agents.loop import Agent
    from workbench.eval.memory_base import expert_trajectories_for
    from workbench.eval.runner import RunConfig, select_tasks
    from workbench.eval.task_cache import TaskCache, analysis_key

    from workbench.methods.arbiter.causal import band_switch_effects
    from workbench.methods.arbiter.policy import ArbiterPolicy

    cache = TaskCache(cache_dir, "band_switches", analysis_key(lm, split=split, budget=budget,
                                                                per_transition=per_transition,
                                                                steps_per_task=steps_per_task))
    wanted = {t.task_id for t in select_tasks(RunConfig(out="-", split=split, tasks=tasks, memory="none"))}
    agent = None
    rows: list[dict] = []
    for expert in expert_trajectories_for(split):
        if expert.task_id not in wanted:
            continue
        if (done := cache.get(expert.task_id)) is None:
            agent = agent or Agent.from_model(lm)
            n = expert.n_steps
            at = sorted({round(i * (n - 1) / max(steps_per_task - 1, 1)) for i in range(min(steps_per_task, n))})
            done = band_switch_effects(agent, ArbiterPolicy(budget=budget), expert, expert.meta["admissible"],
                                       steps=at, per_transition=per_transition)
            cache.put(expert.task_id, done)
        rows += done
    return rows
