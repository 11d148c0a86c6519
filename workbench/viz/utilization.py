"""Figure 4: the context utilization matrix C as a segments x steps heatmap.

The critical error step's column is boxed in black and the ideal memory use (the segment that supports the
correct action at that step) is marked with a diamond, as in AGMR's Figure 4.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from workbench.memory.task_info import parse_game_ref

__all__ = ["C_LABEL", "episode_utilization_figure", "labelled_steps", "step_label_stride", "utilization_figure"]

C_LABEL = "C (n_t-rescaled attention)"


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


_NICE_STRIDES = (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000)


def step_label_stride(n_steps: int, max_labels: int) -> int:
    """The smallest "nice" stride (1, 2, 5, 10, 20, 25, 50, ...) that labels at most ``max_labels`` of
    ``n_steps`` steps (u0, u_stride, u_2*stride, ...)."""
    for stride in _NICE_STRIDES:
        if -(-n_steps // stride) <= max(max_labels, 1):
            return stride
    return -(-n_steps // max(max_labels, 1))


def labelled_steps(n_steps: int, max_labels: int, keep: Sequence[int] = ()) -> list[int]:
    """Which steps get a tick label: every stride-th one, plus the steps in ``keep`` (e.g. the critical step),
    each of which replaces the stride label nearest to it when they would sit side by side."""
    stride = step_label_stride(n_steps, max_labels)
    shown = set(range(0, n_steps, stride))
    for t in keep:
        if t is None or not 0 <= t < n_steps or t in shown:
            continue
        shown -= {s for s in shown if abs(s - t) < max(stride / 2, 1)}
        shown.add(t)
    return sorted(shown)


def utilization_figure(
    C,
    segment_labels: Sequence[str] | None = None,
    step_labels: Sequence[str] | None = None,
    critical_step: int | None = None,
    ideal_segment: int | None = None,
    title: str | None = None,
    label_chars: int = 38,
    wrong_steps: Sequence[int] = (),
    ax=None,
    max_step_labels: int = 20,
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> Figure:
    """Heatmap of C (rows: memory segments s_l, columns: decision steps u_t).

    Every step has a tick; past ``max_step_labels`` steps only every k-th one (k = 2, 5, 10, ...) and the critical
    step are labelled, so the labels stay readable at any length of episode.

    Args:
        C (Tensor | numpy.ndarray | UtilizationMatrix): a ``[segment, step]`` tensor/array or a
            :class:`~workbench.attention.UtilizationMatrix`.
        segment_labels: per segment (e.g. its action), shown as ``s_l: label``.
        step_labels: per step (e.g. the action taken), shown under ``u_t``.
        critical_step: the column to box (earliest critical error step).
        ideal_segment: with ``critical_step``, the cell marked with a diamond (ideal memory use).
        title: the axes title.
        label_chars: labels are cut to this many characters.
        wrong_steps: steps whose label (or, unlabelled, whose tick) is drawn in red (e.g. where the model left the
            expert's plan).
        ax (matplotlib.axes.Axes | None): draw into these axes (of a larger figure) instead of a new figure.
        max_step_labels: at most this many steps are labelled (plus the critical step).
        vmin: the colour scale's low end (default: this matrix's); give both panels of a comparison the same.
        vmax: the colour scale's high end (default: this matrix's).
        colorbar: draw this axes' colorbar (off when the caller draws one for several panels).

    Returns:
        The Figure (``ax``'s when given).
    """
    M = C.C if hasattr(C, "C") else torch.as_tensor(C)
    M = M.detach().float().cpu()
    if M.ndim != 2:
        raise ValueError(f"C must be [segment, step], got shape {tuple(M.shape)}")
    n_seg, n_steps = M.shape
    shown = labelled_steps(n_steps, max_step_labels, keep=[critical_step] if critical_step is not None else [])
    width = 3.5 + (0.15 * label_chars if segment_labels else 0) + max(0.32 * len(shown), 0.1 * n_steps)
    height = 1.8 + 0.28 * n_seg + (1.4 if step_labels else 0)
    if ax is None:
        fig = Figure(figsize=(min(width, 18), min(height, 14)), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    im = ax.imshow(M.numpy(), aspect="auto", cmap="Blues", interpolation="nearest", vmin=vmin, vmax=vmax)
    ax.set_yticks(range(n_seg), [f"s{l}" + (f": {_short(segment_labels[l], label_chars)}" if segment_labels else "")
                                 for l in range(n_seg)], fontsize=7)
    ax.set_xticks(shown, [f"u{t}" + (f": {_short(step_labels[t], 24)}" if step_labels else "") for t in shown],
                  fontsize=6, rotation=90 if step_labels else 0)
    ax.set_xticks([t for t in range(n_steps) if t not in set(shown)], minor=True)
    wrong = sorted({t for t in wrong_steps if 0 <= t < n_steps})
    for t, label in zip(shown, ax.get_xticklabels()):
        if t in wrong:
            label.set_color("red")
    if wrong:  # every wrong step shows, labelled or not: a red triangle over its column
        ax.plot(wrong, [1.0] * len(wrong), transform=ax.get_xaxis_transform(), marker="v", markersize=4,
                color="red", linestyle="none", clip_on=False)
    ax.set_xlim(-0.5, n_steps - 0.5)
    notes = ["box: critical error step, red diamond: ideal memory use"] if critical_step is not None and (
        0 <= critical_step < n_steps) else []
    if wrong:
        notes.append("red: not the expert's action")
    ax.set_xlabel("decision step" + (f"  ({'; '.join(notes)})" if notes else ""))
    ax.set_ylabel("memory segment")
    if critical_step is not None and 0 <= critical_step < n_steps:
        ax.add_patch(Rectangle((critical_step - 0.5, -0.5), 1, n_seg, fill=False, edgecolor="black", linewidth=2))
        if ideal_segment is not None and 0 <= ideal_segment < n_seg:
            ax.plot([critical_step], [ideal_segment], marker="D", markersize=8, markerfacecolor="none",
                    markeredgecolor="red", markeredgewidth=2, linestyle="none")
    if colorbar:
        fig.colorbar(im, ax=ax, label=C_LABEL, shrink=0.8)
    if title:
        ax.set_title(title, fontsize=9)
    return fig


def figure_image(fig: Figure):
    """``fig`` as an IPython PNG image: it shows in a widget's Output whatever the notebook's matplotlib backend."""
    import io

    from IPython.display import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return Image(data=buf.getvalue(), format="png")


def _task_name(task_id: str) -> str:
    """``valid_unseen/pick_and_place-Mug-None-Desk-308/trial_T...`` -> ``pick_and_place-Mug-None-Desk-308``."""
    ref = parse_game_ref(task_id)
    return ref.task_folder if ref else task_id


def episode_utilization_figure(record, title: str | None = None) -> Figure:
    """:func:`utilization_figure` of a :class:`~workbench.attention.UtilizationEpisode`, labelled from it.

    Rows are labelled with each segment's action, columns with the action the model chose (red where it is not
    the expert's, teacher forced); the title carries the task, mode, outcome and diagnosed pattern.
    """
    actions = [t.splitlines()[-1].removeprefix(">").strip() if t else "" for t in record.segment_texts]
    wrong = []
    if record.expert_actions is not None:  # teacher forced: red where the model's choice is not the expert's
        wrong = [t for t, (a, e) in enumerate(zip(record.actions, record.expert_actions)) if a != e]
    outcome = "" if record.success is None else (", success" if record.success else ", failure")
    pattern = f", {record.pattern}" if record.pattern else ""
    return utilization_figure(
        record.matrix(), segment_labels=actions, step_labels=record.actions, critical_step=record.critical_step,
        ideal_segment=record.ideal_segment, wrong_steps=wrong,
        title=title or f"{_task_name(record.task_id)} [{record.mode}{outcome}{pattern}]",
    )
