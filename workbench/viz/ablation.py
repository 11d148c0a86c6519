"""Figure 2 (head masking) and Figure 3 (segment masking): bars with the change relative to the full-memory run.

A panel whose bars are all equal (every change rounds to +0.0 pp) says so in the panel: "no difference between
the arms: null result", so a reader of the figure alone cannot take three equal bars for a drawing error.
"""

from __future__ import annotations

from matplotlib.figure import Figure

__all__ = ["NULL_NOTE", "all_equal", "head_ablation_figure", "segment_masking_figure"]

NULL_NOTE = "no difference between the arms: null result"

_METRICS = (("tf_accuracy", "teacher-forced accuracy (%)"), ("tf_mean_p", "mean p(expert action) (%)"),
            ("success_rate", "episode success rate (%)"))
_COLORS = {"none": "#d9d9d9", "icl": "#9e9e9e", "traj": "#3f6fb5", "top": "#d0543c", "random": "#e8a33d",
           "full": "#3f6fb5", "bottom_removed": "#e8a33d", "top_removed": "#d0543c"}


def all_equal(values) -> bool:
    """Whether the measured ``values`` (fractions; ``None`` = not measured) agree to 0.05 percentage points, the
    precision of the changes printed above the bars; at least two must be measured."""
    got = [100 * v for v in values if v is not None]
    return len(got) >= 2 and max(got) - min(got) < 0.05


def _bars(ax, labels, keys, values, errors, reference, ylabel):
    """Bars in %, sd whiskers where given, and each bar's change vs ``reference = (key, value)`` above it; a note
    inside the panel, above the bars, when all bars are equal."""
    xs = list(range(len(labels)))
    heights = [100 * (v or 0.0) for v in values]
    ax.bar(xs, heights, color=[_COLORS[k] for k in keys], edgecolor="black", linewidth=0.5)
    for x, h, e in zip(xs, heights, errors):
        if e:
            ax.errorbar([x], [h], yerr=[100 * e], color="black", capsize=4, linewidth=1)
    top = max([h + 100 * (e or 0.0) for h, e in zip(heights, errors)] + [1.0])
    for x, v, h, e, key in zip(xs, values, heights, errors, keys):
        y = h + 100 * (e or 0.0) + 0.02 * top
        if v is None:
            ax.text(x, y, "n/a", ha="center", va="bottom", fontsize=8)
        elif reference is not None and key != reference[0]:
            ax.text(x, y, f"{100 * (v - reference[1]):+.1f}", ha="center", va="bottom", fontsize=8,
                    fontweight="bold")
    ax.set_xticks(xs, labels, fontsize=7 if len(labels) > 3 else 8)  # level: rotated labels of 5 bars collide
    ax.set_ylabel(ylabel)
    null = all_equal(values) and not any(errors)
    ax.set_ylim(0, top * (1.4 if null else 1.2))
    if null:  # above the bars and their numbers (they reach 1.1 * top): the note covers no data
        ax.text(0.5, 0.97, NULL_NOTE, transform=ax.transAxes, ha="center", va="top", fontsize=8, style="italic",
                bbox={"boxstyle": "round", "facecolor": "#fff3c4", "edgecolor": "0.6"})
    ax.grid(axis="y", alpha=0.3)


def head_ablation_figure(result, title: str | None = None) -> Figure:
    """(No memory /) ICL / Traj / Traj with top-k masked / Traj with random-k masked (mean +- sd over draws).

    Numbers above the bars are changes relative to Traj, in percentage points; whiskers are the sd over the
    random draws.

    Args:
        result (HeadAblationResult): a :class:`~workbench.attention.HeadAblationResult`.

    Returns:
        A Figure with one panel per metric that was measured (teacher-forced accuracy, episode success).
    """
    s = result.summary()
    groups = [g for g in ("none", "icl", "traj", "top", "random") if g in s]
    names = {"none": "No memory", "icl": "ICL", "traj": "Traj", "top": f"Mask top-{result.k}",
             "random": f"Mask rand-{result.k}"}
    metrics = [(m, label) for m, label in _METRICS if any(s[g][m] is not None for g in groups)]
    if not metrics:
        raise ValueError("the ablation result holds neither teacher-forced accuracy nor episode success")
    fig = Figure(figsize=(4.4 * len(metrics) + 0.4, 3.6), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, (metric, label) in zip(axes, metrics):
        traj = s.get("traj", {}).get(metric)
        _bars(ax, [names[g] for g in groups], groups, [s[g][metric] for g in groups],
              [s[g][f"{metric}_sd"] if s[g]["n_arms"] > 1 else None for g in groups],
              ("traj", traj) if traj is not None else None, label)
    fig.suptitle(title or f"Retrieval-head masking, {result.model_name}", fontsize=10)
    fig.supxlabel("numbers: change vs Traj (percentage points)" + (
        "; whiskers: sd over the random draws" if s.get("random", {}).get("n_arms", 0) > 1 else ""), fontsize=8)
    return fig


def segment_masking_figure(result, title: str | None = None) -> Figure:
    """Traj with all segments vs without the bottom / top ``fraction`` by c^max, per measured metric.

    Numbers above the bars are changes relative to the full memory, in percentage points.

    Args:
        result (SegmentMaskingResult): a :class:`~workbench.attention.SegmentMaskingResult`.
    """
    s = result.summary()
    arms = ("full", "bottom_removed", "top_removed")
    names = {"full": "Traj (all)", "bottom_removed": f"w/o bottom {result.fraction:.0%}",
             "top_removed": f"w/o top {result.fraction:.0%}"}
    metrics = [(m, label) for m, label in _METRICS if any(s[a][m] is not None for a in arms)]
    if not metrics:
        raise ValueError("the segment-masking result holds no task")
    fig = Figure(figsize=(4.4 * len(metrics) + 0.4, 3.6), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, (metric, label) in zip(axes, metrics):
        full = s["full"][metric]
        _bars(ax, [names[a] for a in arms], arms, [s[a][metric] for a in arms], [None] * 3,
              ("full", full) if full is not None else None, label)
    fig.suptitle(title or f"Removing memory segments by peak utilization, {result.model_name}", fontsize=10)
    fig.supxlabel(f"numbers: change vs Traj (all) in percentage points; segments ranked by c^max, "
                  f"{result.fraction:.0%} removed per arm", fontsize=8)
    return fig
