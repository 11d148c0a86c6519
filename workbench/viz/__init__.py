"""Pure functions from results to matplotlib Figures (no I/O), and ipywidgets explorers."""

from workbench.viz.ablation import head_ablation_figure, segment_masking_figure
from workbench.viz.agmr import (
    refinement_case_figure,
    refinement_explorer,
    scenario_distribution_figure,
    scenario_success_figure,
)
from workbench.viz.curves import budget_curve_figure, sr_at_k_figure
from workbench.viz.explorer import step_view, utilization_explorer
from workbench.viz.heads import head_scores_figure
from workbench.viz.memory_explorers import (
    arbiter_block_text,
    arbiter_explorer,
    arbiter_step_view,
    proactive_explorer,
    proactive_step_view,
)
from workbench.viz.utilization import episode_utilization_figure, utilization_figure

__all__ = [
    "arbiter_block_text",
    "refinement_case_figure",
    "refinement_explorer",
    "scenario_distribution_figure",
    "scenario_success_figure",
    "arbiter_explorer",
    "arbiter_step_view",
    "proactive_explorer",
    "proactive_step_view",
    "episode_utilization_figure",
    "head_ablation_figure",
    "head_scores_figure",
    "segment_masking_figure",
    "sr_at_k_figure",
    "budget_curve_figure",
    "step_view",
    "utilization_explorer",
    "utilization_figure",
]
