"""An ipywidgets explorer over :class:`~workbench.attention.UtilizationEpisode` records.

Choose a task, see its C; pick a step to read every memory segment with its utilization at that step, the
action taken (and the expert's, teacher forced) and the heads that carried the most attention mass to each
segment. :func:`step_view` is the table the explorer shows (a plain function, usable without widgets).
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.viz.utilization import episode_utilization_figure, figure_image

__all__ = ["step_view", "utilization_explorer"]


def step_view(record, step: int, top: int = 3):
    """The segments at one step: text, C[l, step], rank, and the top heads on each segment.

    Args:
        record (UtilizationEpisode): a :class:`~workbench.attention.UtilizationEpisode`.
        step: a column of its C.
        top: heads listed per segment (when the record kept ``carriers``).

    Returns:
        (pandas.DataFrame): indexed by segment (``s0``, ``s1``, ...), strongest first.
    """
    import pandas as pd

    C = record.matrix().C
    if not 0 <= step < C.shape[1]:
        raise ValueError(f"step {step} outside the record's {C.shape[1]} steps")
    col = C[:, step]
    rows = []
    for seg in range(C.shape[0]):
        heads = record.carriers[seg][step][:top] if record.carriers else []
        rows.append({"segment": f"s{seg}", "C": round(float(col[seg]), 4),
                     "ideal": "◆" if seg == record.ideal_segment and step == record.critical_step else "",
                     "top heads (layer.head: mass)": ", ".join(f"L{a}.H{b}: {v:.3f}" for a, b, v in heads),
                     "text": record.segment_texts[seg] if seg < len(record.segment_texts) else ""})
    df = pd.DataFrame(rows).set_index("segment")
    df.insert(1, "rank", df["C"].rank(ascending=False, method="min").astype(int))
    return df.sort_values("C", ascending=False)


def utilization_explorer(records: Sequence):
    """A widget: task dropdown, C heatmap, a step slider and that step's :func:`step_view`.

    Args:
        records: :class:`~workbench.attention.UtilizationEpisode` s (e.g. ``load_utilization(path)``).

    Returns:
        (ipywidgets.VBox): the explorer (display it as a notebook cell's last expression).
    """
    import ipywidgets as w
    from IPython.display import HTML, display

    records = [r for r in records if r.steps and r.segment_texts]
    if not records:
        raise ValueError("no record with both steps and memory segments to explore")
    task = w.Dropdown(options=[(f"{r.task_id} [{r.mode}]", i) for i, r in enumerate(records)], description="task",
                      layout=w.Layout(width="80%"))
    step = w.IntSlider(min=0, max=len(records[0].steps) - 1, value=records[0].critical_step or 0, description="step")
    heatmap, detail = w.Output(), w.Output()

    def show_task(_=None):
        rec = records[task.value]
        step.max = len(rec.steps) - 1
        step.value = rec.critical_step or 0
        heatmap.clear_output(wait=True)
        with heatmap:
            display(figure_image(episode_utilization_figure(rec)))
        show_step()

    def show_step(_=None):
        rec = records[task.value]
        t = step.value
        taken = rec.actions[t]
        expert = rec.expert_actions[t] if rec.expert_actions else None
        line = f"<b>u{t}</b> (trajectory step {rec.steps[t]}): action taken <code>{taken}</code>"
        if expert is not None:
            line += f", expert <code>{expert}</code> " + ("✓" if expert == taken else "✗")
        detail.clear_output(wait=True)
        with detail:
            display(HTML(line))
            display(step_view(rec, t))

    task.observe(show_task, names="value")
    step.observe(show_step, names="value")
    show_task()
    box = w.VBox([task, heatmap, step, detail])
    box.add_class("workbench-utilization-explorer")
    return box
