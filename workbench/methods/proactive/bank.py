"""The proactive memory agent's bank: a private status, knowledge entries and procedural entries (paper 002).

The bank changes only through the four tool calls of phase 1 (``workbench.llm.tools.PROACTIVE_TOOLS``),
executed in order by :meth:`Bank.apply`. Each call is checked against the bank before it touches it — a delete
of an id that does not exist, an id saved in the other store, an over-long status or entry: a typed
:class:`BankCallError` — and an invalid call is skipped and logged, so **every call is applied whole or not at
all**: a kill or an error never leaves a half-edited bank, and the calls after a bad one still apply (a model
that deletes one id too many does not lose the facts it saved in the same reply).

The status is private: :meth:`Bank.view` gives it to the memory agent; nothing the action agent sees (passive
exposure, reminders) reads it. Entries carry a short id, content, the step that created and last updated them,
tags (the id's prefix, ``loc`` in ``loc:apple_1``, plus ``[tag]`` words at the start of the content) and an
access count: how many prompts the entry has been rendered into (the memory agent's view or the action prompt).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from workbench.llm.protocol import ToolCall
from workbench.memory.retrieval import bm25_tokens
from workbench.methods.proactive.stage_types import MAX_CONTENT_CHARS, MAX_STATUS_CHARS, BankEntry, BankView

__all__ = ["Entry", "Bank", "BankCallError", "MAX_STATUS_CHARS", "MAX_CONTENT_CHARS", "PREFILTER_AT", "tags_of"]

PREFILTER_AT = 50  # above this many entries the memory agent sees the BM25 top 50
_TAG = re.compile(r"^\s*\[([A-Za-z0-9_-]+)\]")


class BankCallError(ValueError):
    """A phase-1 call that cannot be applied to the bank as it is (the bank is left as it was).

    Attributes:
        call: the call's index in the reply, tool name and arguments.
        reason: what is wrong, in words.
    """

    def __init__(self, index: int, call: ToolCall, reason: str) -> None:
        self.index, self.call, self.reason = index, call, reason
        super().__init__(f"call {index} ({call.name}): {reason}")


def tags_of(entry_id: str, content: str) -> tuple[str, ...]:
    tags = [entry_id.split(":", 1)[0]] if ":" in entry_id else []
    m = _TAG.match(content)
    if m:
        tags.append(m.group(1).lower())
    return tuple(dict.fromkeys(tags))


@dataclass(frozen=True)
class Entry:
    id: str
    content: str
    kind: str  # knowledge | procedural
    created: int
    updated: int
    tags: tuple[str, ...] = ()
    access_count: int = 0

    def describe(self) -> dict:
        return {"id": self.id, "kind": self.kind, "content": self.content, "created": self.created,
                "updated": self.updated, "tags": list(self.tags), "access_count": self.access_count}


@dataclass
class Bank:
    """Status + knowledge + procedural entries (module docstring)."""

    status: str = ""
    entries: dict[str, Entry] = field(default_factory=dict)  # insertion order = creation order

    def __len__(self) -> int:
        return len(self.entries)

    def of(self, kind: str) -> list[Entry]:
        return [e for e in self.entries.values() if e.kind == kind]

    def snapshot(self) -> tuple:
        """An immutable copy (tests compare before/after; the explorer replays)."""
        return (self.status, tuple(self.entries.values()))

    # -- phase 1 ------------------------------------------------------------------------------------------
    def apply(self, calls: Sequence[ToolCall], step: int) -> tuple[list[dict], list[BankCallError]]:
        """Execute ``calls`` in order (module docstring); returns (applied, errors)."""
        applied, errors = [], []
        for i, call in enumerate(calls):
            try:
                self._apply_one(i, call, step)
            except BankCallError as e:
                errors.append(e)
            else:
                applied.append({"name": call.name, "arguments": dict(call.arguments)})
        return applied, errors

    def _apply_one(self, i: int, call: ToolCall, step: int) -> None:
        args = call.arguments
        if call.name == "memory_update_status":
            status = str(args.get("status", ""))
            if len(status) > MAX_STATUS_CHARS:
                raise BankCallError(i, call, f"status of {len(status)} characters, over the limit of {MAX_STATUS_CHARS}")
            if not status.strip():
                raise BankCallError(i, call, "empty status")
            self.status = status.strip()
        elif call.name in ("memory_save_knowledge", "memory_save_procedural"):
            kind = "knowledge" if call.name == "memory_save_knowledge" else "procedural"
            eid, content = str(args.get("id", "")), str(args.get("content", "")).strip()
            if not eid or not content:
                raise BankCallError(i, call, "a save needs an id and non-empty content")
            if len(content) > MAX_CONTENT_CHARS:
                raise BankCallError(i, call, f"content of {len(content)} characters, over the limit of {MAX_CONTENT_CHARS}")
            old = self.entries.get(eid)
            if old is not None and old.kind != kind:
                raise BankCallError(i, call, f"id '{eid}' is a {old.kind} entry; delete it first or use another id")
            if old is None:
                self.entries[eid] = Entry(eid, content, kind, step, step, tags_of(eid, content))
            else:
                self.entries[eid] = replace(old, content=content, updated=step, tags=tags_of(eid, content))
        elif call.name == "memory_delete":
            eid = str(args.get("id", ""))
            if eid not in self.entries:
                raise BankCallError(i, call, f"no entry '{eid}' to delete")
            del self.entries[eid]
        else:  # the schema check upstream refuses unknown tools; a direct caller may still pass one
            raise BankCallError(i, call, f"unknown tool '{call.name}'")

    # -- what each reader sees ------------------------------------------------------------------------------
    def visible(self, query: str = "", limit: int = PREFILTER_AT) -> list[Entry]:
        """The entries a prompt shows: all of them, or past ``limit`` the BM25 top ``limit`` against ``query``
        (content words of the id and content; ties keep the newer entry), in creation order."""
        entries = list(self.entries.values())
        if len(entries) <= limit:
            return entries
        from rank_bm25 import BM25Okapi

        docs = [bm25_tokens(f"{e.id.replace('_', ' ')} {e.content}") or ["<empty>"] for e in entries]
        scores = BM25Okapi(docs).get_scores(bm25_tokens(query))
        top = sorted(range(len(entries)), key=lambda k: (-scores[k], -entries[k].updated, -k))[:limit]
        return [entries[k] for k in sorted(top)]

    def touch(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            self.entries[e.id] = replace(self.entries[e.id], access_count=self.entries[e.id].access_count + 1)

    def view(self, query: str = "", include_status: bool = True) -> tuple[BankView, list[Entry]]:
        """The memory agent's view (``BankView``) and the entries in it (their access counts go up)."""
        shown = self.visible(query)
        self.touch(shown)
        view = BankView(status=self.status if include_status else "",
                        knowledge=tuple(BankEntry(id=e.id, content=e.content, created=e.created)
                                        for e in shown if e.kind == "knowledge"),
                        procedural=tuple(BankEntry(id=e.id, content=e.content, created=e.created)
                                         for e in shown if e.kind == "procedural"))
        return view, shown

    def render_for_actor(self, query: str = "") -> str:
        """The bank as the action agent may see it (passive exposure): entries only, never the status."""
        shown = self.visible(query)
        self.touch(shown)
        know = [f"- {e.content}" for e in shown if e.kind == "knowledge"]
        proc = [f"- {e.content}" for e in shown if e.kind == "procedural"]
        parts = (["Known facts:", *know] if know else []) + (["Attempts:", *proc] if proc else [])
        return "\n".join(parts)
