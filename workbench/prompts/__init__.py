"""Prompt layouts whose builders return the token span of every piece."""

from workbench.prompts.layout import (
    INSTRUCTIONS,
    BuiltPrompt,
    MemoryPiece,
    PieceSpan,
    PromptBuilder,
    PromptTooLongError,
)

__all__ = ["INSTRUCTIONS", "BuiltPrompt", "MemoryPiece", "PieceSpan", "PromptBuilder", "PromptTooLongError"]
