"""The report figures stay readable: step labels thin out on long episodes, paired panels share one colour scale
and one colorbar, legends sit outside the data, coinciding curves are said to coincide, null results are named."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from workbench.attention import HeadScores, utilization_matrix
from workbench.methods.agmr.recording import UtilizationEpisode
from workbench.methods.agmr.records import TaskRecord
from workbench.studies.head_masking import ConditionScore, HeadAblationResult
from workbench.studies.segment_masking import SegmentMaskingResult, SegmentMaskingRow
from workbench.viz import (
    budget_curve_figure,
    episode_utilization_figure,
    head_ablation_figure,
    head_scores_figure,
    refinement_case_figure,
    scenario_distribution_figure,
    scenario_success_figure,
    segment_masking_figure,
    sr_at_k_figure,
    utilization_figure,
)
from workbench.viz.ablation import NULL_NOTE
from workbench.viz.curves import coinciding_curves, merged_label
from workbench.viz.utilization import labelled_steps, step_label_stride


def _renderer(fig):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _labels(ax, renderer):
    return [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]


def _overlaps(texts, renderer) -> list[tuple[str, str]]:
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def _legend_clear_of_data(fig):
    renderer = _renderer(fig)
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend is not None
    return not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def _episode(n_steps: int, n_seg: int = 4, critical: int | None = 27, ideal: int | None = 1, scale: float = 1.0,
             wrong=()) -> UtilizationEpisode:
    rows = [scale * torch.softmax(torch.randn(2, 40), dim=-1) for _ in range(n_steps)]
    spans = [[1 + 3 * i, 2 + 3 * i] for i in range(n_seg)]
    C = utilization_matrix(rows, spans, heads=[(0, 1), (1, 0)])
    actions = [f"go to countertop {t}" for t in range(n_steps)]
    expert = [f"go to sinkbasin {t}" if t in set(wrong) else a for t, a in enumerate(actions)]
    return UtilizationEpisode(
        task_id="valid_seen/pick_and_place_simple-Egg-None-Microwave-4/trial_T1", mode="episode", model_name="m",
        steps=list(range(n_steps)), actions=actions, expert_actions=expert if wrong else None,
        segment_texts=[f"> take egg {i} from countertop {i}" for i in range(n_seg)], utilization=C.to_record("m"),
        c_mean=[float(v) for v in C.segment_mean()], c_max=[float(v) for v in C.segment_max()],
        critical_step=critical, ideal_segment=ideal, pattern="missed_relevant", success=False,
    )


@pytest.mark.parametrize("n, most, stride", [(4, 20, 1), (20, 20, 1), (21, 20, 2), (50, 20, 5), (50, 12, 5),
                                             (50, 5, 10), (121, 12, 20)])
def test_step_label_stride_is_the_smallest_nice_stride_under_the_cap(n, most, stride):
    assert step_label_stride(n, most) == stride
    assert len(range(0, n, stride)) <= most


def test_labelled_steps_keep_the_critical_step_and_drop_its_neighbour():
    assert labelled_steps(50, 12) == list(range(0, 50, 5))
    shown = labelled_steps(50, 12, keep=[27])
    assert 27 in shown and 25 not in shown and len(shown) == 10
    assert labelled_steps(50, 12, keep=[25, None, 99]) == list(range(0, 50, 5))


def test_a_fifty_step_heatmap_labels_every_fifth_step_without_overlap_and_marks_every_wrong_step():
    rec = _episode(50, wrong=(3, 27, 41))
    fig = episode_utilization_figure(rec)
    ax = fig.axes[0]
    renderer = _renderer(fig)
    labels = _labels(ax, renderer)
    assert 5 <= len(labels) <= 15
    assert [t.get_text().split(":")[0] for t in labels] == [f"u{t}" for t in labelled_steps(50, 20, keep=[27])]
    assert not _overlaps(labels, renderer)
    assert len(ax.xaxis.get_minorticklocs()) == 50 - len(labels)  # every step keeps a tick
    (marks,) = [line for line in ax.lines if line.get_marker() == "v"]
    assert list(marks.get_xdata()) == [3, 27, 41] and marks.get_color() == "red"
    assert "red: not the expert's action" in ax.get_xlabel()
    short = utilization_figure(_episode(6, critical=None).matrix(), step_labels=["a"] * 6)
    assert [t.get_text() for t in short.axes[0].get_xticklabels()] == [f"u{t}: a" for t in range(6)]


def _case(before: UtilizationEpisode, after: UtilizationEpisode) -> dict:
    record = TaskRecord(task_id=before.task_id, entry_id="valid_train/x/trial_T2", branch="failure",
                        outcome="committed", committed_pattern="missed_relevant")
    return {"record": record, "before": before, "after": after}


def test_refinement_case_panels_share_one_colour_scale_and_one_colorbar_and_thin_their_step_labels():
    before, after = _episode(50, critical=27), _episode(7, critical=5, scale=3.0)
    fig = refinement_case_figure(_case(before, after))
    heat = [ax for ax in fig.axes if ax.images and ax.get_ylabel() == "memory segment"]
    assert len(heat) == 2
    (bar,) = [ax for ax in fig.axes if ax not in heat]  # one colorbar for both panels
    assert "both panels" in bar.get_ylabel()
    clims = {ax.images[0].get_clim() for ax in heat}
    assert len(clims) == 1
    lo, hi = clims.pop()
    both = torch.cat([before.matrix().C.flatten(), after.matrix().C.flatten()])
    assert (lo, hi) == pytest.approx((float(both.min()), float(both.max())))
    renderer = _renderer(fig)
    for ax, n in zip(heat, (50, 7)):
        labels = _labels(ax, renderer)
        assert len(labels) <= 15 and not _overlaps(labels, renderer)
        assert ax.get_xlabel() == "decision step"
    assert "u27" in {t.get_text().split(":")[0] for t in _labels(heat[0], renderer)}
    assert "critical error step" in fig.get_supxlabel()  # the marks' key, once for both panels


def test_identical_sr_at_k_curves_are_one_line_with_one_merged_legend_entry_outside_the_axes():
    curves = {"arbiter-500": {"5": 0.1, "10": 0.5, "15": 0.5}, "flat-500": {"5": 0.0, "10": 0.1, "15": 0.1},
              "arbiter-750": {5: 0.1, 10: 0.5, 15: 0.5}, "flat-750": {"5": 0.0, "10": 0.1, "15": 0.2},
              "none": {"5": 0.0, "10": 0.2, "15": 0.3}}
    assert coinciding_curves(curves) == [["arbiter-500", "arbiter-750"], ["flat-500"], ["flat-750"], ["none"]]
    fig = sr_at_k_figure(curves, reference="none")
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["arbiter-500 = arbiter-750", "flat-500", "flat-750", "none (reference)"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == labels
    styles = {line.get_label(): line.get_linestyle() for line in ax.lines}
    # flat-750 runs on flat-500 for two of its three k's: dashed and hollow on top, so both show
    assert styles["flat-500"] == "-" and styles["flat-750"] == "--"
    assert ax.lines[2].get_markerfacecolor() == "none" and ax.lines[2].get_zorder() > ax.lines[1].get_zorder()
    assert _legend_clear_of_data(fig)
    assert ax.get_xlabel() == "k (steps)" and ax.get_ylabel() == "SR@k (%)"
    assert ax.get_ylim()[0] < 0  # a curve at 0 % is drawn above the axis line


def test_long_merged_labels_go_one_name_a_line():
    assert merged_label(["a", "b"]) == "a = b"
    names = ["smollm2-135m-instruct · none", "smollm2-135m-instruct · icl"]
    assert merged_label(names) == "smollm2-135m-instruct · none\n= smollm2-135m-instruct · icl"


def test_budget_curve_legend_is_outside_and_names_the_dotted_median_lines():
    table = pd.DataFrame({"method": ["arbiter", "arbiter", "flat", "flat"], "budget": [150, 500, 150, 500],
                          "success_%": [20.0, 50.0, 3.0, 3.0], "P_t_median_o200k": [190, 190, 280, 280]})
    fig = budget_curve_figure(table)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert texts[:2] == ["arbiter", "flat"] and texts[2].startswith("median block size")
    assert _legend_clear_of_data(fig)


def _masking(correct: dict[str, int]) -> SegmentMaskingResult:
    row = SegmentMaskingRow(task_id="a", mode="teacher_forced", n_segments=5, k=1, top=[0], bottom=[4],
                            c_max=[1.0] * 5, correct=correct, steps={a: 76 for a in correct},
                            p_expert={"full": 7.3, "bottom_removed": 7.3, "top_removed": 7.2})
    return SegmentMaskingResult("m", 0.2, (row,))


def test_equal_bars_say_null_result_in_the_panel_above_the_bars():
    fig = segment_masking_figure(_masking({"full": 53, "bottom_removed": 53, "top_removed": 53}))
    acc, p = fig.axes
    assert NULL_NOTE in [t.get_text() for t in acc.texts]
    assert NULL_NOTE not in [t.get_text() for t in p.texts]  # -0.1 pp is a difference, printed as such
    note = next(t for t in acc.texts if t.get_text() == NULL_NOTE)
    renderer = _renderer(fig)
    note_box = note.get_window_extent(renderer)
    assert all(not note_box.overlaps(b.get_window_extent(renderer)) for b in acc.patches)
    assert all(not note_box.overlaps(t.get_window_extent(renderer)) for t in acc.texts if t is not note)
    assert "percentage points" in fig.get_supxlabel()
    assert not any(_overlaps(_labels(ax, renderer), renderer) for ax in fig.axes)
    differs = segment_masking_figure(_masking({"full": 53, "bottom_removed": 52, "top_removed": 40}))
    assert all(NULL_NOTE not in [t.get_text() for t in ax.texts] for ax in differs.axes)


def test_head_ablation_tick_labels_do_not_overlap_and_the_numbers_are_explained():
    def row(group, tf, seed=None):
        return ConditionScore(name=f"{group}{seed}", group=group, memory="traj", heads=[], seed=seed, tf_accuracy=tf)

    result = HeadAblationResult("m", 20, (row("none", 0.67), row("icl", 0.71), row("traj", 0.69), row("top", 0.41),
                                          row("random", 0.65, 0), row("random", 0.58, 1)))
    fig = head_ablation_figure(result)
    renderer = _renderer(fig)
    assert not _overlaps(_labels(fig.axes[0], renderer), renderer)
    assert "sd over the random draws" in fig.get_supxlabel()


def test_scenario_figures_keep_their_legends_off_the_bars_and_say_when_refiner_and_rule_agree():
    def rec(i, refiner, rule):
        return TaskRecord(task_id=f"t{i}", branch="failure", outcome="committed", final_pattern=refiner,
                          final_rule_pattern=rule)

    agree = [rec(0, "attended_but_wrong", "attended_but_wrong"), rec(1, "missed_relevant", "missed_relevant")]
    fig = scenario_distribution_figure(agree)
    assert _legend_clear_of_data(fig)
    assert fig.get_supxlabel() == ("refiner and rule on C name the same pattern on 2 of 2 tasks: "
                                              "the bars are equal")
    fig = scenario_distribution_figure([*agree, rec(2, "missed_relevant", "distracted_by_irrelevant")])
    assert fig.get_supxlabel() == "refiner and rule on C name the same pattern on 2 of 3 tasks"
    table = pd.DataFrame({"n": [19, 27], "traj": [0.26, 0.59], "agmr": [0.26, 0.48]},
                         index=["attended_but_wrong", "not refined"])
    fig = scenario_success_figure(table)
    assert _legend_clear_of_data(fig) and fig.axes[0].get_xlabel()


def test_head_score_panels_share_one_scale_and_thin_their_head_labels():
    small, wide = torch.rand(6, 4), 3 * torch.rand(8, 32)
    fig = head_scores_figure([HeadScores("a", small, 10), HeadScores("b", wide, 10)], k=2)
    heat = [ax for ax in fig.axes if ax.get_xlabel() == "head"]
    assert len(heat) == 2 and len(fig.axes) == 3  # two panels, one colorbar
    assert heat[0].images[0].get_clim() == heat[1].images[0].get_clim()
    assert heat[0].images[0].get_clim() == pytest.approx((min(float(small.min()), float(wide.min())), float(wide.max())))
    renderer = _renderer(fig)
    assert len(_labels(heat[1], renderer)) <= 16 and not _overlaps(_labels(heat[1], renderer), renderer)
    own = head_scores_figure([HeadScores("a", small, 10), HeadScores("b", wide, 10)], shared_scale=False)
    assert len(own.axes) == 4
