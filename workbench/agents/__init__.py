"""The episode loop, the MemoryPolicy seam, and the one re-score primitive (replay a recorded episode to a step,
score that state again under typed memory edits)."""

from workbench.agents import edits
from workbench.agents.loop import Agent, EpisodeResult, StepInstrument
from workbench.agents.policy import (
    POLICIES,
    FixedICL,
    MemoryBlock,
    MemoryPolicy,
    NoMemory,
    RetrievedTrajectory,
    build_policy,
    get_policy,
    list_policies,
    register_policy,
)
from workbench.agents.rescore import (
    Edited,
    Rescore,
    State,
    apply_edits,
    rescore,
    rescore_many,
    state_at,
    states_at,
)

__all__ = [
    "Agent", "EpisodeResult", "FixedICL", "MemoryBlock", "MemoryPolicy", "NoMemory", "RetrievedTrajectory",
    "StepInstrument", "get_policy", "register_policy", "list_policies", "build_policy", "POLICIES",
    "edits", "Edited", "Rescore", "State", "apply_edits", "rescore", "rescore_many", "state_at", "states_at",
]
