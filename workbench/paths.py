"""Where the workbench keeps what it derives (dequantized weights, embeddings, memory bases): one root for every layer."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """Where derived artefacts (dequantized weights, embeddings) are cached: ``$WORKBENCH_CACHE`` or
    ``~/.cache/workbench``."""
    return Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "workbench"))
