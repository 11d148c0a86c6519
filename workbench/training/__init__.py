"""Memory-conditioned behaviour cloning of a small action model on expert trajectories (LoRA, CPU)."""

from workbench.training.data import (
    MemorySampler,
    PackedExample,
    StepTarget,
    build_examples,
    encode_target,
    pack,
    training_trajectories,
    unpacked_step,
)
from workbench.training.trainer import (
    TrainConfig,
    Trainer,
    add_lora,
    evaluate_loss,
    example_loss,
)

__all__ = [
    "MemorySampler", "PackedExample", "StepTarget", "TrainConfig", "Trainer", "add_lora", "build_examples",
    "encode_target", "evaluate_loss", "example_loss", "pack", "training_trajectories", "unpacked_step",
]
