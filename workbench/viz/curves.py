"""Pure functions: run results -> matplotlib Figures.

Legends sit outside the axes (right of them), so no entry covers a curve. Curves that coincide are said to: two
conditions with the same SR@k at every k are one line with one legend entry ``a = b``; a curve that runs on top of
an earlier one for part of its length is drawn dashed with open markers, so the one under it still shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

__all__ = ["budget_curve_figure", "coinciding_curves", "legend_outside", "merged_label", "sr_at_k_figure"]

_TOL = 1e-9  # SR@k values are ratios of the same episode counts: equal curves are equal to the last bit


def _percent(points: Mapping) -> dict[int, float]:
    """{k (str or int): SR in [0, 1]} -> {k: SR in %}, k ascending."""
    return {int(k): 100 * float(v) for k, v in sorted(points.items(), key=lambda kv: int(kv[0]))}


def coinciding_curves(curves: Mapping[str, Mapping]) -> list[list[str]]:
    """The names of ``curves`` grouped by identical curves (the same k's, the same value at each), in the order
    of each group's first member."""
    groups: list[tuple[dict[int, float], list[str]]] = []
    for name, points in curves.items():
        pts = _percent(points)
        for ref, names in groups:
            if ref.keys() == pts.keys() and all(abs(ref[k] - pts[k]) <= _TOL for k in pts):
                names.append(name)
                break
        else:
            groups.append((pts, [name]))
    return [names for _, names in groups]


def merged_label(names: Sequence[str], width: int = 32) -> str:
    """One legend entry for curves that coincide: ``a = b`` on one line when short, else one name a line."""
    inline = " = ".join(names)
    return inline if len(inline) <= width else "\n= ".join(names)


def legend_outside(ax, **kwargs):
    """The axes' legend to the right of it, top-aligned (the figure's constrained layout makes room)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **{"fontsize": 8, **kwargs})


def _shared(a: dict[int, float], b: dict[int, float]) -> int:
    return sum(1 for k, v in a.items() if k in b and abs(b[k] - v) <= _TOL)


def sr_at_k_figure(curves: dict[str, dict[str, float]], title: str = "Success rate within k steps",
                   reference: str | None = None) -> Figure:
    """SR@k curves, one line per condition (one per group of conditions whose curves are identical).

    Args:
        curves: condition -> {k (as str or int): SR@k in [0, 1]}.
        reference: the condition drawn as a grey dashed line, labelled as the reference (e.g. the action agent
            alone beside the memory methods).

    Returns:
        The Figure; its legend is outside the axes. Identical curves share one line and one entry
        (``arbiter-500 = arbiter-750``); a curve that coincides with an earlier one on at least a quarter of its
        k's is drawn dashed with open markers on top of it.
    """
    fig = Figure(figsize=(7.2, 3.6), layout="constrained")
    ax = fig.add_subplot()
    drawn: list[dict[int, float]] = []
    top = 0.0
    for names in coinciding_curves(curves):
        pts = _percent(curves[names[0]])
        ks, ys = list(pts), list(pts.values())
        top = max([top, *ys])
        label = merged_label([f"{n} (reference)" if n == reference else n for n in names])
        if reference in names:
            ax.plot(ks, ys, linestyle="--", color="0.45", marker=".", label=label)
        elif any(_shared(pts, d) >= max(1, len(pts) / 4) for d in drawn):
            ax.plot(ks, ys, linestyle="--", marker="o", markerfacecolor="none", markersize=7, zorder=3, label=label)
        else:
            ax.plot(ks, ys, marker="o", label=label)
        drawn.append(pts)
    ax.set_xlabel("k (steps)")
    ax.set_ylabel("SR@k (%)")
    ax.set_title(title)
    ax.set_ylim(bottom=-0.04 * max(top, 1.0))  # a curve at 0 % shows above the axis, not on it
    ax.grid(alpha=0.3)
    legend_outside(ax)
    return fig


def budget_curve_figure(table, title: str = "Success against the memory budget") -> Figure:
    """Success (%) against the o200k budget, one line per method, from
    :func:`workbench.methods.arbiter.experiments.budget_sensitivity`'s table (columns ``method``, ``budget``,
    ``success_%``; with ``P_t_median_o200k``, each method's median block size is drawn as a dotted line: left
    of it the budget cuts the block at most steps)."""
    fig = Figure(figsize=(7.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    medians = False
    for method, rows in table.groupby("method", sort=False):
        rows = rows.sort_values("budget")
        line, = ax.plot(rows["budget"], rows["success_%"], marker="o", label=method)
        if "P_t_median_o200k" in rows:
            largest = rows.loc[rows["budget"].idxmax()]  # the block as the method makes it, least cut
            ax.axvline(largest["P_t_median_o200k"], color=line.get_color(), linestyle=":", alpha=0.7)
            medians = True
    handles, _ = ax.get_legend_handles_labels()
    if medians:
        handles.append(Line2D([], [], color="0.3", linestyle=":", label="median block size\n(o200k, same colour)"))
    ax.set_xlabel("budget (o200k tokens)")
    ax.set_ylabel("success (%)")
    ax.set_title(title)
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    legend_outside(ax, handles=handles)
    return fig
