"""A memory segment as the text a prompt shows (``Observation: / Thought: / Action:`` lines) and back."""

from __future__ import annotations

import re

from workbench.memory.trajectory import Segment

__all__ = ["segment_text", "parse_segment_text"]


_LINE = re.compile(r"^(Observation|Thought|Action):\s?(.*)$", re.IGNORECASE)


def segment_text(seg: Segment, *, observation: bool = True) -> str:
    """Render a segment in the stage-prompt layout (one labelled line per part)."""
    lines = []
    if observation and seg.observation:
        lines.append(f"Observation: {seg.observation}")
    if seg.thought:
        lines.append(f"Thought: {seg.thought}")
    if seg.action:
        lines.append(f"Action: {seg.action}")
    return "\n".join(lines)


def parse_segment_text(text: str) -> Segment:
    """Inverse of :func:`segment_text`. Unlabelled lines continue the previous part; with no label at
    all, the whole text is taken as a thought (a note the agent reads, never an action it would copy)."""
    parts: dict[str, list[str]] = {}
    current: str | None = None
    for line in (text or "").strip().splitlines():
        m = _LINE.match(line.strip())
        if m:
            current = m.group(1).lower()
            parts.setdefault(current, []).append(m.group(2).strip())
        elif current is not None:
            parts[current].append(line.strip())
    if not parts:
        return Segment(thought=(text or "").strip() or None)

    def join(key: str) -> str:
        return " ".join(p for p in parts.get(key, []) if p).strip()

    return Segment(observation=join("observation"), thought=join("thought") or None, action=join("action"))
