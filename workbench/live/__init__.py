"""Live loops in the kernel: a session played one decision at a time (:class:`Session`), and AGMR's refinement
driven one attempt at a time against a working copy (:class:`LiveRefinement`)."""

from workbench.live.agmr import Interrupted, LiveRefinement
from workbench.live.session import Played, Session, SessionError, find_task, memory_mass, replay_parity

__all__ = ["Interrupted", "LiveRefinement", "Played", "Session", "SessionError", "find_task", "memory_mass",
           "replay_parity"]
