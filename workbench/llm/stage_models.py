"""The base models of every LLM stage's typed input and output (each method defines its own in its package).

Inputs are the structured payload a prompt is rendered from; the same payload travels with the request as
``context``, so offline algorithmic backends compute their answer from data, not from re-parsing prose (see
:mod:`workbench.llm.stages`). Outputs are what a model must return, validated before any method sees it: they
forbid unknown fields so a model that invents a key is told so in the repair retry instead of having the key
silently dropped. Segment and step indices are 0-based and refer to the lists exactly as the prompt enumerated
them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StageInput", "StageOutput"]


class StageInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StageOutput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
