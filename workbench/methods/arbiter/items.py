"""MemArbiter's atomic memory items: one fact, one bank, two renderings, a status.

An item is created from a validated candidate write (``workbench.llm.schemas.CandidateItem``) and never
re-extracted: its bank says what it is for, its band (chosen each step by the gate) only how it is shown, so
an item can move between focal and ambient without being rewritten (paper section 3.2).

Status: ``active`` items take part in arbitration; ``superseded`` (a newer item replaced it: the last task
state snapshot, a revised constraint, a fact contradicted by newer evidence), ``completed`` (a goal or task
constraint whose task is done) and ``invalidated`` (a constraint the evidence no longer supports) never show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = ["Item", "STATUSES", "BANK_ORDER", "BANK_TITLES", "BANK_PREFIX", "PROTECTED_BANKS", "norm_text",
           "TASK_SCOPE"]

STATUSES = ("active", "superseded", "completed", "invalidated")
BANK_ORDER = ("goal", "task_state", "constraint", "episodic", "reference")
BANK_TITLES = {"goal": "Goal", "task_state": "Task state", "constraint": "Constraints", "episodic": "Episodic",
               "reference": "Reference", "pool": "Memory"}
BANK_PREFIX = {"goal": "G", "task_state": "T", "constraint": "C", "episodic": "E", "reference": "R"}
PROTECTED_BANKS = frozenset({"goal", "constraint"})  # protected from decay until completed or invalidated
TASK_SCOPE = "task"  # scope of goal-derived items: the whole task


def norm_text(text: str) -> str:
    """Lowercase, single spaces, no trailing punctuation: how duplicates are recognised."""
    return " ".join(re.sub(r"[.!;:]+$", "", text.lower().strip()).split())


@dataclass(frozen=True)
class Item:
    """One atomic memory item.

    Attributes:
        id: ``G1``, ``T4``, ``C2``, ``E7``, ``R12`` (bank prefix + a per-episode counter).
        bank: its functional role (the writer's label; the no-banks ablation pools items but keeps the label,
            so its prompts' episodic share can still be measured).
        focal: the full rendering (the item's content).
        ambient: the compact rendering: the bank template's cue (``ambient.py``), whoever wrote the item.
        entities: the ALFWorld entities it mentions (``apple 1``).
        scope: where it applies: ``task`` (the whole task) or a situation ``at=<location>|holding=<object>``
            (a failed action's "do not repeat" applies where it failed).
        source_step: the step whose evidence produced it.
        source: what produced it (task, observation, action, state).
        status: see the module docstring.
        last_seen: the step its content was last confirmed (a duplicate write refreshes it).
        repeats: how many times an episodic event happened (a repeated event merges into the first).
        about: the action an episodic event records, or the failed action a learnt constraint forbids.
    """

    id: str
    bank: str
    focal: str
    ambient: str
    entities: tuple[str, ...] = ()
    scope: str = TASK_SCOPE
    source_step: int = 0
    source: str = ""
    status: str = "active"
    last_seen: int = 0
    about: str = ""  # the normalised action an episodic event or a learnt constraint is about
    repeats: int = 1  # an episodic event: how many times it happened (duplicates merge into it)

    @property
    def active(self) -> bool:
        return self.status == "active"

    @property
    def key(self) -> str:
        """The normalised content (duplicate detection)."""
        return norm_text(self.focal)

    def with_status(self, status: str) -> "Item":
        if status not in STATUSES:
            raise ValueError(f"item status '{status}': expected one of {', '.join(STATUSES)}")
        return replace(self, status=status)

    def describe(self) -> dict:
        """The item as the run records it when it is created, and again when its content is revised."""
        return {"id": self.id, "bank": self.bank, "focal": self.focal, "ambient": self.ambient,
                "entities": list(self.entities), "scope": self.scope, "source_step": self.source_step,
                "source": self.source, **({"about": self.about} if self.about else {}),
                **({"repeats": self.repeats} if self.repeats > 1 else {})}
