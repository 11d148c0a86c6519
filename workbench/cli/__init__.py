"""``workbench``, the command line: one module per command (``run``, ``sweep``, ``refine``, ``memory``,
``proactive-sft``, ``dagger``, ``merge-runs``, ``experts``, ``reproduce``, ``heads``, ``utilization``, ``partings``,
``list``),
the options they share in ``_options``, the parser and ``main`` in ``_app``."""

from __future__ import annotations

from workbench.cli._app import build_parser, main

__all__ = ["main", "build_parser"]
