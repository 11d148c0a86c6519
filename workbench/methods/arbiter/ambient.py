"""The ambient band: one deterministic template per bank turns an item's content into a short cue (paper 3.2).

The ambient form is MemArbiter's rendering, not the writer's: whichever backend wrote the item (an LLM or the
offline algorithm), its ambient line comes from these templates, so the ambient band reads the same for every
backend and an item can switch bands without being re-extracted.

    goal         goal: <focal without "Task goal:", articles dropped, at most 10 words>
    task_state   <focal, articles dropped, at most 12 words>
    constraint   avoid: <action>                      a constraint learnt from a failed action
                 <focal, articles dropped, at most 8 words>
    episodic     <action>: failed | saw <objects the outcome revealed, at most 6> | ok
    reference    <object> @ <receptacle>              two entities (a location fact)
                 <entity>: open | closed              one entity and an open/closed state
                 room: <type> x<count>, ...           more than two entities (an inventory)
                 <focal, articles dropped, at most 8 words>
"""

from __future__ import annotations

import re
from collections import Counter

from workbench.envs.alfworld_text import entity_type, sightings

__all__ = ["ambient_form", "compress"]

_ARTICLES = frozenset({"a", "an", "the"})


def compress(text: str, most: int) -> str:
    """``text`` without articles and final punctuation, cut to ``most`` words (an ellipsis marks the cut)."""
    words = [w for w in re.sub(r"[.!]+$", "", text.strip()).split() if w.lower() not in _ARTICLES]
    return " ".join(words[:most]) + (" …" if len(words) > most else "")


def ambient_form(bank: str, focal: str, entities: tuple[str, ...] = (), about: str = "") -> str:
    """The ambient cue of an item (module docstring)."""
    low = focal.lower()
    if bank == "goal":
        return "goal: " + compress(re.sub(r"^task goal:\s*", "", focal, flags=re.I), 10)
    if bank == "task_state":
        return compress(focal, 12)
    if bank == "constraint":
        return f"avoid: {about}" if about else compress(focal, 8)
    if bank == "episodic" and about:
        if "nothing happens" in low:
            return f"{about}: failed"
        seen = [obj for obj, _ in sightings(focal)]
        if seen:
            return f"{about}: saw " + ", ".join(seen[:6]) + (", …" if len(seen) > 6 else "")
        return f"{about}: nothing there" if "you see nothing" in low else f"{about}: ok"
    if bank == "reference" and entities:
        if len(entities) == 2:
            return f"{entities[0]} @ {entities[1]}"
        if len(entities) == 1 and (m := re.search(r"\b(open|closed)\b", low)):
            return f"{entities[0]}: {m.group(1)}"
        if len(entities) > 2:
            counts = Counter(entity_type(e) for e in entities)
            return "room: " + ", ".join(f"{t} x{n}" for t, n in counts.items())
    return compress(focal, 8)
