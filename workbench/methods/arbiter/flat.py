"""The paper's two type-agnostic baselines, in the same working-memory layout and under the same o200k budget.

**Flat Recency** keeps the raw history as records — r_0 = the room description, r_k = ``> a_{k-1}`` and the
observation it produced — and shows the most recent whole records that fit, oldest first.

**Flat Retrieval** ranks observation lines with BM25 (k1 = 1.2, b = 0.75; lowercase, whitespace tokens, no
other processing, as the paper states) against the query goal + previous action + latest observation, and
shows the highest-ranked lines that fit, best first. A line that occurs several times is one document (its
latest step); ties go to the more recent line. A line that does not fit is skipped and the next one tried, so
the budget is filled as far as it can be.

Both write the same ``wm`` step record as MemArbiter (o200k, budget, shown).
"""

from __future__ import annotations

from workbench.agents.policy import MemoryBlock
from workbench.envs.base import Task
from workbench.memory.tokens import count_o200k
from workbench.memory.trajectory import Step
from workbench.methods.arbiter.assembly import CLOSE, OPEN, block_text
from workbench.methods.arbiter.policy import DEFAULT_BUDGET
from workbench.prompts.working_memory import WMPiece

__all__ = ["FlatRecency", "FlatRetrieval", "whitespace_tokens", "BM25_K1", "BM25_B"]

BM25_K1, BM25_B = 1.2, 0.75


def whitespace_tokens(text: str) -> list[str]:
    """The paper's BM25 tokenization: lowercase, split on whitespace, nothing else."""
    return text.lower().split()


class _Flat:
    name = "flat"

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        if budget <= 0:
            raise ValueError(f"budget {budget}: expected a positive number of o200k tokens")
        self.budget = budget
        self.begin(None, "", "")  # type: ignore[arg-type]

    def begin(self, task: Task, goal: str, room: str) -> None:
        self._goal, self._room, self._obs = goal, room, room
        self._steps: list[tuple[str, str]] = []  # (action, observation after it)

    def observe(self, step: Step, next_observation: str) -> None:
        self._steps.append((step.action, next_observation))
        self._obs = next_observation

    def _block(self, rows: list[tuple[str, str]]) -> MemoryBlock:
        """rows: (id, line text without newline), in display order; the caller made them fit."""
        pieces = [WMPiece("wm_open", OPEN), *(WMPiece("wm_item", f"{text}\n", item=i, band="F") for i, text in rows),
                  WMPiece("wm_close", CLOSE)]
        n = count_o200k(block_text(pieces))
        if n > self.budget:  # not even the wrapper fits (rows were fitted to the room left by it)
            assert not rows, f"{self.name}: block of {n} o200k tokens over budget {self.budget}"
            pieces, n = [], 0
        record = {"wm": {"o200k": n, "budget": self.budget, "bank_tokens": {}, "shown": len(rows)}}
        return MemoryBlock(layout="working_memory", working_memory=tuple(pieces), record=record,
                           meta={"budget": self.budget})

    def _room_for_rows(self) -> int:
        return self.budget - count_o200k(OPEN) - count_o200k(CLOSE)


class FlatRecency(_Flat):
    """The most recent whole action/observation records that fit (module docstring)."""

    name = "flat-recency"

    def memory(self, step: int, history: list[Step]) -> MemoryBlock:
        records = [("r0", self._room.strip())] + [
            (f"r{k + 1}", f"> {a}\n{o.strip()}") for k, (a, o) in enumerate(self._steps)]
        room, kept = self._room_for_rows(), []
        for rid, text in reversed(records):
            n = count_o200k(f"{text}\n")
            if n > room:
                break  # whole records only, and only the most recent ones: no gaps in the recency window
            kept.append((rid, text))
            room -= n
        return self._block(list(reversed(kept)))


class FlatRetrieval(_Flat):
    """BM25 over observation lines, query = goal + previous action + latest observation (module docstring)."""

    name = "flat-retrieval"

    def memory(self, step: int, history: list[Step]) -> MemoryBlock:
        from rank_bm25 import BM25Okapi

        latest: dict[str, tuple[int, int]] = {}  # line -> (step, order) of its latest occurrence
        observations = [self._room, *(o for _, o in self._steps)]
        order = 0
        for k, obs in enumerate(observations):
            for line in obs.splitlines():
                line = line.strip()
                if line:
                    latest[line] = (k, order)
                    order += 1
        lines = list(latest)
        if not lines:
            return self._block([])
        prev = self._steps[-1][0] if self._steps else ""
        query = whitespace_tokens(" ".join([self._goal, prev, self._obs]))
        bm25 = BM25Okapi([whitespace_tokens(x) for x in lines], k1=BM25_K1, b=BM25_B)
        scores = bm25.get_scores(query)
        ranked = sorted(range(len(lines)), key=lambda i: (-scores[i], -latest[lines[i]][1]))
        room, rows = self._room_for_rows(), []
        for i in ranked:
            n = count_o200k(f"{lines[i]}\n")
            if n <= room:
                rows.append((f"s{latest[lines[i]][0]}.{latest[lines[i]][1]}", lines[i]))
                room -= n
        return self._block(rows)
