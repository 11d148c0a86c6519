"""Figure 8: retrieval scores of every head as a layer x head heatmap, the top-k heads marked.

Several panels (models) share one colour scale and one colorbar by default, so the same colour is the same score
in every panel.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from workbench.viz.utilization import step_label_stride

__all__ = ["head_scores_figure"]

_MAX_HEAD_LABELS = 16  # head indices labelled per panel (every k-th past that), readable at 4.2 in a panel


def head_scores_figure(scores, k: int = 5, title: str | None = None, shared_scale: bool = True) -> Figure:
    """Heatmap of retrieval scores, one panel per model; the top ``k`` heads are boxed and numbered by rank.

    Args:
        scores (HeadScores | Sequence[HeadScores] | Tensor): a :class:`~workbench.attention.HeadScores`, a sequence of them (one panel each), or a
            ``[layer, head]`` tensor.
        k: how many top heads to mark.
        title: suptitle; each panel is titled by its model name.
        shared_scale: with several panels, one colour scale (and one colorbar) for all of them; ``False`` gives
            each panel its own.

    Returns:
        The Figure (x: head index, y: layer, colour: score summed over supervision pairs).
    """
    items = list(scores) if isinstance(scores, Sequence) else [scores]
    if not items:
        raise ValueError("head_scores_figure needs at least one set of scores")
    mats = [(item.scores if hasattr(item, "scores") else torch.as_tensor(item)).detach().float().cpu()
            for item in items]
    fig = Figure(figsize=(4.2 * len(items) + 0.6, 4.6), layout="constrained")
    axes = fig.subplots(1, len(items), squeeze=False)[0]
    shared = shared_scale and len(items) > 1
    norm = Normalize(min(float(S.min()) for S in mats), max(float(S.max()) for S in mats)) if shared else None
    for ax, item, S in zip(axes, items, mats):
        n_layers, n_heads = S.shape
        im = ax.imshow(S.numpy(), aspect="auto", origin="lower", cmap="viridis", interpolation="nearest", norm=norm)
        flat = sorted(((float(S[l, h]), -l, -h) for l in range(n_layers) for h in range(n_heads)), reverse=True)
        for rank, (value, nl, nh) in enumerate(flat[:k], start=1):
            layer, head = -nl, -nh
            bright = im.norm(value) > 0.6  # viridis is yellow there: a dark number reads, a white one does not
            ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
            ax.text(head, layer, str(rank), ha="center", va="center", color="black" if bright else "white",
                    fontsize=7, fontweight="bold")
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        n = getattr(item, "n_pairs", None)
        name = getattr(item, "model_name", "")
        ax.set_title(f"{name}" + (f" ({n} pairs)" if n is not None else ""), fontsize=9)
        ax.set_xticks(range(0, n_heads, step_label_stride(n_heads, _MAX_HEAD_LABELS)))
        if not shared:
            fig.colorbar(im, ax=ax, label="retrieval score", shrink=0.85)
    if shared:
        fig.colorbar(axes[0].images[0], ax=list(axes), label="retrieval score (summed over pairs; one scale for all panels)", shrink=0.85)
    if title:
        fig.suptitle(title)
    return fig
