"""Notebook 04's report: AGMR's refinement tables, Table 1 and Table 2 as pages, and every caption.

Pure functions of what the notebook has computed or read: the refinement statistics per refined base
(:func:`workbench.methods.agmr.refine`'s return, ``condition -> stats``), the run folders of the evaluation
(``name -> load_run(folder)`` in the order of :func:`~workbench.studies.agmr_grids.agmr_configs`), the refinement
log (Figure 9) and Figure 6's cases (:func:`~workbench.studies.agmr_scenarios.refinement_cases`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.studies.agmr_scenarios import SCENARIOS
from workbench.studies.captions import identical_sentence, paired, paired_sentence
from workbench.studies.table_pages import TablePage

__all__ = ["REFINED", "REFINEMENT_KEYS", "AgmrSetting", "refined_bases", "refinement_table", "commits_by_pattern",
           "refinement_metrics", "table1_pairs", "table_pages", "refinement_caption", "commits_caption",
           "scenario_distribution_caption", "scenario_caption", "scenario_figure_caption", "case_caption"]

#: The condition each refinement variant's base is evaluated as.
REFINED = {"agmr": "agmr", "no-agr": "agmr-no-agr"}

#: The refinement statistics Table ``agmr_refinement`` shows, in order.
REFINEMENT_KEYS = ["tasks", "failures", "successes", "commits", "discarded", "rolled_back", "errors",
                   "mean_attempts_failure", "entries_before", "entries_after", "entries_refined", "segments_before",
                   "segments_after", "memory_tokens_before", "memory_tokens_after"]

#: Table 1's paired comparisons (those whose two conditions are rows).
TABLE1_PAIRS = (("agmr", "traj"), ("agmr", "awm"), ("agmr", "dc-rs"), ("traj", "none"), ("awm", "traj"),
                ("dc-rs", "traj"))


@dataclass(frozen=True)
class AgmrSetting:
    """How notebook 04's refinement and evaluation were run, as its pages say it."""

    refine_split: str
    refine_tasks: str
    split: str
    eval_tasks: str
    max_steps: int
    profile: str
    backend: str
    reflector_sees_plan: bool = False

    @property
    def command(self) -> str:
        return f"make reproduce (notebook 04, profile {self.profile}; LLM stages: {self.backend})"

    @property
    def reflector(self) -> str:
        """Which reflector made the bases, as the tables say it."""
        return REFLECTORS[self.reflector_sees_plan]


#: The reflector that made a base, as tables name it (by ``RefineConfig.reflector_sees_plan``).
REFLECTORS = {False: "m*, tau only (paper)", True: "sees the expert plan (oracle)"}


def runs_root(runs_dir: str | Path, reflector_sees_plan: bool) -> Path:
    """Notebook 04's runs folder: ``04_agmr`` for bases whose reflector saw the expert plan (every base refined before
    the option existed), ``04_agmr-plan-free`` for the paper's reflector, so the two never share a base or a run."""
    return Path(runs_dir) / ("04_agmr" if reflector_sees_plan else "04_agmr-plan-free")


def refined_bases(root: str | Path, model: str, variants: Sequence[str]) -> dict[str, str]:
    """Condition -> the folder of the base each refinement variant writes (``ROOT/<model>/bases/<variant>``)."""
    return {REFINED[v]: str(Path(root) / model / "bases" / v) for v in variants}


def refinement_table(stats: Mapping[str, dict], backend: str):
    """One row per refined base: the backend, the reflector (whether it saw the expert plan), then
    :data:`REFINEMENT_KEYS`."""
    import pandas as pd

    table = pd.DataFrame.from_dict({k: {key: s[key] for key in REFINEMENT_KEYS} for k, s in stats.items()},
                                   orient="index")
    table.insert(0, "backend", backend)
    table.insert(1, "reflector", [REFLECTORS[bool((s.get("config") or {}).get("reflector_sees_plan", True))]
                                  for s in stats.values()])
    return table


def commits_by_pattern(stats: Mapping[str, dict]):
    """Committed edits per ``branch/pattern`` (rows) and refined base (columns); empty when nothing committed."""
    import pandas as pd

    return pd.DataFrame({k: pd.Series(s["commits_by_branch_pattern"], dtype=float)
                         for k, s in stats.items()}).fillna(0).astype(int)


def refinement_metrics(stats: Mapping[str, dict]) -> dict:
    """metrics.json's ``refinement``: the table's numbers and the outcomes and patterns behind them."""
    keys = REFINEMENT_KEYS + ["outcomes", "commits_by_branch_pattern", "failure_patterns", "failure_rule_patterns"]
    return {"refinement": {k: {key: s[key] for key in keys} for k, s in stats.items()}}


def table1_pairs(conds: Sequence[str]) -> list[tuple[str, str]]:
    """Table 1's comparisons among the conditions that are rows."""
    return [p for p in TABLE1_PAIRS if set(p) <= set(conds)]


def _notes(runs: Mapping[str, tuple], setting: AgmrSetting) -> str:
    """How the refined bases were made and which episodes were read or adopted (one sentence per record)."""
    if setting.reflector_sees_plan:
        offline = (" (the deterministic offline algorithm, which reads each refinement task's expert plan)"
                   if setting.backend == "offline-alfworld" else " (its reflector shown each task's expert plan)")
    else:
        offline = (" (the deterministic offline algorithms; the reflector sees m* and tau only, as in the paper, "
                   "and takes the memory's own actions as its reference)" if setting.backend == "offline-alfworld"
                   else " (the reflector sees m* and tau only, as in the paper)")
    return (f"Refined on {setting.refine_split} {setting.refine_tasks} with the LLM stages on `{setting.backend}`"
            + offline + f"; episodes limited to {setting.max_steps} steps."
            + "".join(f" `{name}`: {a['episodes']} episodes "
                      + ("are Traj's (the refinement left their memory the same at every step)" if a.get("rule")
                         else f"read from `{a['source']}` (the same parameters)") + "."
                      for name, run in runs.items() for a in run[2].get("adopted", [])))


def _same_as_traj(runs: Mapping[str, tuple], name: str) -> str:
    """How many of a refined condition's episodes are Traj's (adopted: its memory was the same at every step)."""
    n = sum(a["episodes"] for a in runs[name][2].get("adopted", []) if a.get("rule"))
    return f"{n} of `{name}`'s {len(runs[name][0])} episodes are Traj's (the refinement left their memory as it was)"


def table_pages(runs: Mapping[str, tuple], setting: AgmrSetting, conditions: Sequence[str]) -> list[TablePage]:
    """Table 1 (``conditions`` and ``agmr``) and, where the variant without the refiner was run, Table 2."""
    notes = _notes(runs, setting)
    conds1 = [*conditions, "agmr"]
    pairs1 = table1_pairs(conds1)
    caption1 = ("Table 1: every memory condition on the same tasks with the same agent and dtype (`agmr`: Traj over "
                "the refined base), paired exact McNemar below.")
    if {"agmr", "traj"} <= set(runs):
        caption1 += (f" {paired_sentence(runs, 'agmr', 'traj')}. {_same_as_traj(runs, 'agmr')}, so it can differ "
                     "from Traj only on the others.")
    same = identical_sentence(runs, [c for c in conds1 if c in runs])
    caption1 += (" " + same if same else "")
    pages = [TablePage(f"agmr_table1_{setting.split}", tuple(conds1), f"AGMR Table 1 ({setting.split}, "
                       f"{setting.eval_tasks})", setting.command, notes, tuple(pairs1), caption1)]
    conds2 = [c for c in ("agmr-no-agr", "agmr") if c in runs]
    if len(conds2) == 2:
        r = paired(runs, "agmr", "agmr-no-agr")
        caption2 = ("Table 2: AGMR with and without the attention-guided refiner (`agmr-no-agr`: the reflector's "
                    f"edit alone), paired: {paired_sentence(runs, 'agmr', 'agmr-no-agr')}.")
        if r["rate_a"] == r["rate_b"]:
            caption2 += " The refiner leaves the success rate unchanged here."
        same = identical_sentence(runs, conds2)
        caption2 += (" " + same if same else "")
    else:
        caption2 = "Table 2: AGMR (the variant without the refiner was not run)."
    pages.append(TablePage(f"agmr_table2_{setting.split}", tuple(conds2), f"AGMR Table 2: w/o AGR ({setting.split}, "
                           f"{setting.eval_tasks})", setting.command, notes, (("agmr", "agmr-no-agr"),), caption2))
    return pages


# -- captions -------------------------------------------------------------------------------------------------


def refinement_caption(table, setting: AgmrSetting) -> str:
    """Caption of :func:`refinement_table`."""
    text = (f"Refinement of the memory base on {setting.refine_split} (`{setting.refine_tasks}`), one row per variant: "
            "tasks, failure and success branches, edits committed, discarded after a failed verification and rolled "
            "back, the mean attempts per failed task, and the base before / after (entries, segments, o200k tokens).")
    parts = [f"`{k}` committed {int(r['commits'])} edits ({int(r['entries_refined'])} of {int(r['entries_before'])} "
             f"entries refined)" for k, r in table.iterrows()]
    text += " " + "; ".join(parts) + "."
    if (table["commits"] == 0).all():
        text += " No edit was verified: every refined base is the default one."
    return text


def commits_caption(table) -> str:
    """Caption of :func:`commits_by_pattern`."""
    text = ("Committed edits by branch and by the pattern C diagnosed (`failure/edit`: an edit committed without a "
            "pattern, as the variant without the attention-guided refiner makes them).")
    for col in table.columns:
        top = table[col].idxmax()
        if table[col].max() > 0:
            text += f" `{col}`: {int(table[col].max())} of {int(table[col].sum())} on `{top}`."
    if not any(str(i).startswith("success/") for i in table.index):
        text += " No success-branch pruning was committed."
    return text


def scenario_distribution_caption(records: Sequence, backend: str | None = None) -> str:
    """Caption of Figure 9 (:func:`~workbench.viz.scenario_distribution_figure` over the same records); with the
    refinement's LLM ``backend``, an offline one is named as what makes the two bars equal."""
    fails = [r for r in records if r.branch == "failure"]
    refiner = Counter(r.final_pattern for r in fails)
    rule = Counter(r.final_rule_pattern for r in fails)
    text = (f"Figure 9: how the {len(fails)} failed refinement tasks split over the three scenarios, as diagnosed at "
            "each task's final iteration by the refiner (blue) and by the rule on C (orange).")
    counts = ", ".join(f"{s.replace('_', ' ')} {refiner[s]} / {rule[s]}" for s in SCENARIOS)
    text += f" Refiner / rule: {counts}."
    if all(refiner[s] == rule[s] for s in SCENARIOS):
        text += " The refiner and the rule agree on every count."
        if backend is not None and backend.startswith("offline"):
            text += (f" With `{backend}` the refiner's pattern is the rule's by construction (the offline stand-in "
                     "applies the rule), so the equal bars say nothing of how a language model would judge.")
    missing = sum(1 for r in fails if r.final_rule_pattern is None)
    if missing:
        text += f" {missing} tasks have no diagnosis."
    return text


def scenario_caption(table, split: str) -> str:
    """Caption of :func:`~workbench.studies.agmr_scenarios.success_by_scenario`: where AGMR is Traj."""
    text = (f"Success on {split} by the scenario of the entry Traj retrieved for each task (`n` tasks per group; "
            "`success-only`: an entry only successes retrieved during refinement; `not refined`: no refinement task "
            "retrieved it), per condition.")
    if {"agmr", "traj"} <= set(table.columns):
        same = [g for g, r in table.iterrows() if r["agmr"] == r["traj"]]
        if same:
            text += f" AGMR equals Traj in {', '.join(f'`{g}`' for g in same)}"
            text += "." if len(same) < len(table) else ": in every group."
    return text


def scenario_figure_caption(table) -> str:
    """Caption of Figure 7."""
    text = "Figure 7: the success-by-scenario table as bars, one group of bars per scenario (n tasks below each)."
    if {"agmr", "traj"} <= set(table.columns):
        differ = [g for g, r in table.iterrows() if r["agmr"] != r["traj"]]
        text += (f" AGMR's bar differs from Traj's only in {', '.join(f'`{g}`' for g in differ)}." if differ
                 else " AGMR's bars are Traj's in every group.")
    return text


def case_caption(case: dict) -> str:
    """Caption of one Figure 6 case (:func:`~workbench.studies.agmr_scenarios.refinement_cases`)."""
    r, before, after = case["record"], case["before"], case["after"]
    pattern = r.committed_pattern or r.first_rule_pattern or r.branch
    segments = case.get("segments", (None, None))
    outcome = {True: "success", False: "failure"}
    if r.branch != "failure":
        return (f"Figure 6: `{r.task_id}` ({r.branch} branch, {pattern}, entry `{r.entry_id}`): C of the run with the "
                f"retrieved m* (left: {outcome[bool(before.success)]}, {segments[0]} segments) and with the pruned m' "
                f"(right: {outcome[bool(after.success)]}, {segments[1]} segments).")
    taken = ("the target marked where the corrected action was taken" if after.critical_step is not None
             else "the corrected action was never taken")
    return (f"Figure 6: `{r.task_id}` ({r.branch} branch, {pattern}, entry `{r.entry_id}`): C of the run with the "
            f"retrieved m* (left: {outcome[bool(before.success)]}, {segments[0]} segments; critical step boxed, "
            f"target segment marked) and of the verification run with the committed m' (right: "
            f"{outcome[bool(after.success)]}, {segments[1]} segments; {taken}).")

