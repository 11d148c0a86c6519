"""The context utilization matrix C (AGMR section 2.1).

For memory segments s_0..s_L and decision steps u_0..u_T,

    C[l, t] = n_t / |H| * sum_{h in H} sum_{j in s_l without observation tokens} Attention_h(q_t -> j)

where q_t is the last prompt token before step t, n_t the prompt length at that step (attention is normalised
over a context that grows during the episode; multiplying by n_t makes a uniform row worth 1 per token at every
step) and H the retrieval heads. Inputs are what :class:`AttentionCapture` leaves per step (rows and n_t) and
the key positions of every segment with its observation tokens already removed, which the prompt layout knows.
The positions are the same at every step: the memory sits before the growing history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from pydantic import BaseModel, ConfigDict, model_validator
from torch import Tensor

from workbench.attention.capture import CapturedStep
from workbench.attention.head_set import Head

__all__ = ["UtilizationMatrix", "UtilizationRecord", "utilization_matrix"]


class UtilizationRecord(BaseModel):
    """On-disk form of a :class:`UtilizationMatrix`, stored with the trajectory (JSON-serialisable)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    heads: list[tuple[int, int]]  # (layer, head_index) whose rows were averaged
    prompt_lens: list[int]  # n_t per step
    segment_token_positions: list[list[int]]  # key positions per segment, observation tokens excluded
    matrix: list[list[float]]  # C as [segment][step]
    model_name: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> UtilizationRecord:
        n_seg, n_steps = len(self.segment_token_positions), len(self.prompt_lens)
        if len(self.matrix) != n_seg or any(len(row) != n_steps for row in self.matrix):
            raise ValueError(
                f"matrix must be {n_seg} segment rows of {n_steps} step values (one per prompt_lens entry)"
            )
        return self


@dataclass(frozen=True)
class UtilizationMatrix:
    """C with what it was computed from.

    Attributes:
        C: utilization of segment l at step t.
        prompt_lens: n_t per step.
        heads: the heads averaged (|H| of the formula).
        segment_token_positions: key positions of each segment, observation tokens excluded.
    """

    C: Float[Tensor, "segment step"]
    prompt_lens: tuple[int, ...]
    heads: tuple[Head, ...]
    segment_token_positions: tuple[tuple[int, ...], ...]

    @property
    def n_segments(self) -> int:
        return int(self.C.shape[0])

    @property
    def n_steps(self) -> int:
        return int(self.C.shape[1])

    def segment_mean(self) -> Float[Tensor, " segment"]:
        """c-bar_l: mean utilization of each segment over the steps."""
        return self.C.mean(dim=1)

    def segment_max(self) -> Float[Tensor, " segment"]:
        """c^max_l: peak utilization of each segment over the steps."""
        return self.C.max(dim=1).values

    def to_record(self, model_name: str | None = None) -> UtilizationRecord:
        return UtilizationRecord(
            heads=[tuple(h) for h in self.heads],
            prompt_lens=list(self.prompt_lens),
            segment_token_positions=[list(p) for p in self.segment_token_positions],
            matrix=self.C.tolist(),
            model_name=model_name,
        )

    @classmethod
    def from_record(cls, record: UtilizationRecord) -> UtilizationMatrix:
        n_seg, n_steps = len(record.segment_token_positions), len(record.prompt_lens)
        return cls(
            C=torch.tensor(record.matrix, dtype=torch.float32).reshape(n_seg, n_steps),
            prompt_lens=tuple(record.prompt_lens),
            heads=tuple((int(a), int(b)) for a, b in record.heads),
            segment_token_positions=tuple(tuple(p) for p in record.segment_token_positions),
        )


def utilization_matrix(
    steps: Sequence[CapturedStep] | Sequence[Float[Tensor, "head key_pos"]],
    segment_token_positions: Sequence[Sequence[int]],
    prompt_lens: Sequence[int] | None = None,
    heads: Sequence[Head] = (),
) -> UtilizationMatrix:
    """Build C from per-step captured rows.

    Args:
        steps: ``capture.steps`` of an episode, or one ``[|H|, key_pos]`` tensor of attention rows per step.
        segment_token_positions: per memory segment, its key positions in the prompt with observation tokens
            excluded (an empty list gives a row of zeros).
        prompt_lens: n_t per step; taken from the CapturedSteps (or the rows' length) when omitted.
        heads: the heads behind the rows, recorded with the matrix.

    Returns:
        The :class:`UtilizationMatrix` (C is ``[n_segments, n_steps]``).

    Raises:
        ValueError: lengths disagree, or a position lies outside a step's prompt.
    """
    rows = [s.rows if isinstance(s, CapturedStep) else s for s in steps]
    if prompt_lens is None:
        prompt_lens = [s.prompt_len if isinstance(s, CapturedStep) else int(s.shape[-1]) for s in steps]
    if len(prompt_lens) != len(rows):
        raise ValueError(f"{len(rows)} steps of rows but {len(prompt_lens)} prompt_lens")
    positions = [sorted({int(j) for j in seg}) for seg in segment_token_positions]
    C = torch.zeros(len(positions), len(rows), dtype=torch.float32)  # fp32 even for bf16 rows (upcast below)
    for t, (r, n_t) in enumerate(zip(rows, prompt_lens)):
        if r.ndim != 2:
            raise ValueError(f"step {t}: rows must be [head, key_pos], got shape {tuple(r.shape)}")
        for seg, pos in enumerate(positions):
            if pos and (pos[0] < 0 or pos[-1] >= min(n_t, r.shape[-1])):
                raise ValueError(
                    f"segment {seg}: positions {pos[0]}..{pos[-1]} fall outside step {t}'s prompt of "
                    f"{min(n_t, r.shape[-1])} tokens"
                )
            if pos:
                # Sum over the segment's tokens, mean over heads, rescaled by the prompt length.
                C[seg, t] = n_t * r[:, pos].float().sum(dim=-1).mean()
    return UtilizationMatrix(
        C=C,
        prompt_lens=tuple(int(n) for n in prompt_lens),
        heads=tuple((int(a), int(b)) for a, b in heads),
        segment_token_positions=tuple(tuple(p) for p in positions),
    )
