"""Trajectory data model: Step, Trajectory, MemoryEntry (ordered segments) and JSONL I/O.

Everything here is read from or written to disk, so it is pydantic with ``extra="forbid"``: a typo in a
field name is an error naming the file, record and field, never a silently dropped value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from workbench.files import (
    FormatError,
    atomic_write_text,
    cut_torn_tail,  # noqa: F401  (re-exported: writers import it from here)
    describe,
    iter_jsonl,
    present,
    read_jsonl_models,
    read_text,
)

__all__ = [
    "Step",
    "Trajectory",
    "MemoryEntry",
    "Segment",
    "TrajectoryFormatError",
    "read_jsonl",
    "write_jsonl",
    "atomic_write_text",
    "read_text_utf8",
]


TrajectoryFormatError = FormatError  # a trajectory/memory file has a malformed record (the older name)

#: bounds of the numbers these records hold
MAX_VERSION = 1_000_000
Id = Annotated[str, Field(min_length=1, max_length=512)]


class _Strict(BaseModel):
    # files are read with strict=True (``workbench.files``); code may build records from lists as well
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Step(_Strict):
    """One decision step: the observation the agent saw, its (optional) thought, the action it took.

    ``observation`` is what the environment returned *before* this action (the first step's observation is
    the initial room description), which is the order a ReAct prompt presents them in.
    """

    observation: str
    action: str
    thought: str | None = None
    reward: float = Field(0.0, ge=-1e6, le=1e6)
    done: bool = False


class Trajectory(_Strict):
    """A whole episode of one task."""

    task_id: Id
    task_type: str = ""
    goal: str
    initial_observation: str = ""
    steps: tuple[Step, ...] = ()
    success: bool = False
    source: str = ""  # e.g. "planner", "handcoded", "agent:smollm2-135m-instruct", "eto"
    split: str = ""
    meta: dict = Field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def actions(self) -> list[str]:
        return [s.action for s in self.steps]


Role = Literal["observation", "thought", "action"]


class Segment(_Strict):
    """One memory segment: the observation, thought and action of one consecutive trajectory step.

    Kept as separate fields so a prompt layout can mark observation tokens (excluded from utilization).
    """

    observation: str = ""
    thought: str | None = None
    action: str = ""

    def parts(self) -> list[tuple[Role, str]]:
        out: list[tuple[Role, str]] = []
        if self.observation:
            out.append(("observation", self.observation))
        if self.thought:
            out.append(("thought", self.thought))
        if self.action:
            out.append(("action", self.action))
        return out


class MemoryEntry(_Strict):
    """A memory-base entry: a task description plus its trajectory as an ordered list of segments."""

    entry_id: Id
    task_id: Id
    task_type: str = ""
    goal: str
    initial_observation: str = ""
    segments: tuple[Segment, ...] = ()
    success: bool = True
    version: int = Field(0, ge=0, le=MAX_VERSION)
    source: str = ""

    @classmethod
    def from_trajectory(cls, traj: Trajectory, entry_id: str | None = None) -> "MemoryEntry":
        """Segment a trajectory: segment k = (observation before step k, thought k, action k)."""
        segs = []
        for k, s in enumerate(traj.steps):
            # The first observation is the room description, kept once in ``initial_observation``.
            obs = "" if k == 0 else s.observation
            segs.append(Segment(observation=obs, thought=s.thought, action=s.action))
        # The final observation (result of the last action) closes the last segment's story: attach it as the
        # observation of a trailing action-less segment only if informative -- skipped to keep L = #actions.
        return cls(
            entry_id=entry_id or traj.task_id,
            task_id=traj.task_id,
            task_type=traj.task_type,
            goal=traj.goal,
            initial_observation=traj.steps[0].observation if traj.steps else traj.initial_observation,
            segments=tuple(segs),
            success=traj.success,
            source=traj.source,
        )


M = TypeVar("M", bound=BaseModel)


_describe = describe  # the name older modules import
read_text_utf8 = read_text


def read_jsonl(path: str | os.PathLike, model: type[M]) -> list[M]:
    """Read a JSONL file of ``model`` records written whole (no torn line tolerated), each validated strictly.

    Raises:
        FileNotFoundError: the file does not exist (message names it).
        TrajectoryFormatError: a line is not JSON or a record fails validation; names file, line and field.
    """
    return [r for _, r in read_jsonl_models(path, model, torn_ok=False)]


def iter_jsonl_dicts(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the JSON objects of an append-only JSONL file (a missing file holds none); a torn final line (a kill
    mid-append) is skipped and logged, any other malformed line is a :class:`TrajectoryFormatError`."""
    path = Path(path)
    if not present(path):
        return
    for i, obj in iter_jsonl(path, torn_ok=True):
        if not isinstance(obj, dict):
            raise TrajectoryFormatError(path, f"a JSON {type(obj).__name__}, where a record object belongs",
                                        where=f"line {i}")
        yield obj


def write_jsonl(path: str | os.PathLike, records: Iterable[BaseModel]) -> None:
    """Atomically write records as JSONL (all or nothing)."""
    atomic_write_text(path, "".join(r.model_dump_json() + "\n" for r in records))


def append_jsonl(path: str | os.PathLike, record: BaseModel | dict) -> None:
    """Append one record (a model or a JSON-serialisable dict) and fsync: a kill leaves at most a torn last line,
    which readers skip and :func:`cut_torn_tail` removes before the next append."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = record.model_dump_json() if isinstance(record, BaseModel) else json.dumps(record, allow_nan=False)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())
