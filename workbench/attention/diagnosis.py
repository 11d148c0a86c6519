"""Memory-use patterns read off C (AGMR section 2.2, appendix E.2).

Failures. Given the earliest critical error step j and the segment i that supports the correct action there,
column C[:, j] is compared with the ideal use "i is attended". With ``alpha = attended_fraction``,
``gamma = distractor_ratio`` and a reference ``scale``:

1. ``C[i, j] < alpha * scale`` (or C[i, j] = 0)      -> ``missed_relevant`` (i lost focus at the critical step);
2. else some k != i with ``C[k, j] >= gamma * C[i, j]`` -> ``distracted_by_irrelevant`` (comparable competitors);
3. else                                               -> ``attended_but_wrong`` (i dominates, the action is wrong).

``scale`` is by default the entry's own ``median_k c^max_k`` (the statistic E.2 uses): "attended" then means
"near the peaks this entry reaches when it is used", so a step where attention collapses on every segment reads
as missed. ``reference="column"`` uses ``max_k C[k, j]`` instead (i is compared with the best-read segment of
that step only). In the missed case the distractors listed as evidence are the segments that are themselves
attended (``C[k, j] >= alpha * scale``).

This is the one rule of the workbench: the reports' pattern tables, AGMR's loop and the offline refiner
(``workbench.methods.agmr.offline.refiner``, which sees only the column and the scale) all call
:func:`diagnose_column`.

Successes. A segment is weakly utilized (a simplification candidate) by E.2's ALFWorld rule
``c^max_l < 1.2 * median_k c^max_k  and  c^max_l / c-bar_l < 3.5`` (a segment never attended, c^max = 0, is weak),
or by a global threshold on c^max: SciWorld ``0.25 * capped global max`` (the cap, unspecified in the paper, is
here a quantile of all entries of C), WebShop ``0.9 * global max``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor

from workbench.attention.utilization import UtilizationMatrix

__all__ = ["DiagnosisConfig", "FailureDiagnosis", "FailurePattern", "diagnose_failure", "diagnose_column",
           "entry_scale", "weakly_used_segments"]

FailurePattern = Literal["attended_but_wrong", "missed_relevant", "distracted_by_irrelevant"]


@dataclass(frozen=True)
class DiagnosisConfig:
    """Thresholds of the failure rule.

    Attributes:
        attended_fraction: alpha; a segment is attended at a step when its C reaches alpha x scale.
        distractor_ratio: gamma; a segment other than i is a distractor when its C reaches gamma x C[i, j]
            ("comparable" attention; 1.0 keeps only stronger ones).
        reference: ``entry`` (scale = median over segments of c^max) or ``column`` (scale = max of C[:, j]).
    """

    attended_fraction: float = 0.5
    distractor_ratio: float = 0.8
    reference: Literal["entry", "column"] = "entry"


@dataclass(frozen=True)
class FailureDiagnosis:
    """The pattern at a critical error step, with the numbers behind it.

    Attributes:
        pattern: the failure class.
        step: j, the earliest critical error step.
        segment: i, the segment supporting the correct action.
        value: C[i, j].
        scale: the reference for "attended" (median over segments of c^max, or the column's max).
        rank: rank of segment i in column j (1 = most attended).
        share: C[i, j] / sum_k C[k, j] (0 when the column is all zero).
        distractors: segments k != i with C[k, j] >= gamma * C[i, j] (when i is missed: those with
            C[k, j] >= alpha * scale), strongest first.
    """

    pattern: FailurePattern
    step: int
    segment: int
    value: float
    scale: float
    rank: int
    share: float
    distractors: tuple[int, ...]


def _matrix(C: Float[Tensor, "segment step"] | UtilizationMatrix) -> Float[Tensor, "segment step"]:
    C = C.C if isinstance(C, UtilizationMatrix) else C
    if C.ndim != 2 or C.shape[0] == 0 or C.shape[1] == 0:
        raise ValueError(f"C must be a non-empty [segment, step] matrix, got shape {tuple(C.shape)}")
    return C.float()


def diagnose_failure(
    C: Float[Tensor, "segment step"] | UtilizationMatrix,
    step: int,
    segment: int,
    config: DiagnosisConfig = DiagnosisConfig(),
) -> FailureDiagnosis:
    """Classify a failed run at its earliest critical error step.

    Args:
        C: the utilization matrix of the failed run.
        step: j, the earliest critical error step (a column of C).
        segment: i, the memory segment supporting the correct action at j (a row of C).
        config: the thresholds.

    Returns:
        The :class:`FailureDiagnosis`.
    """
    C = _matrix(C)
    n_seg, n_steps = C.shape
    if not 0 <= step < n_steps or not 0 <= segment < n_seg:
        raise ValueError(f"step={step}, segment={segment} outside C of {n_seg} segments x {n_steps} steps")
    if config.reference not in ("entry", "column"):
        raise ValueError(f"DiagnosisConfig.reference='{config.reference}' is not one of entry, column")
    scale = entry_scale(C) if config.reference == "entry" else None
    return diagnose_column(C[:, step], segment, scale, config, step=step)


def entry_scale(C: Float[Tensor, "segment step"] | UtilizationMatrix) -> float:
    """The entry's reference for "attended": ``median_k c^max_k``."""
    return float(torch.quantile(_matrix(C).max(dim=1).values, 0.5))


def diagnose_column(
    column: Float[Tensor, " segment"] | list[float] | tuple[float, ...],
    segment: int,
    scale: float | None = None,
    config: DiagnosisConfig = DiagnosisConfig(),
    *,
    step: int = -1,
) -> FailureDiagnosis:
    """The failure rule on one column ``C[:, j]`` (module docstring).

    Args:
        column: utilization of every segment at the critical step.
        segment: i, the segment supporting the correct action.
        scale: the reference for "attended" (:func:`entry_scale` of the whole C); None: the column's max.
        step: j, recorded in the result (-1 when only the column is known).
    """
    col = torch.as_tensor(column, dtype=torch.float32).flatten()
    n_seg = int(col.shape[0])
    if n_seg == 0 or not 0 <= segment < n_seg:
        raise ValueError(f"segment={segment} is not a row of a column of {n_seg} segments")
    value = float(col[segment])
    scale = float(col.max()) if scale is None else float(scale)
    floor = config.attended_fraction * scale
    missed = value <= 0 or value < floor  # an all-zero entry is missed even when the whole matrix is zero
    bar = floor if missed else config.distractor_ratio * value
    distractors = sorted((k for k in range(n_seg) if k != segment and col[k] > 0 and col[k] >= bar),
                         key=lambda k: (-float(col[k]), k))
    if missed:
        pattern: FailurePattern = "missed_relevant"
    elif distractors:
        pattern = "distracted_by_irrelevant"
    else:
        pattern = "attended_but_wrong"
    total = float(col.sum())
    return FailureDiagnosis(
        pattern=pattern,
        step=step,
        segment=segment,
        value=value,
        scale=scale,
        rank=1 + int((col > value).sum()),
        share=value / total if total > 0 else 0.0,
        distractors=tuple(distractors),
    )


def weakly_used_segments(
    C: Float[Tensor, "segment step"] | UtilizationMatrix,
    rule: Literal["relative", "global_capped", "global"] = "relative",
    peak_factor: float = 1.2,
    concentration: float = 3.5,
    global_fraction: float | None = None,
    cap_quantile: float = 0.95,
) -> tuple[int, ...]:
    """Segments weakly utilized over a successful run (candidates for simplification), ascending.

    Args:
        C: the utilization matrix.
        rule: ``relative`` (E.2, ALFWorld), ``global_capped`` (E.2, SciWorld), ``global`` (E.2, WebShop).
        peak_factor: relative rule, c^max below this x the median c^max.
        concentration: relative rule, c^max / c-bar below this (attention not concentrated on a step).
        global_fraction: global rules, threshold as a fraction of the (capped) global max; defaults 0.25 for
            ``global_capped`` and 0.9 for ``global``.
        cap_quantile: ``global_capped``, the global max is capped at this quantile of all entries of C.

    Returns:
        Indices of weakly utilized segments.
    """
    C = _matrix(C)
    c_max, c_mean = C.max(dim=1).values, C.mean(dim=1)
    if rule == "relative":
        # c^max = 0 means c-bar = 0 too: a never-attended segment is as weak as it gets.
        ratio = torch.where(c_mean > 0, c_max / c_mean.clamp_min(1e-30), torch.zeros_like(c_max))
        weak = (c_max < peak_factor * torch.quantile(c_max, 0.5)) & (ratio < concentration)
    elif rule in ("global_capped", "global"):
        if rule == "global_capped":
            reference = min(float(C.max()), float(torch.quantile(C.flatten(), cap_quantile)))
            fraction = 0.25 if global_fraction is None else global_fraction
        else:
            reference = float(C.max())
            fraction = 0.9 if global_fraction is None else global_fraction
        # Both c-bar and c^max below the threshold reduces to c^max below it (c-bar <= c^max).
        weak = c_max < fraction * reference
    else:
        raise ValueError(f"rule='{rule}' is not one of relative, global_capped, global")
    return tuple(int(i) for i in torch.nonzero(weak).flatten())
