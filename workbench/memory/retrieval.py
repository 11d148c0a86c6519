"""Retrieval of memory entries for a new task: MiniLM cosine similarity of goals, or BM25 over goal words.

Every retriever follows the literature's ALFWorld protocol: the query task's own game is never returned (same
task id, or same task folder + trial under another split prefix), only successful entries are candidates, and
by default only entries of the query's task type. Scores rank candidates; ties keep memory-base order.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from workbench.memory.base import MemoryBase
from workbench.memory.embeddings import (
    MINILM_NAME,
    EmbeddingCache,
    encode_texts,
    load_minilm,
)
from workbench.memory.task_info import game_key
from workbench.memory.trajectory import MemoryEntry
from workbench.registry import Registry

__all__ = [
    "RETRIEVERS",
    "Retriever",
    "RetrieverConfig",
    "MiniLMRetriever",
    "BM25Retriever",
    "register_retriever",
    "get_retriever",
    "list_retrievers",
    "bm25_tokens",
]


@dataclass(frozen=True)
class RetrieverConfig:
    """Which entries may be retrieved.

    Attributes:
        same_task_type: only entries whose ``task_type`` equals the query's (when the query gives one).
        only_successful: only entries of successful trajectories.
    """

    same_task_type: bool = True
    only_successful: bool = True


@runtime_checkable
class Retriever(Protocol):
    """Finds the memory entries most similar to a task."""

    def retrieve(
        self, query_goal: str, query_task_id: str, task_type: str | None = None, k: int = 1
    ) -> list[tuple[MemoryEntry, float]]:
        """Up to ``k`` (entry, score) pairs, best first, never from the query's own game.

        ``task_type=None`` places no type restriction, whatever the config says.
        """
        ...


class _IndexedRetriever:
    """Shared candidate filtering and ranking; subclasses score every entry of the base."""

    def __init__(self, base: MemoryBase, config: RetrieverConfig | None = None):
        self.base = base
        self.config = config or RetrieverConfig()
        self._revision = -1
        self._entries: list[MemoryEntry] = []

    def _refresh(self) -> None:
        if self._revision != self.base.revision:
            self._entries = self.base.entries()
            self._build(self._entries)
            self._revision = self.base.revision

    def _build(self, entries: list[MemoryEntry]) -> None:
        raise NotImplementedError

    def _scores(self, query_goal: str) -> np.ndarray:
        raise NotImplementedError

    def _eligible(self, query_task_id: str, task_type: str | None) -> list[int]:
        own = game_key(query_task_id)
        cfg = self.config
        return [
            i for i, e in enumerate(self._entries)
            if e.task_id != query_task_id
            and game_key(e.task_id) != own
            and (e.success or not cfg.only_successful)
            and (not cfg.same_task_type or task_type is None or e.task_type == task_type)
        ]

    def retrieve(
        self, query_goal: str, query_task_id: str, task_type: str | None = None, k: int = 1
    ) -> list[tuple[MemoryEntry, float]]:
        """See :class:`Retriever`."""
        if k < 1:
            raise ValueError(f"retrieve: k={k}; ask for at least one entry")
        self._refresh()
        idx = self._eligible(query_task_id, task_type)
        if not idx:
            return []
        scores = self._scores(query_goal)
        ranked = sorted(idx, key=lambda i: (-float(scores[i]), i))[:k]
        return [(self._entries[i], float(scores[i])) for i in ranked]


_MAX_QUERIES = 10_000


class MiniLMRetriever(_IndexedRetriever):
    """Cosine similarity of all-MiniLM-L6-v2 embeddings of the goals (task descriptions).

    Args:
        base: the memory base.
        config: candidate filters.
        model: a loaded sentence-transformers model (anything with ``encode``); None loads the packaged MiniLM.
        cache: keep embeddings on disk (False: in memory only).
        cache_path: the cache file; default ``<base folder>/embeddings_minilm.npz``.
        model_name: the cache key's model part (change it with ``model``).
    """

    name = "minilm"

    def __init__(
        self,
        base: MemoryBase,
        config: RetrieverConfig | None = None,
        *,
        model: Any = None,
        cache: bool = True,
        cache_path: str | os.PathLike | None = None,
        model_name: str = MINILM_NAME,
    ):
        super().__init__(base, config)
        self._model = model
        path = Path(cache_path) if cache_path is not None else base.root / "embeddings_minilm.npz"
        self.cache = EmbeddingCache(path if cache else None, model_name)
        self._matrix = np.zeros((0, 0), dtype=np.float32)  # Float[ndarray, "n_entries d_embed"]
        self._queries: dict[str, np.ndarray] = {}  # goals recur across episodes; kept in memory only

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_minilm()
        return self._model

    def _build(self, entries: list[MemoryEntry]) -> None:
        self._matrix = self.cache.embed([e.goal for e in entries], self.model)

    def _scores(self, query_goal: str) -> np.ndarray:
        query = self._queries.get(query_goal)
        if query is None:
            query = encode_texts(self.model, [query_goal])[0]  # Float[ndarray, "d_embed"], unit norm
            if len(self._queries) >= _MAX_QUERIES:
                self._queries.clear()
            self._queries[query_goal] = query
        return self._matrix @ query


_WORD = re.compile(r"[a-z0-9]+")
# Function words of ALFWorld goal templates: they occur in nearly every goal and only add noise.
_STOP = frozenset({"a", "an", "the", "some", "in", "on", "it", "them", "and", "to", "of", "with", "under"})


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased word tokens without template function words ("put a clean apple in fridge." -> 4)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class BM25Retriever(_IndexedRetriever):
    """Okapi BM25 (``rank_bm25``) of the query goal's words against each entry's goal words.

    Args:
        base: the memory base.
        config: candidate filters.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.
    """

    name = "bm25"

    def __init__(self, base: MemoryBase, config: RetrieverConfig | None = None, *, k1: float = 1.5,
                 b: float = 0.75):
        super().__init__(base, config)
        self.k1, self.b = k1, b
        self._bm25: Any = None

    def _build(self, entries: list[MemoryEntry]) -> None:
        from rank_bm25 import BM25Okapi

        # An entry with no content words still needs a document (BM25Okapi divides by the mean length).
        corpus = [bm25_tokens(e.goal) or ["<empty>"] for e in entries]
        self._bm25 = BM25Okapi(corpus, k1=self.k1, b=self.b) if corpus else None

    def _scores(self, query_goal: str) -> np.ndarray:
        if self._bm25 is None:
            return np.zeros(0)
        return np.asarray(self._bm25.get_scores(bm25_tokens(query_goal)), dtype=np.float64)


#: Retrievers by name: ``factory(base, config, **kwargs) -> Retriever``.
RETRIEVERS: Registry[Callable[..., Retriever]] = Registry("retriever")


def register_retriever(name: str, factory: Callable[..., Retriever]) -> None:
    """Register ``factory(base, config, **kwargs) -> Retriever`` under ``name`` (the same factory twice is a no-op)."""
    if name in RETRIEVERS and RETRIEVERS.get(name) is factory:
        return
    RETRIEVERS.register(name, factory)


def list_retrievers() -> list[str]:
    """Registered retriever names."""
    return sorted(RETRIEVERS.names())


def get_retriever(name: str, base: MemoryBase, config: RetrieverConfig | None = None, **kwargs: Any) -> Retriever:
    """Build the retriever registered as ``name`` ("minilm", "bm25", ...) over ``base``.

    Args:
        name: registry name.
        base: the memory base.
        config: candidate filters (default: same task type, successful entries only).
        **kwargs: retriever-specific options (e.g. ``model=``, ``cache_path=`` for MiniLM; ``k1=``, ``b=``).

    Raises:
        KeyError: unknown name; the message lists the registered ones.
    """
    if name not in RETRIEVERS:
        raise KeyError(f"unknown retriever {name!r}; registered: {', '.join(list_retrievers())}")
    return RETRIEVERS.get(name)(base, config, **kwargs)


register_retriever("minilm", MiniLMRetriever)
register_retriever("bm25", BM25Retriever)
