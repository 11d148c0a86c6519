"""Live loops in the kernel: a :class:`Session` plays an agent one decision at a time, shows the state it decides
in and re-scores it under memory edits (the re-score primitive the studies use)."""

from workbench.live.session import Played, Session, SessionError, find_task

__all__ = ["Session", "SessionError", "Played", "find_task"]
