"""Pure functions: run results -> matplotlib Figures."""

from __future__ import annotations

from matplotlib.figure import Figure

__all__ = ["sr_at_k_figure", "budget_curve_figure"]


def sr_at_k_figure(curves: dict[str, dict[str, float]], title: str = "Success rate within k steps",
                   reference: str | None = None) -> Figure:
    """SR@k curves, one line per condition.

    Args:
        curves: condition -> {k (as str or int): SR@k in [0, 1]}.
        reference: the condition drawn as a grey dashed line, labelled as the reference (e.g. the action agent
            alone beside the memory methods).
    """
    fig = Figure(figsize=(5.5, 3.6))
    ax = fig.add_subplot()
    for name, points in curves.items():
        ks = sorted(int(k) for k in points)
        ys = [100 * points[str(k)] if str(k) in points else 100 * points[k] for k in ks]
        if name == reference:
            ax.plot(ks, ys, linestyle="--", color="0.45", marker=".", label=f"{name} (reference)")
        else:
            ax.plot(ks, ys, marker="o", label=name)
    ax.set_xlabel("k (steps)")
    ax.set_ylabel("SR@k (%)")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def budget_curve_figure(table, title: str = "Success against the memory budget") -> Figure:
    """Success (%) against the o200k budget, one line per method, from
    :func:`workbench.methods.arbiter.experiments.budget_sensitivity`'s table (columns ``method``, ``budget``,
    ``success_%``; with ``P_t_median_o200k``, each method's median block size is drawn as a dotted line: left
    of it the budget cuts the block at most steps)."""
    fig = Figure(figsize=(5.5, 3.6))
    ax = fig.add_subplot()
    for method, rows in table.groupby("method", sort=False):
        rows = rows.sort_values("budget")
        line, = ax.plot(rows["budget"], rows["success_%"], marker="o", label=method)
        if "P_t_median_o200k" in rows:
            largest = rows.loc[rows["budget"].idxmax()]  # the block as the method makes it, least cut
            ax.axvline(largest["P_t_median_o200k"], color=line.get_color(), linestyle=":", alpha=0.7)
    ax.set_xlabel("budget (o200k tokens)")
    ax.set_ylabel("success (%)")
    ax.set_title(title)
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig
