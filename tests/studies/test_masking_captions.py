"""The masking studies' captions say what the numbers show: the paper's direction, the opposite, a null result,
or a gap inside the spread of the random draws -- never the paper's result where the data do not have it."""

from workbench.studies.head_masking import ConditionScore, HeadAblationResult
from workbench.studies.segment_masking import SegmentMaskingResult, SegmentMaskingRow


def seg(correct: dict[str, int]) -> SegmentMaskingResult:
    row = SegmentMaskingRow(task_id="t", mode="teacher_forced", n_segments=5, k=1, top=[0], bottom=[4],
                            c_max=[1.0] * 5, correct=correct, steps={a: 10 for a in correct})
    return SegmentMaskingResult("m", 0.2, (row,))


def test_segment_masking_caption():
    assert "A null result" in seg({"full": 7, "top_removed": 7, "bottom_removed": 7}).caption()
    assert "as in AGMR's Figure 3" in seg({"full": 7, "top_removed": 4, "bottom_removed": 6}).caption()
    assert "neither removal lowers" in seg({"full": 7, "top_removed": 8, "bottom_removed": 9}).caption()
    assert "hurts no more" in seg({"full": 7, "top_removed": 6, "bottom_removed": 5}).caption()


def heads(traj: float, top: float, randoms: list[float]) -> HeadAblationResult:
    rows = [ConditionScore(name="Traj", group="traj", memory="traj", heads=[], tf_accuracy=traj),
            ConditionScore(name="top", group="top", memory="traj", heads=[(0, 0)], tf_accuracy=top)]
    rows += [ConditionScore(name=f"r{i}", group="random", memory="traj", heads=[(1, i)], seed=i, tf_accuracy=r)
             for i, r in enumerate(randoms)]
    return HeadAblationResult("m", 1, tuple(rows))


def test_head_masking_caption():
    assert heads(0.70, 0.40, [0.66, 0.64]).caption().endswith("as in AGMR's Figure 2.")
    inside = heads(0.70, 0.60, [0.75, 0.55]).caption()  # 10 points vs 5, draws 14 points apart
    assert "within the spread" in inside and "as in AGMR's Figure 2." not in inside
    assert "does not lower it" in heads(0.70, 0.72, [0.69, 0.68]).caption()
    assert "random heads cost as much or more" in heads(0.70, 0.68, [0.60, 0.61]).caption()


def test_committed_heads_note_names_the_command_whole():
    from workbench.studies.retrieval_heads import committed_heads_note

    note = committed_heads_note("smollm2-135m-alfworld-v2", [(20, 3), (24, 1), (20, 5), (20, 6), (20, 7)])
    assert "4 of 5 in common" in note and "--tasks 0:140:7" in note and "(git " in note
    assert committed_heads_note("no-such-model", [(0, 0)]) == "`no-such-model` has no committed retrieval heads."
