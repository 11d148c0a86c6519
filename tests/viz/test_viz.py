"""Figures are pure functions returning matplotlib Figures with the right axes and marks; the explorer builds."""

from __future__ import annotations

import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from workbench.attention import HeadScores, utilization_matrix
from workbench.methods.agmr.recording import UtilizationEpisode
from workbench.studies.head_masking import ConditionScore, HeadAblationResult
from workbench.studies.segment_masking import SegmentMaskingResult, SegmentMaskingRow
from workbench.viz import (
    episode_utilization_figure,
    head_ablation_figure,
    head_scores_figure,
    segment_masking_figure,
    step_view,
    utilization_explorer,
    utilization_figure,
)


def _rects(ax, color=None):
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill() is False]


def test_head_scores_figure_is_layer_by_head_with_top_k_boxed():
    S = torch.zeros(6, 4)
    S[3, 2], S[1, 0], S[5, 3] = 5.0, 4.0, 3.0
    fig = head_scores_figure([HeadScores("a", S, 10), HeadScores("b", S.flip(0), 10)], k=2)
    assert isinstance(fig, Figure)
    heat = [ax for ax in fig.axes if ax.get_xlabel() == "head"]
    assert len(heat) == 2 and all(ax.get_ylabel() == "layer" for ax in heat)
    assert heat[0].images[0].get_array().shape == (6, 4)
    boxes = _rects(heat[0])
    assert sorted((b.get_x() + 0.5, b.get_y() + 0.5) for b in boxes) == [(0.0, 1.0), (2.0, 3.0)]
    assert "a (10 pairs)" in heat[0].get_title()


def _ablation(with_episodes: bool):
    def row(group, tf, sr, seed=None):
        return ConditionScore(name=f"{group}{seed}", group=group, memory="traj", heads=[], seed=seed, tf_accuracy=tf,
                              success_rate=sr if with_episodes else None)

    return HeadAblationResult("m", 5, (row("icl", 0.2, 0.1), row("traj", 0.6, 0.5), row("top", 0.3, 0.2),
                                       row("random", 0.55, 0.45, 0), row("random", 0.6, 0.5, 1)))


@pytest.mark.parametrize("with_episodes, panels", [(True, 2), (False, 1)])
def test_head_ablation_figure_has_one_panel_per_metric_with_changes_vs_traj(with_episodes, panels):
    fig = head_ablation_figure(_ablation(with_episodes))
    assert len(fig.axes) == panels
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ICL", "Traj", "Mask top-5", "Mask rand-5"]
    assert [round(p.get_height(), 1) for p in ax.patches] == [20.0, 60.0, 30.0, 57.5]
    assert {t.get_text() for t in ax.texts} == {"-40.0", "-30.0", "-2.5"}
    assert "teacher-forced" in ax.get_ylabel()


def test_segment_masking_figure():
    row = SegmentMaskingRow(task_id="a", mode="teacher_forced", n_segments=5, k=1, top=[0], bottom=[4], c_max=[1.0] * 5,
                            correct={"full": 6, "top_removed": 3, "bottom_removed": 6},
                            steps={"full": 10, "top_removed": 10, "bottom_removed": 10})
    fig = segment_masking_figure(SegmentMaskingResult("m", 0.2, (row,)))
    ax = fig.axes[0]
    assert len(fig.axes) == 1 and [round(p.get_height()) for p in ax.patches] == [60, 60, 30]
    assert "w/o top 20%" in [t.get_text() for t in ax.get_xticklabels()]


def _record(critical=2, ideal=1) -> UtilizationEpisode:
    rows = [torch.softmax(torch.randn(2, 40), dim=-1) for _ in range(4)]
    C = utilization_matrix(rows, [[1, 2, 3], [10, 11], [20, 21, 22]], heads=[(0, 1), (1, 0)])
    carriers = [[[(0, 1, 0.5), (1, 0, 0.25)] for _ in range(4)] for _ in range(3)]
    return UtilizationEpisode(
        task_id="t", mode="teacher_forced", model_name="m", steps=[0, 1, 2, 3],
        actions=["go to a 1", "take b 1 from a 1", "go to c 1", "open c 1"],
        expert_actions=["go to a 1", "take b 1 from a 1", "go to d 1", "open c 1"],
        segment_texts=["> go to a 1", "> take b 1 from a 1", "> go to d 1"], utilization=C.to_record("m"),
        c_mean=[float(v) for v in C.segment_mean()], c_max=[float(v) for v in C.segment_max()],
        critical_step=critical, ideal_segment=ideal, pattern="missed_relevant", carriers=carriers,
    )


def test_utilization_figure_boxes_the_critical_step_and_marks_ideal_use():
    rec = _record()
    fig = utilization_figure(rec.matrix(), segment_labels=rec.segment_texts, critical_step=2, ideal_segment=1)
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("decision step") and ax.get_ylabel() == "memory segment"
    assert ax.images[0].get_array().shape == (3, 4)
    (box,) = _rects(ax)
    assert (box.get_x(), box.get_width(), box.get_height()) == (1.5, 1, 3)
    (diamond,) = ax.lines
    assert diamond.get_marker() == "D" and list(diamond.get_xdata()) == [2] and list(diamond.get_ydata()) == [1]
    plain = utilization_figure(rec.matrix().C)
    assert not _rects(plain.axes[0]) and not plain.axes[0].lines
    labelled = episode_utilization_figure(rec)
    assert "missed_relevant" in labelled.axes[0].get_title()
    ticks = labelled.axes[0].get_xticklabels()
    assert ticks[2].get_text() == "u2: go to c 1" and ticks[2].get_color() == "red" and ticks[1].get_color() != "red"


def test_step_view_and_explorer():
    rec = _record()
    df = step_view(rec, 2)
    assert list(df.index)[0] == f"s{int(rec.matrix().C[:, 2].argmax())}" and len(df) == 3
    assert df.loc["s1", "ideal"] == "◆" and "L0.H1: 0.500" in df.loc["s0", "top heads (layer.head: mass)"]
    with pytest.raises(ValueError, match="step 9"):
        step_view(rec, 9)
    widget = utilization_explorer([rec, _record(None, None)])
    assert len(widget.children) == 4 and widget.children[2].max == 3


def test_sr_at_k_figure_draws_the_reference_dashed_and_labelled():
    from workbench.viz import sr_at_k_figure

    fig = sr_at_k_figure({"arbiter-500": {"5": 0.1, "10": 0.5}, "none": {5: 0.0, 10: 0.2}}, reference="none")
    method, ref = fig.axes[0].lines
    assert list(method.get_ydata()) == [10, 50] and method.get_linestyle() == "-"
    assert list(ref.get_ydata()) == [0, 20] and ref.get_linestyle() == "--" and ref.get_label() == "none (reference)"
