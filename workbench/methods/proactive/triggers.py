"""When the memory agent runs: at the first step and every k steps (k = 1 by default, as in the public code),
plus optional event triggers.

    fires(t) = (t mod k == 0) or (event triggers: the last action failed ("Nothing happens."), repeated an
               earlier action of the episode, or brought the agent to a location it had not been at before)

Steps are 0-based here (t = 0 is the paper's "step 1").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Trigger", "EVENTS"]

EVENTS = ("failed", "repeated", "new-location")


@dataclass(frozen=True)
class Trigger:
    interval: int = 1
    events: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.interval < 1:
            raise ValueError(f"interval {self.interval}: expected at least 1 (run the memory agent every k steps)")
        bad = [e for e in self.events if e not in EVENTS]
        if bad:
            raise ValueError(f"trigger event '{bad[0]}': expected one of {', '.join(EVENTS)}")

    def fires(self, t: int, failed: bool = False, repeated: bool = False, new_location: bool = False) -> str | None:
        """Why the memory agent runs at step ``t`` (``interval``, or the event's name), or None."""
        if t % self.interval == 0:
            return "interval"
        for name, hit in (("failed", failed), ("repeated", repeated), ("new-location", new_location)):
            if name in self.events and hit:
                return name
        return None
