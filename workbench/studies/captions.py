"""Sentences for the captions of tables and figures, computed from the runs they show.

A caption says what a table or figure shows and how to read it; where the data decides something a reader would
otherwise have to find by comparing rows (two conditions that succeed on exactly the same tasks, two curves that
are one, a difference no test can tell from chance), the caption says it. These helpers compute those sentences
from run folders (``name -> load_run(folder)``: ``(trajectories, metrics, config)``) and from result frames; the
report modules beside them (``agmr_report``, ``arbiter_report``, ``proactive_report``) assemble the captions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from workbench.eval.compare import paired_outcomes

__all__ = ["ALPHA", "missing", "largest", "upper_first", "pct", "pts", "p_value", "significance", "versus",
           "code_list", "outcomes", "identical_groups", "identical_sentence", "paired", "paired_sentence",
           "adopted_episodes"]

#: The level below which a paired difference is called significant in a caption.
ALPHA = 0.05


def missing(x) -> bool:
    """None or NaN (a cell with no value)."""
    return x is None or (isinstance(x, float) and x != x)


def largest(values) -> int:
    """The largest of a column of counts, as an int (0 when the column is empty or holds no number)."""
    found = [v for v in values if not missing(v)]
    return int(max(found)) if found else 0


def upper_first(text: str) -> str:
    """The text with its first letter upper-case (``str.capitalize`` would lower the rest)."""
    return text[:1].upper() + text[1:]


def pct(x: float | None, digits: int = 1) -> str:
    """A rate in [0, 1] as a percentage, like the tables (``0.537 -> "53.7%"``)."""
    if missing(x):
        return "–"
    if 0 < abs(x) < 0.5 * 10 ** -(digits + 2):  # not "0.0%" for a rate that is not zero
        return f"<{10 ** -digits:.{digits}f}%"
    return f"{100 * x:.{digits}f}%"


def pts(diff: float | None) -> str:
    """A difference of rates in [0, 1] as signed points (``-0.022 -> "-2.2 pts"``)."""
    return "–" if diff is None else f"{100 * diff:+.1f} pts"


def p_value(p: float | None) -> str:
    """An exact McNemar p-value, two significant digits (``"p = 0.25"``, ``"p = 1.6e-08"``)."""
    return "p = –" if missing(p) else f"p = {p:.2g}"


def significance(p: float | None) -> str:
    """``"p = 0.019"``, or ``"p = 0.38, not significant"`` at :data:`ALPHA`."""
    return p_value(p) + ("" if not missing(p) and p < ALPHA else ", not significant")


def versus(runs: Mapping[str, tuple], base: str, others: Sequence[str]) -> str:
    """Each of ``others`` against ``base`` on the tasks both played: ```b` -17.2 pts (p = 0.00012), `c` -4.5 pts
    (p = 0.38, not significant)``; "the same tasks solved" where no task parts them."""
    parts = []
    for o in others:
        r = paired(runs, o, base)
        parts.append(f"`{o}` no task in common" if not r["n"] else
                     f"`{o}` the same tasks solved" if r["only_a"] == r["only_b"] == 0
                     else f"`{o}` {pts(r['diff'])} ({significance(r['p_mcnemar'])})")
    return ", ".join(parts)


def code_list(names: Iterable[str], conj: str = "and") -> str:
    """```a`, `b` and `c``` ."""
    names = [f"`{n}`" for n in names]
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} {conj} {names[-1]}"


def outcomes(run: tuple) -> dict[str, bool]:
    """Task id -> success of one run (``load_run``'s tuple, or its trajectories alone)."""
    trajs = run[0] if isinstance(run, tuple) else run
    return {t.task_id: bool(t.success) for t in trajs}


def identical_groups(runs: Mapping[str, tuple], names: Sequence[str]) -> list[list[str]]:
    """Groups (two or more, in ``names`` order) of conditions that played the same tasks and succeed on exactly
    the same ones."""
    groups: list[list[str]] = []
    seen: dict[tuple, list[str]] = {}
    for n in names:
        key = tuple(sorted(outcomes(runs[n]).items()))
        if key in seen:
            seen[key].append(n)
        else:
            seen[key] = [n]
            groups.append(seen[key])
    return [g for g in groups if len(g) > 1]


def identical_sentence(runs: Mapping[str, tuple], names: Sequence[str]) -> str:
    """One sentence naming the conditions among ``names`` that succeed on exactly the same tasks ("" if none)."""
    groups = identical_groups(runs, names)
    if not groups:
        return ""
    parts = [f"{code_list(g)} succeed on exactly the same tasks" for g in groups]
    return "; ".join(parts) + "."


def paired(runs: Mapping[str, tuple], a: str, b: str) -> dict:
    """:func:`workbench.eval.compare.paired_outcomes` of two runs' episodes (by task id)."""
    return paired_outcomes(outcomes(runs[a]), outcomes(runs[b]))


def paired_sentence(runs: Mapping[str, tuple], a: str, b: str) -> str:
    """```a` 53.7% vs `b` 56.0% (-2.2 pts; 0 tasks only `a` solves, 3 only `b`; p = 0.25)``, with what the
    exact McNemar test says of it (identical, not significant, significant)."""
    r = paired(runs, a, b)
    if not r["n"]:
        return f"`{a}` and `{b}` played no task in common"
    head = f"`{a}` {pct(r['rate_a'])} vs `{b}` {pct(r['rate_b'])}"
    if r["only_a"] == r["only_b"] == 0:
        return f"{head}: the same tasks solved"
    verdict = "significant" if r["p_mcnemar"] is not None and r["p_mcnemar"] < ALPHA else "not significant"
    return (f"{head} ({pts(r['diff'])}; {r['only_a']} tasks only `{a}` solves, {r['only_b']} only `{b}`; "
            f"{p_value(r['p_mcnemar'])}, {verdict})")


def adopted_episodes(config: dict, rule: str | None = None, read: bool = False) -> int:
    """How many episodes of a run were adopted from another folder (``config['adopted']``): those adopted under
    ``rule`` (``"same memory"``), or with ``read`` those read from a run of the same parameters (no rule)."""
    return sum(a["episodes"] for a in config.get("adopted", [])
               if (("rule" not in a) if read else (rule is None or a.get("rule") == rule)))
