"""Attention instruments: last-query capture, retrieval-head scoring, head masking, the utilization matrix C,
segment masking and memory-use diagnosis (AGMR sections 2.1-2.2); the retrieval supervision set and the
experiments behind Figures 2, 3, 4 and 8."""

from workbench.attention.capture import AttentionCapture, CapturedStep
from workbench.attention.diagnosis import (
    DiagnosisConfig,
    FailureDiagnosis,
    FailurePattern,
    diagnose_column,
    diagnose_failure,
    entry_scale,
    weakly_used_segments,
)
from workbench.attention.head_set import Head, HeadSet, kv_head_of
from workbench.attention.heads import (
    HEADS_ASSETS,
    HeadScores,
    HeadScoresRecord,
    SupervisionPair,
    default_retrieval_heads,
    save_default_retrieval_heads,
    score_heads,
)
from workbench.attention.instrument import CaptureInstrument, HeadMaskInstrument
from workbench.attention.masking import mask_heads_hooks, random_heads
from workbench.attention.segment_masking import (
    DropSegments,
    SegmentMaskChoice,
    segments_to_mask,
)
from workbench.attention.supervision import (
    SupervisionRecord,
    load_supervision,
    save_supervision,
    supervision_pairs,
    supervision_summary,
    template_segment,
)
from workbench.attention.utilization import (
    UtilizationMatrix,
    UtilizationRecord,
    utilization_matrix,
)

__all__ = ["weakly_used_segments", "AttentionCapture", "CaptureInstrument", "CapturedStep", "DropSegments", "HeadMaskInstrument", "SupervisionRecord", "load_supervision", "save_supervision", "supervision_pairs", "supervision_summary", "template_segment", "DiagnosisConfig", "FailureDiagnosis", "FailurePattern", "Head", "HeadScores", "HeadScoresRecord", "HeadSet", "SegmentMaskChoice", "SupervisionPair", "UtilizationMatrix", "UtilizationRecord", "diagnose_failure", "kv_head_of", "mask_heads_hooks", "random_heads", "score_heads", "default_retrieval_heads", "save_default_retrieval_heads", "HEADS_ASSETS", "diagnose_column", "entry_scale", "segments_to_mask", "utilization_matrix"]
