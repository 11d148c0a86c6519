"""Task slices: one ASCII grammar, nothing empty or negative read as a selection, and (for grids) no bound past the
split's tasks silently clipped."""

from __future__ import annotations

import pytest

from workbench.envs.selection import parse_task_slice


@pytest.mark.parametrize(("spec", "n", "expected"), [
    ("0:3", 10, [0, 1, 2]), ("all", 3, [0, 1, 2]), (":", 3, [0, 1, 2]), ("0:10:4", 10, [0, 4, 8]),
    ("7", 10, [7]), ("8:", 10, [8, 9]), (":2", 10, [0, 1]), ("::3", 7, [0, 3, 6]), (" 0:2 ", 5, [0, 1]),
    ("none", 10, []), ("0:20", 5, [0, 1, 2, 3, 4]),  # clipped, unless strict
])
def test_slices_select_what_python_would(spec, n, expected):
    assert parse_task_slice(spec, n) == expected


@pytest.mark.parametrize(("spec", "message"), [
    ("", "expected a slice"), ("  ", "expected a slice"), ("::", "expected a slice"), ("-1:", "expected a slice"),
    ("-1", "expected a slice"), ("0:-1", "expected a slice"), ("1_0:20", "expected a slice"),
    ("١:٢", "expected a slice"), ("٣", "expected a slice"), ("0:20:", "expected a slice"), ("a:b", "expected a slice"),
    ("0:1:2:3", "expected a slice"), ("0 : 2", "expected a slice"),
    ("0:20:0", "the step must be at least 1"),
    ("5:5", "selects no task of 10"), ("10:", "selects no task of 10"), ("10", "out of range for 10 tasks"),
])
def test_malformed_or_empty_slices_are_refused(spec, message):
    with pytest.raises(ValueError, match="--tasks") as err:
        parse_task_slice(spec, 10)
    assert message in str(err.value)


def test_a_slice_must_be_a_string():
    for spec in (5, None, ["0:2"], 1.5):
        with pytest.raises(ValueError, match="where a slice string belongs"):
            parse_task_slice(spec, 10)  # type: ignore[arg-type]


def test_strict_refuses_bounds_past_the_tasks():
    assert parse_task_slice("0:134:4", 134, strict=True)[-1] == 132
    assert parse_task_slice("133:", 134, strict=True) == [133]
    with pytest.raises(ValueError, match="stop 99999 is past the split's 134 tasks"):
        parse_task_slice("0:99999", 134, strict=True)
    with pytest.raises(ValueError, match="start 134 is past the split's 134 tasks"):
        parse_task_slice("134:", 134, strict=True)
