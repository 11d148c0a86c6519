"""Notebook 05's report: MemArbiter's table pages, its result frames and every caption, from run folders and rows.

Everything here is a pure function of what the notebook has already read or computed: the run folders
(``name -> load_run(folder)``, the grid's :func:`~workbench.studies.arbiter_grids.arbiter_configs` in their order,
the reference run of the action agent alone, the written-action and budget-sensitivity runs) and the rows of the
studies beyond the paper. The notebook writes what these return (:class:`~workbench.studies.table_pages.TablePage`
through the table renderer, frames through ``Reports.table``), so a table's notes and caption are tested here,
not pasted into a cell.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.attention.items import focal_vs_ambient
from workbench.studies.arbiter_grids import METHODS, REFERENCE, condition_name
from workbench.studies.arbiter_tables import behaviour_table, budget_sensitivity, verbatim_behaviour_table
from workbench.studies.band_switches import summarize_band_switches
from workbench.studies.captions import (
    ALPHA,
    adopted_episodes,
    code_list,
    identical_groups,
    largest,
    missing,
    paired,
    paired_sentence,
    pct,
    significance,
    upper_first,
    versus,
)
from workbench.studies.failure_ablation import summarize_failure_ablation
from workbench.studies.loop_switch import summarize_loop_switch
from workbench.studies.parting import parting_sentence, parting_tables
from workbench.studies.table_pages import TablePage

__all__ = ["ArbiterSetting", "table2_conditions", "ablation_conditions", "table2_page", "reference_page",
           "table4_page", "verbatim_page", "parting_vs_react", "parting_ablations", "table4_sr", "table5",
           "verbatim_table5", "sr_curves", "focal_vs_ambient_table", "band_switch_table", "loop_switch_table",
           "failure_ablation_table", "rows_by_task", "condition_metrics", "verbatim_metrics", "check_budgets",
           "budget_sensitivity_table", "sensitivity_metrics", "parting_vs_react_caption",
           "parting_ablations_caption", "first_step_caption", "table4_sr_caption", "table5_caption",
           "verbatim_table5_caption", "failure_ablation_caption", "sr_at_k_caption", "sensitivity_caption",
           "budget_curve_caption", "focal_vs_ambient_caption", "band_switch_caption", "loop_switch_caption"]

FULL_BUDGET = 500  # the budget of the ablations, the written-action runs and the analyses beyond the paper


@dataclass(frozen=True)
class ArbiterSetting:
    """How notebook 05's runs were made, as its pages say it."""

    split: str
    tasks: str
    max_steps: int
    profile: str
    backend: str | None = None
    decode: str = "score"

    @property
    def command(self) -> str:
        return f"make reproduce (notebook 05, profile {self.profile})"

    @property
    def notes(self) -> str:
        return (f"Working-memory layout (goal, P_t, current observation); state parser and writer on "
                f"`{self.backend or 'offline-alfworld'}`; actions decoded `{self.decode}`; episodes limited to "
                f"{self.max_steps} steps.")


def table2_conditions(budgets: Sequence[int]) -> list[str]:
    """Table 2's rows: the three methods at each budget (``arbiter-500``, ``flat-retrieval-500``, ...)."""
    return [condition_name(m, b) for b in budgets for m in METHODS]


def ablation_conditions(ablations: Sequence[str]) -> list[str]:
    """Table 4's rows: the full method at 500, then each ablation at 500."""
    return [condition_name("arbiter", FULL_BUDGET)] + [condition_name("arbiter", FULL_BUDGET, a) for a in ablations]


def _same_memory_notes(runs: Mapping[str, tuple]) -> str:
    """The runs that adopted episodes of a smaller budget because the memory was the same at every step."""
    out = ""
    for c, (_, _, config) in runs.items():
        same = [a for a in config.get("adopted", []) if a.get("rule") == "same memory"]
        if same:
            out += (f" `{c}`: {sum(a['episodes'] for a in same)} episodes are `{Path(same[0]['source']).name}`'s, "
                    "whose memory was the same at every step (the budget did not bind): adopted, not played.")
    return out


def _ahead_sentence(runs: Mapping[str, tuple], pairs: Sequence[tuple[str, str]], who: str) -> str:
    """"``who`` is significantly ahead in every pair" when it is, else each pair's sentence."""
    results = [paired(runs, a, b) for a, b in pairs]
    if results and all(r["diff"] and r["diff"] > 0 and r["p_mcnemar"] < ALPHA for r in results):
        return f"{who} is ahead in every pair (exact McNemar p < {ALPHA})."
    return "; ".join(paired_sentence(runs, a, b) for a, b in pairs) + "."


def table2_page(runs: Mapping[str, tuple], setting: ArbiterSetting, budgets: Sequence[int]) -> TablePage:
    """Table 2: the three methods at each budget, MemArbiter paired with each flat baseline at its budget."""
    conds = table2_conditions(budgets)
    pairs = [(condition_name("arbiter", b), condition_name(m, b)) for b in budgets for m in METHODS[1:]]
    same = [g for g in identical_groups(runs, conds) if len({runs[c][2]["run"]["memory"] for c in g}) == 1]
    caption = ("Success of MemArbiter, Flat Retrieval and Flat Recency at each budget on the same tasks (by task "
               "type, SR@k and how the episodes move below), MemArbiter paired with each flat baseline at its "
               f"budget: {_ahead_sentence(runs, pairs, 'MemArbiter')}")
    if same:
        caption += (" " + "; ".join(f"{code_list(g)} succeed on exactly the same tasks" for g in same)
                    + ": the larger budget changed no outcome.")
    return TablePage(f"arbiter_table2_{setting.split}", tuple(conds), f"MemArbiter Table 2 ({setting.split}, "
                     f"{setting.tasks})", setting.command, setting.notes + _same_memory_notes(runs), tuple(pairs),
                     caption)


def reference_page(runs: Mapping[str, tuple], reference: tuple, setting: ArbiterSetting,
                   budgets: Sequence[int]) -> TablePage:
    """Every method at every budget against the action agent alone (``none``: its raw history, no P_t)."""
    conds = table2_conditions(budgets)
    n_read = adopted_episodes(reference[2], read=True)
    notes = (setting.notes + f" `{REFERENCE}`: the action agent alone, the raw history in its prompt (ReAct "
             "layout, no P_t)" + (f"; {n_read} episodes read from notebook 01's run of the same parameters."
                                  if n_read else "."))
    both = {**runs, REFERENCE: reference}
    verdict = {c: paired(both, c, REFERENCE) for c in conds}
    above = [c for c, r in verdict.items() if r["diff"] and r["diff"] > 0 and r["p_mcnemar"] < ALPHA]
    below = [c for c, r in verdict.items() if r["diff"] and r["diff"] < 0 and r["p_mcnemar"] < ALPHA]
    level = [c for c in conds if c not in above + below]
    found = [f"{what} {code_list(cs)}" for what, cs in (("significantly above it:", above),
                                                          ("significantly below it:", below),
                                                          ("not distinguishable from it:", level)) if cs]
    caption = (f"Each method against the action agent alone with its raw history (`{REFERENCE}`, "
               f"{pct(reference[1].get('success_rate'))}: the ReAct layout, no P_t), paired exact McNemar; "
               f"a method below it shows the agent less useful memory than the history it replaces. "
               f"{upper_first('; '.join(found))}.")
    return TablePage(f"arbiter_vs_react_{setting.split}", (REFERENCE, *conds), "MemArbiter and its baselines against "
                     f"the action agent alone ({setting.split}, {setting.tasks})", setting.command, notes,
                     tuple((c, REFERENCE) for c in conds), caption)


def table4_page(runs: Mapping[str, tuple], setting: ArbiterSetting, ablations: Sequence[str]) -> TablePage:
    """Table 4: the full method at 500 and its ablations, each paired with the full method."""
    abl = ablation_conditions(ablations)
    pairs = [(abl[0], c) for c in abl[1:]]
    caption = ("MemArbiter at 500 tokens and its ablations (`no-banks`: one pool; `no-signals`: fixed allocation; "
               f"`no-gate`: every item shown), each paired with the full method (`{abl[0]}`, "
               f"{pct(runs[abl[0]][1].get('success_rate'))}): {versus(runs, abl[0], abl[1:])}.")
    return TablePage(f"arbiter_table4_{setting.split}", tuple(abl), f"MemArbiter Table 4: ablations at 500 "
                     f"({setting.split}, {setting.tasks})", setting.command, setting.notes, tuple(pairs), caption)


def verbatim_page(vruns: Mapping[str, tuple], setting: ArbiterSetting, tasks: str) -> TablePage:
    """The written-action runs (:func:`~workbench.studies.arbiter_grids.verbatim_configs`: the three methods at
    500, then the action agent alone), each paired with MemArbiter."""
    names = list(vruns)
    notes = setting.notes.replace(f"actions decoded `{setting.decode}`",
                                  "actions written by the agent and executed as written")
    notes += "".join(f" `{n}`: the action agent alone, its raw history in the prompt (ReAct layout), written too"
                     + ("; read from notebook 06's run of the same parameters."
                        if any("rule" not in a for a in vruns[n][2].get("adopted", [])) else ".") for n in names[3:])
    pairs = [(names[0], n) for n in names[1:]]
    caption = ("The three methods at 500 tokens and the action agent alone with their actions written and executed "
               "as written (the paper's setting: a command the game cannot execute fails), each paired with "
               f"MemArbiter (`{names[0]}`, {pct(vruns[names[0]][1].get('success_rate'))}): "
               f"{versus(vruns, names[0], names[1:])}.")
    return TablePage(f"arbiter_verbatim_{setting.split}", tuple(names), f"MemArbiter with written actions "
                     f"({setting.split}, {tasks})", setting.command, notes, tuple(pairs), caption)


# -- frames ---------------------------------------------------------------------------------------------------


def parting_vs_react(runs: Mapping[str, tuple], reference: tuple):
    """Where each method's (at 500) paired episodes part from the action agent alone's."""
    return parting_tables({c: (runs[c][0], reference[0]) for c in table2_conditions([FULL_BUDGET])}, "method",
                          "ReAct")


def parting_ablations(runs: Mapping[str, tuple], ablations: Sequence[str]):
    """Where the full method's paired episodes part from each ablation's."""
    full, *abl = ablation_conditions(ablations)
    return parting_tables({c: (runs[full][0], runs[c][0]) for c in abl}, "MemArbiter", "ablation")


def table4_sr(runs: Mapping[str, tuple], ablations: Sequence[str]):
    """Success, SR@15 and SR@50 (%) of the full method and each ablation, and the difference in success from the
    full method (points)."""
    import pandas as pd

    abl = ablation_conditions(ablations)
    sr = pd.DataFrame({c: {"success_%": 100 * runs[c][1]["success_rate"], "SR@15_%": 100 * runs[c][1]["sr_at_k"]["15"],
                           "SR@50_%": 100 * runs[c][1]["sr_at_k"]["50"]} for c in abl}).T
    sr["Δ success (pts)"] = sr["success_%"] - sr.loc[abl[0], "success_%"]
    return sr


def check_budgets(table, budgets: Mapping[str, int | None]) -> None:
    """Raise if a row's largest P_t exceeds its run's budget (``max_P_t_o200k``; NaN where no P_t)."""
    import pandas as pd

    over = [f"{n}: {table.loc[n, 'max_P_t_o200k']} > {b}" for n, b in budgets.items()
            if b is not None and n in table.index and pd.notna(table.loc[n, "max_P_t_o200k"])
            and table.loc[n, "max_P_t_o200k"] > b]
    if over:
        raise ValueError(f"P_t larger than its budget ({'; '.join(over)}): the assembly must never exceed it")


def _budgets(runs: Mapping[str, tuple]) -> dict[str, int | None]:
    return {n: r[2].get("run", {}).get("budget") for n, r in runs.items()}


def table5(runs: Mapping[str, tuple], reference: tuple):
    """Table 5 over the grid's runs, with the action agent alone first (defining none of the common-failure
    sets); checked: no P_t larger than its budget."""
    table = behaviour_table({REFERENCE: reference[0], **{c: r[0] for c, r in runs.items()}})
    check_budgets(table, _budgets(runs))
    return table


def verbatim_table5(vruns: Mapping[str, tuple]):
    """Table 5 of the written-action runs; checked: no P_t larger than its budget."""
    table = verbatim_behaviour_table({n: r[0] for n, r in vruns.items()})
    check_budgets(table, _budgets(vruns))
    return table


def budget_sensitivity_table(runs: Mapping[str, tuple], sruns: Mapping[str, tuple]):
    """:func:`~workbench.studies.arbiter_tables.budget_sensitivity` of the sensitivity runs ``sruns`` beside the
    grid's ``runs``; checked: no P_t larger than its budget."""
    table = budget_sensitivity({**runs, **sruns}, list(sruns))
    check_budgets(table, dict(zip(table.index, table["budget"])))
    return table


def sensitivity_metrics(table, tasks: str) -> dict:
    """metrics.json's ``budget_sensitivity``: the tasks and the table's rows."""
    return {"budget_sensitivity": {"tasks": tasks, "rows": json.loads(table.to_json(orient="index"))}}


def sr_curves(runs: Mapping[str, tuple], conds: Sequence[str], reference: tuple) -> dict[str, dict]:
    """Figure 3's curves: SR@k of each condition, and of the action agent alone (``REFERENCE``)."""
    return {**{c: runs[c][1]["sr_at_k"] for c in conds}, REFERENCE: reference[1]["sr_at_k"]}


def focal_vs_ambient_table(rows: Sequence[dict]):
    """Beyond the paper (a): focal vs ambient attention per bank (:func:`focal_vs_ambient`), a row per bank."""
    import pandas as pd

    return pd.DataFrame(focal_vs_ambient(rows)).T


def band_switch_table(rows: Sequence[dict]):
    """Beyond the paper (b): the band switches by bank and transition (:func:`summarize_band_switches`)."""
    import pandas as pd

    return pd.DataFrame(summarize_band_switches(rows)).T


def loop_switch_table(rows: Sequence[dict], condition: str = condition_name("arbiter", FULL_BUDGET)):
    """Beyond the paper (c): the loop-state switch in one row (:func:`summarize_loop_switch`)."""
    import pandas as pd

    return pd.DataFrame([summarize_loop_switch(rows)], index=[condition])


def failure_ablation_table(rows: Sequence[dict]):
    """The written command at the first repeated failure, per left-out item (:func:`summarize_failure_ablation`)."""
    import pandas as pd

    return pd.DataFrame(summarize_failure_ablation(rows)).T


def rows_by_task(rows: Sequence[dict]) -> dict[str, list[dict]]:
    """Item-attention rows grouped by task id (the explorer's ``utilization``)."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["task_id"], []).append(r)
    return out


def condition_metrics(runs: Mapping[str, tuple], attention_rows: Sequence[dict], switch_rows: Sequence[dict]) -> dict:
    """metrics.json's numbers of the grid and of beyond the paper (a) and (b)."""
    return {"conditions": {c: {k: r[1].get(k) for k in ("n_episodes", "success_rate", "avg_steps", "sr_at_k",
                                                          "max_memory_o200k")} for c, r in runs.items()},
            "focal_vs_ambient": focal_vs_ambient(attention_rows),
            "band_switches": summarize_band_switches(switch_rows), "band_switch_rows": len(switch_rows)}


def verbatim_metrics(vruns: Mapping[str, tuple], table) -> dict:
    """metrics.json's numbers of the written-action runs: each run's success and its Table 5 row."""
    return {"verbatim": {n: {**{k: r[1].get(k) for k in ("n_episodes", "success_rate", "avg_steps")},
                             **json.loads(table.loc[n].to_json())} for n, r in vruns.items()}}


# -- captions of the frames -----------------------------------------------------------------------------------


def _parting_caption(table, side: str, other: str, what: str) -> str:
    return (f"For the tasks only one side solves ({what}), the step at which the two episodes first take different "
            f"actions, per task type (`all` first): a win that parts at step 0 comes from the first prompt alone. "
            + parting_sentence(table, side, other))


def parting_vs_react_caption(table) -> str:
    """Caption of :func:`parting_vs_react`."""
    return _parting_caption(table, "method", "ReAct", "a method at 500, or the action agent alone")


def parting_ablations_caption(table) -> str:
    """Caption of :func:`parting_ablations`: a component that acts on the history parts after step 0."""
    return _parting_caption(table, "MemArbiter", "ablation", "the full method at 500, or an ablation")


def first_step_caption(table) -> str:
    """Caption of :func:`~workbench.studies.first_step_ablation.summarize_first_step_ablation`'s frame."""
    allrows = table[[i.endswith("|all") for i in table.index]]
    n = largest(allrows["states"]) if len(allrows) else 0
    text = (f"At the {n} states where MemArbiter's (500) first action differs from the action agent alone's, step 0 "
            "scored again with a piece of P_t left out: `keeps` is the share whose choice stays MemArbiter's, "
            "`reverts` the share that takes the action agent alone's (`|won`: MemArbiter's successful episodes).")
    if not n:
        return text
    shown = allrows["keeps"].get("as shown|all")
    banks = allrows.drop(index=[i for i in ("as shown|all", "react|all", "no items|all") if i in allrows.index])
    banks = banks[banks["reverts"].notna()]
    if shown is not None:
        text += f" The replay reproduces {pct(shown)} of the recorded actions;"
    if "react|all" in allrows.index:
        text += f" as the ReAct prompt {pct(allrows.loc['react|all', 'reverts'])} revert"
    if len(banks):
        top = banks["reverts"].idxmax()
        text += (f", and of the banks, leaving out the {top.split('|')[0].removeprefix('no ')} bank reverts the most "
                 f"({pct(banks.loc[top, 'reverts'])}).")
    return text


def table4_sr_caption(sr) -> str:
    """Caption of :func:`table4_sr`."""
    text = ("Success, SR@15 and SR@50 (% of tasks solved within 15 and 50 steps) of MemArbiter at 500 and each "
            "ablation, and each one's difference in success from the full method (points).")
    worst = sr["Δ success (pts)"].idxmin()
    if sr.loc[worst, "Δ success (pts)"] < 0:
        text += f" `{worst}` costs the most ({sr.loc[worst, 'Δ success (pts)']:+.1f} pts)."
    return text


def table5_caption(table, runs: Mapping[str, tuple]) -> str:
    """Caption of :func:`table5`: (a) empty by construction for a scoring agent, (b), and how big P_t gets."""
    import pandas as pd

    text = ("Table 5: (a) one-step recovery and failed-action repetition on the common-failure tasks of each row's "
            "budget (`_own`: on its own failure tasks), adjacent repetition and state-action recurrence; (b) the "
            "Episodic bank's share of P_t at a failed action and at the next prompt; and P_t's size (o200k) against "
            "the budget.")
    if (table["failed_executions"].fillna(0) == 0).all():
        text += (" No row failed a single command (the agent scores admissible commands), so (a) and (b) are "
                 "empty by construction: their measurement in the paper's setting is the written-action table.")
    cut = table["steps_with_items_cut"] if "steps_with_items_cut" in table else None
    cut = {c: cut[c] for c in runs if cut is not None and c in cut.index and pd.notna(cut[c])}
    if cut:
        text += (" Steps at which the budget left out an item the gate showed: "
                 + ", ".join(f"`{c}` {pct(v)}" for c, v in cut.items()) + ".")
    return text


def verbatim_table5_caption(table) -> str:
    """Caption of :func:`verbatim_table5`."""
    n = largest(table["common_failure_tasks"]) if len(table) else 0
    methods = [i for i in table.index if not str(i).startswith(f"{REFERENCE}-")]
    rep = table.loc[methods, "failed_action_repetition_own"].dropna() if methods else []
    text = (f"Table 5 with the actions written and executed as written: (a) on the {n} tasks on which all three "
            "methods failed at least one command (the common-failure tasks; the action agent alone, measured on "
            "the same tasks, defines none of them) and on each row's own failure tasks (`_own`).")
    if len(rep):
        hi, lo = rep.idxmax(), rep.idxmin()
        text += (f" On their own failure tasks `{hi}` repeats a failed command most ({pct(rep[hi])} of "
                 f"its failures), `{lo}` least ({pct(rep[lo])}).")
    if n == 0:
        text += " No task failed a command under all three methods: the common-failure columns are empty."
    elif n < 5:
        text += f" {n} common-failure tasks are too few to compare the (a) columns."
    return text


def failure_ablation_caption(table) -> str:
    """Caption of :func:`failure_ablation_table`."""
    n = largest(table["states"]) if len(table) else 0
    text = (f"At the first repeated failed command of each written MemArbiter episode ({n} states), how often the "
            "agent writes the failed command again with P_t as shown and with the items that record the failure "
            "left out (Constraint, Episodic, neither) or kept with the command unquoted.")
    if n and "as shown" in table.index:
        rest = table.drop(index="as shown")["repeats_failed"].dropna()
        if len(rest):
            low = rest.idxmin()
            text += (f" As shown it repeats at {pct(table.loc['as shown', 'repeats_failed'])}; `{low}` lowers it "
                     f"most, to {pct(rest[low])}.")
    elif not n:
        text += " No episode repeated a failed command on these tasks: nothing to score."
    return text


def sr_at_k_caption(curves: Mapping[str, Mapping[str, float]]) -> str:
    """Caption of Figure 3: which curves are one."""
    text = ("Figure 3: the share of tasks solved within k steps for every condition, and the action agent alone "
            f"(`{REFERENCE}`) as reference.")
    groups: dict[tuple, list[str]] = {}
    for name, curve in curves.items():
        points = tuple(sorted((int(k), None if missing(v) else round(v, 12)) for k, v in curve.items()))
        groups.setdefault(points, []).append(name)
    same = [g for g in groups.values() if len(g) > 1]
    if same:
        text += " " + "; ".join(f"{code_list(g)} are one curve" for g in same) + " (identical at every k)."
    return text


def sensitivity_caption(table, tasks: str) -> str:
    """Caption of :func:`~workbench.studies.arbiter_tables.budget_sensitivity`'s frame."""

    n = largest(table["tasks"]) if len(table) else 0
    text = (f"MemArbiter and Flat Retrieval at budgets that cut their blocks beside 500 and 750, on the same {n} "
            f"tasks (`{tasks}`), each paired with its 500 run (exact McNemar); `same_episode_as_500_%`: tasks whose "
            "episode is 500's (the budget never changed what the agent saw there).")
    diff = next((c for c in table.columns if c.startswith("diff_vs_")), None)
    parts = []
    for name, r in table.iterrows():
        if diff is None or missing(r.get(diff)):
            continue
        same = r.get(next((c for c in table.columns if c.startswith("same_episode_as_")), ""), None)
        if same == 100:
            parts.append(f"`{name}` is 500 on every task")
        elif r.get("only_this") == 0 and r.get(diff.replace("diff_vs_", "only_").removesuffix("_pp")) == 0:
            parts.append(f"`{name}` solves the same tasks as 500")
        else:
            parts.append(f"`{name}` {r[diff]:+.1f} pts ({significance(r['p_mcnemar'])})")
    if parts:
        text += " " + upper_first("; ".join(parts)) + "."
    return text


def budget_curve_caption(table) -> str:
    """Caption of the budget curve: where it is flat."""
    text = ("Success against the budget for MemArbiter and Flat Retrieval on the sensitivity tasks; the dotted "
            "lines mark each method's median block size uncut.")
    flat = []
    for method, rows in table.groupby("method", sort=False):
        success = rows.sort_values("budget")[["budget", "success_%"]].values.tolist()
        k = len(success) - 1
        while k > 0 and success[k - 1][1] == success[-1][1]:
            k -= 1
        if k < len(success) - 1:
            flat.append(f"`{method}` is flat from {int(success[k][0])} tokens up")
    if flat:
        text += " " + "; ".join(flat) + " (the same success at every larger budget)."
    return text


def focal_vs_ambient_caption(table) -> str:
    """Caption of :func:`focal_vs_ambient_table`: which banks could be compared at all."""
    text = ("Per bank, the retrieval heads' attention per token (`u_token`, 1 = an average prompt token) and whole "
            "mass (`u`) of the focal and the ambient items at the same steps; `steps` counts the steps at which "
            "the bank showed both bands (only those compare).")
    both = table[table["steps"] > 0] if "steps" in table else table.iloc[0:0]
    none = [b for b in table.index if b not in both.index]
    if len(both):
        text += " " + "; ".join(f"`{b}` ({int(r['steps'])} steps): focal items read more per token at "
                                f"{pct(r['focal_higher'])} of them" for b, r in both.iterrows()) + "."
    if none:
        text += f" {code_list(none)} never showed both bands at one step: no comparison."
    return text


def band_switch_caption(table) -> str:
    """Caption of :func:`band_switch_table`: which switch moves the choice most, and how little p moves."""
    text = ("One item's band switched at a recorded state and the state scored again: per bank and transition "
            "(F focal, A ambient, H hidden; `all|` pools the banks), the switches (`n`), the mean change in "
            "p(chosen action) and the share whose choice flips.")
    banks = table[[not i.startswith("all|") for i in table.index]]
    if len(banks) and banks["flipped"].max() == 0:
        text += " No switch flips the choice."
    elif len(banks):
        top = banks["flipped"].idxmax()
        text += f" `{top}` flips the choice most often ({pct(banks.loc[top, 'flipped'])} of {int(banks.loc[top, 'n'])})"
        move = table["mean_delta_p"].abs().max()
        text += f"; the mean change in p(chosen) stays within ±{move:.3f} in every row." if move < 0.05 else "."
    return text


def loop_switch_caption(table) -> str:
    """Caption of :func:`loop_switch_table`."""
    r = table.iloc[0]
    text = (f"At the first loop state of each failed MemArbiter (500) episode ({int(r['states'])} states, "
            f"{int(r['replayed_same'])} replayed to the same choice), scored again with every hidden Episodic item "
            f"shown focal ({int(r['with_hidden_episodic'])} states had one).")
    if r["with_hidden_episodic"]:
        text += (f" p(chosen) goes from {r['p_chosen']:.3f} as shown to {r['p_chosen_shown']:.3f} on average; the "
                 f"choice flips at {pct(r['flipped'])} and leaves the loop at {pct(r['leaves_loop'])} of them.")
    return text
