"""The episode loop and the MemoryPolicy seam."""

from workbench.agents.loop import Agent, EpisodeResult, StepInstrument
from workbench.agents.policy import (
    FixedICL,
    MemoryBlock,
    MemoryPolicy,
    NoMemory,
    RetrievedTrajectory,
    get_policy,
    register_policy,
)

__all__ = [
    "Agent", "EpisodeResult", "FixedICL", "MemoryBlock", "MemoryPolicy", "NoMemory", "RetrievedTrajectory",
    "StepInstrument", "get_policy", "register_policy",
]
