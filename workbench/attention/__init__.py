"""Attention instruments: last-query capture, retrieval-head scoring, head masking, the utilization matrix C,
segment masking and memory-use diagnosis (AGMR sections 2.1-2.2); the retrieval supervision set and the
experiments behind Figures 2, 3, 4 and 8."""

from workbench.attention.ablation import (
    AblationCondition,
    ConditionScore,
    HeadAblationResult,
    ablation_conditions,
    run_head_ablation,
)
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
from workbench.attention.experiments import (
    build_supervision,
    head_ablation,
    retrieval_heads,
    segment_masking,
    split_experts,
    teacher_forced_steps,
    try_load_model,
)
from workbench.attention.head_set import Head, HeadSet, kv_head_of
from workbench.attention.heads import (HEADS_ASSETS, HeadScores, HeadScoresRecord, SupervisionPair,
                                      default_retrieval_heads, save_default_retrieval_heads, score_heads)
from workbench.attention.instrument import CaptureInstrument, HeadMaskInstrument
from workbench.attention.masking import mask_heads_hooks, random_heads
from workbench.attention.recording import (
    UtilizationEpisode,
    load_utilization,
    representative,
    save_utilization,
    teacher_forced_utilization,
    utilization_episode,
)
from workbench.attention.segment_ablation import SegmentMaskingResult, SegmentMaskingRow, run_segment_masking
from workbench.attention.segment_masking import DropSegments, SegmentMaskChoice, segments_to_mask
from workbench.attention.supervision import (
    StepTransition,
    SupervisionRecord,
    build_step_level,
    build_task_level,
    load_supervision,
    save_supervision,
    step_transitions,
    supervision_pairs,
    supervision_summary,
    task_transitions,
    teacher_forced_prompt,
    template_segment,
)
from workbench.attention.utilization import UtilizationMatrix, UtilizationRecord, utilization_matrix

__all__ = [
    "AblationCondition",
    "AttentionCapture",
    "CaptureInstrument",
    "CapturedStep",
    "ConditionScore",
    "DropSegments",
    "HeadAblationResult",
    "HeadMaskInstrument",
    "SegmentMaskingResult",
    "SegmentMaskingRow",
    "StepTransition",
    "SupervisionRecord",
    "UtilizationEpisode",
    "ablation_conditions",
    "build_step_level",
    "build_supervision",
    "build_task_level",
    "head_ablation",
    "load_supervision",
    "load_utilization",
    "representative",
    "retrieval_heads",
    "run_head_ablation",
    "run_segment_masking",
    "save_supervision",
    "save_utilization",
    "segment_masking",
    "split_experts",
    "step_transitions",
    "supervision_pairs",
    "supervision_summary",
    "task_transitions",
    "teacher_forced_prompt",
    "teacher_forced_steps",
    "teacher_forced_utilization",
    "template_segment",
    "try_load_model",
    "utilization_episode",
    "DiagnosisConfig",
    "FailureDiagnosis",
    "FailurePattern",
    "Head",
    "HeadScores",
    "HeadScoresRecord",
    "HeadSet",
    "SegmentMaskChoice",
    "SupervisionPair",
    "UtilizationMatrix",
    "UtilizationRecord",
    "diagnose_failure",
    "kv_head_of",
    "mask_heads_hooks",
    "random_heads",
    "score_heads",
    "default_retrieval_heads",
    "save_default_retrieval_heads",
    "HEADS_ASSETS",
    "diagnose_column",
    "entry_scale",
    "segments_to_mask",
    "utilization_matrix",
]
