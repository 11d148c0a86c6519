"""AGMR's figures (6, 7, 9) and the refinement explorer.

Figures are pure functions of result objects. The explorer reads a refined base folder and writes only into a
copy of it that the user names (never the folder it reads, never the default base), so exploring cannot change a
committed result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path

from matplotlib.figure import Figure

from workbench.envs.memory_base import default_memory_base
from workbench.memory.base import MemoryBase
from workbench.methods.agmr.refine_folder import load_executions, load_log
from workbench.methods.agmr.verify import recorded_verifier
from workbench.viz.curves import legend_outside
from workbench.viz.utilization import (
    C_LABEL,
    episode_utilization_figure,
    figure_image,
    utilization_figure,
)

__all__ = [
    "SCENARIO_LABELS",
    "refinement_case_figure",
    "refinement_explorer",
    "scenario_distribution_figure",
    "scenario_success_figure",
]

SCENARIO_LABELS = {"attended_but_wrong": "1: attended but wrong", "missed_relevant": "2: missed relevant",
                   "distracted_by_irrelevant": "3: distracted by irrelevant"}


def scenario_distribution_figure(records: Sequence, title: str = "Scenarios among failed refinement tasks") -> Figure:
    """Figure 9: how the failed refinement tasks split over the three patterns (the refiner's, and the rule's), as
    diagnosed in each task's final refinement iteration (the paper's definition).

    Under the bars the figure says on how many tasks the refiner and the rule on C name the same pattern (equal
    bars alone would not say whether they agree task by task).

    Args:
        records: :class:`~workbench.methods.agmr.TaskRecord` s (``load_log(root)``).
    """
    fails = [r for r in records if r.branch == "failure"]
    fig = Figure(figsize=(7.5, 3.4), layout="constrained")
    ax = fig.subplots()
    keys = list(SCENARIO_LABELS)
    refiner = Counter(r.final_pattern for r in fails)
    rule = Counter(r.final_rule_pattern for r in fails)
    x = range(len(keys))
    for bars in (ax.bar([i - 0.2 for i in x], [refiner[k] for k in keys], width=0.4, label="refiner", color="#4c72b0"),
                 ax.bar([i + 0.2 for i in x], [rule[k] for k in keys], width=0.4, label="rule on C", color="#dd8452")):
        ax.bar_label(bars, fontsize=7)
    ax.margins(y=0.12)
    ax.set_xticks(list(x), [SCENARIO_LABELS[k] for k in keys], fontsize=8)
    ax.set_xlabel("diagnosed pattern (final refinement iteration)", fontsize=8)
    ax.set_ylabel("failed refinement tasks")
    none = sum(1 for r in fails if r.final_rule_pattern is None)
    ax.set_title(f"{title} (n={len(fails)}" + (f", {none} without a diagnosis)" if none else ")"), fontsize=9)
    legend_outside(ax)
    if fails:
        agree = sum(1 for r in fails if r.final_pattern == r.final_rule_pattern)
        fig.supxlabel(f"refiner and rule on C name the same pattern on {agree} of {len(fails)} tasks"
                      + (": the bars are equal" if agree == len(fails) else ""), fontsize=8)
    return fig


def scenario_success_figure(table, title: str = "Success by scenario group") -> Figure:
    """Figure 7: success per scenario group (rows of :func:`~workbench.methods.agmr.success_by_scenario`) and
    condition (its columns other than ``n``)."""
    conds = [c for c in table.columns if c != "n"]
    fig = Figure(figsize=(8.5, 3.4), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(len(conds), 1)
    for j, c in enumerate(conds):
        ax.bar([i + (j - (len(conds) - 1) / 2) * width for i in range(len(table))], 100 * table[c].fillna(0),
               width=width, label=c)
    ax.set_xticks(range(len(table)), [f"{SCENARIO_LABELS.get(g, g)}\n(n={int(n)})" for g, n in table["n"].items()],
                  fontsize=7)
    ax.set_xlabel("scenario group of the entry retrieved for the task (n: evaluation tasks)", fontsize=8)
    ax.set_ylabel("success (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=9)
    legend_outside(ax, title="condition", title_fontsize=8)
    return fig


def refinement_case_figure(case: dict, max_step_labels: int = 12) -> Figure:
    """Figure 6 for one case of :func:`~workbench.methods.agmr.refinement_cases`: C with m* (left) and with the
    committed m' (right), critical step and target marked.

    Both panels share one colour scale and one colorbar, so a darker cell is more utilization in either panel;
    each panel is as wide as its episode is long (within limits), and at most ``max_step_labels`` steps of each
    are labelled (every k-th one, plus the critical step).
    """
    r = case["record"]
    recs = [case["before"], case["after"]]
    mats = [rec.matrix() for rec in recs]
    values = [float(v) for m in mats for v in (m.C.min(), m.C.max()) if m.C.numel()]
    vmin, vmax = (min(values), max(values)) if values else (None, None)
    steps = [max(m.C.shape[1], 1) for m in mats]
    ratios = [min(max(n, 12), 40) for n in steps]  # short episodes keep readable columns, long ones a bounded panel
    fig = Figure(figsize=(min(6.0 + 0.17 * sum(ratios), 17), 4.8), layout="constrained")
    axes = fig.subplots(1, 2, width_ratios=ratios)
    for ax, rec, label in zip(axes, recs, ("before (m*)", "after (m', verified)")):
        acts = [t.splitlines()[-1].removeprefix(">").strip() if t else "" for t in rec.segment_texts]
        utilization_figure(rec.matrix(), segment_labels=acts, step_labels=rec.actions, critical_step=rec.critical_step,
                           ideal_segment=rec.ideal_segment, ax=ax, max_step_labels=max_step_labels, vmin=vmin,
                           vmax=vmax, colorbar=False, label_chars=30,
                           title=f"{label}: {'success' if rec.success else 'failure'}, {len(acts)} segments, "
                                 f"{len(rec.actions)} steps")
    if axes[0].images:
        fig.colorbar(axes[0].images[0], ax=list(axes), label=f"{C_LABEL}, both panels", shrink=0.9)
    notes = [n for ax in axes for n in ax.get_xlabel().removeprefix("decision step").strip(" ()").split("; ") if n]
    for ax in axes:  # the marks' key once, under both panels
        ax.set_xlabel("decision step")
    if notes:
        fig.supxlabel("; ".join(dict.fromkeys(notes)), fontsize=8)
    pattern = r.committed_pattern or r.first_rule_pattern or r.branch
    fig.suptitle(f"{r.task_id.split('/')[1] if '/' in r.task_id else r.task_id} · {r.branch} · {pattern} · entry "
                 f"{r.entry_id}", fontsize=9)
    return fig


def _html_attempt(r, a) -> str:
    rule = a.rule or {}
    parts = [f"<p><b>{escape(r.task_id)}</b> · {r.branch} branch · outcome <b>{r.outcome}</b> · entry "
             f"<code>{escape(str(r.entry_id))}</code> · attempt {a.n} of {len(r.attempts)}</p>"]
    if a.reflection and "critical_step" in a.reflection:
        parts.append(f"<p>critical step u{a.reflection['critical_step']}: took <code>"
                     f"{escape(a.reflection.get('wrong_action', ''))}</code>, should have taken <code>"
                     f"{escape(a.reflection.get('correct_action', ''))}</code> (segment s"
                     f"{a.reflection.get('supporting_segment')})</p>")
    if rule:
        parts.append(f"<p class='agmr-diagnosis'>diagnosis: rule <b>{rule.get('pattern')}</b>, refiner "
                     f"<b>{a.pattern}</b> · C[i, j] = {rule.get('value', 0):.4f}, scale {rule.get('scale', 0):.4f}, "
                     f"rank {rule.get('rank')}, share {rule.get('share', 0):.2f}, distractors "
                     f"{rule.get('distractors')}</p>")
    elif a.utilization:
        u = a.utilization
        parts.append(f"<p class='agmr-diagnosis'>diagnosis: <b>{a.pattern}</b> · weakly used ({u['weak_rule']} rule) "
                     f"{u['weak']}, redundant (reflector) {u['redundant']}, deletable {u['deletable']} · c^max "
                     f"{[round(v, 4) for v in u['c_max']]}</p>")
    elif a.pattern:
        parts.append(f"<p class='agmr-diagnosis'>diagnosis: <b>{a.pattern}</b></p>")
    if a.error:
        parts.append(f"<p class='agmr-error'>error: {escape(a.error)}</p>")
    parts.append(f"<pre class='agmr-diff'>{escape(a.diff or '(no edit)')}</pre>")
    if a.execution:
        parts.append(f"<p>verification on record: {escape(a.execution)} · "
                     f"{'success' if a.success else 'failure'}</p>")
    return "".join(parts)


def refinement_explorer(root: str | Path, verify: Callable | None = None, copy: str | Path | None = None):
    """A widget over a refined base: pick a refinement task and attempt → its C with the diagnosis → the proposed
    edit as a diff → run the verification → accept into (or roll back in) a copy of the base.

    Args:
        root: a folder ``workbench refine --base-out`` wrote (read only).
        verify: ``verify(task_id, candidate) -> Execution``; default: the verification on record
            (:func:`~workbench.methods.agmr.recorded_verifier`); :func:`~workbench.methods.agmr.model_verifier`
            plays it again.
        copy: where accepted edits go (default ``<root>-explorer``); created as a clone of ``root`` on first use.

    Returns:
        (ipywidgets.VBox): the explorer.
    """
    import ipywidgets as w
    from IPython.display import display

    root = Path(root)
    records = [r for r in load_log(root) if r.attempts]
    if not records:
        raise ValueError(f"{root}: no refinement task with an attempt to explore (run workbench refine first)")
    records.sort(key=lambda r: (r.branch != "failure", r.outcome != "committed", r.task_id))
    executions = {e.id: e for e in load_executions(root)}
    verify = verify or recorded_verifier(root)
    task = w.Dropdown(options=[(f"{r.task_id.split('/')[1] if '/' in r.task_id else r.task_id} [{r.branch}, "
                                f"{r.outcome}]", i) for i, r in enumerate(records)], description="task",
                      layout=w.Layout(width="90%"))
    attempt = w.Dropdown(options=[], description="attempt")
    target = w.Text(value=str(copy or f"{root}-explorer"), description="copy to", layout=w.Layout(width="70%"))
    run_btn, accept_btn, back_btn = (w.Button(description=d) for d in ("Run verification", "Accept", "Roll back"))
    info, status = w.HTML(), w.HTML()
    heat = w.Output()
    state: dict = {}

    def candidate():
        r, a = records[task.value], records[task.value].attempts[attempt.value]
        ex = executions.get(a.execution or "")
        return r, a, ex.memory if ex is not None else None

    def show_attempt(_=None):
        if attempt.value is None:
            return
        r, a, cand = candidate()
        info.value = _html_attempt(r, a)
        state.pop("verified", None)
        status.value = "" if cand is not None else "<i>this attempt produced no candidate</i>"
        heat.clear_output(wait=True)
        shown = executions.get(r.executions[0]) if a.n == 1 else executions.get(r.attempts[a.n - 2].execution or "")
        if shown is not None:
            refl = a.reflection or {}
            rec = shown.utilization.model_copy(update={"critical_step": refl.get("critical_step"),
                                                       "ideal_segment": refl.get("supporting_segment"),
                                                       "pattern": (a.rule or {}).get("pattern") or a.pattern})
            with heat:
                display(figure_image(episode_utilization_figure(rec)))

    def show_task(_=None):
        r = records[task.value]
        attempt.options = [(f"{a.n}" + (" (error)" if a.error else ""), k) for k, a in enumerate(r.attempts)]
        attempt.value = 0
        show_attempt()

    def _copy_base() -> MemoryBase:
        dest = Path(target.value).resolve()
        if dest == root.resolve() or dest == Path(default_memory_base().root).resolve():
            raise ValueError(f"{dest}: choose a copy, not the base being explored or the default base")
        return MemoryBase(dest) if (dest / "entries.jsonl").exists() else MemoryBase(root).clone(dest)

    def on_run(_):
        r, a, cand = candidate()
        if cand is None:
            status.value = "<span class='agmr-status'>no candidate to verify</span>"
            return
        try:
            ex = verify(r.task_id, cand)
        except KeyError as e:
            status.value = f"<span class='agmr-status'>{escape(str(e))}</span>"
            return
        state["verified"] = (task.value, attempt.value, ex.trajectory.success)
        status.value = (f"<span class='agmr-status'>verification {escape(ex.id)}: "
                        f"{'success' if ex.trajectory.success else 'failure'} in {ex.trajectory.n_steps} steps</span>")

    def on_accept(_):
        r, a, cand = candidate()
        v = state.get("verified")
        if cand is None or v is None or v[:2] != (task.value, attempt.value):
            status.value = "<span class='agmr-status'>run the verification first</span>"
            return
        try:
            base = _copy_base()
            current = base.get(cand.entry_id)
            stored = base.commit(cand.model_copy(update={"version": current.version}),
                                 reason=f"accepted in the explorer ({r.task_id}, attempt {a.n})",
                                 provenance={"method": "agmr-explorer", "refinement_task": r.task_id,
                                             "attempt": a.n, "verified": v[2], "from": str(root)})
        except (ValueError, KeyError) as e:
            status.value = f"<span class='agmr-status'>{escape(str(e))}</span>"
            return
        status.value = (f"<span class='agmr-status'>accepted: {escape(cand.entry_id)} is version {stored.version} in "
                        f"{escape(str(base.root))}</span>")

    def on_back(_):
        r, a, cand = candidate()
        try:
            base = _copy_base()
            current = base.get(r.entry_id)
            versions = [h.version for h in base.history(r.entry_id) if h.version < current.version]
            if not versions:
                status.value = f"<span class='agmr-status'>{escape(r.entry_id)} has no earlier version in the copy</span>"
                return
            stored = base.rollback(r.entry_id, max(versions), reason="rolled back in the explorer")
        except (ValueError, KeyError) as e:
            status.value = f"<span class='agmr-status'>{escape(str(e))}</span>"
            return
        status.value = (f"<span class='agmr-status'>rolled back: {escape(r.entry_id)} holds version {max(versions)}'s "
                        f"content as version {stored.version}</span>")

    task.observe(show_task, names="value")
    attempt.observe(show_attempt, names="value")
    run_btn.on_click(on_run)
    accept_btn.on_click(on_accept)
    back_btn.on_click(on_back)
    show_task()
    box = w.VBox([task, attempt, info, heat, w.HBox([run_btn, accept_btn, back_btn]), target, status])
    box.add_class("workbench-agmr-explorer")
    return box
