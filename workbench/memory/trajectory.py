"""Trajectory data model: Step, Trajectory, MemoryEntry (ordered segments) and JSONL I/O.

Everything here is read from or written to disk, so it is pydantic with ``extra="forbid"``: a typo in a
field name is an error naming the file, record and field, never a silently dropped value.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class TrajectoryFormatError(ValueError):
    """A trajectory/memory file has a malformed record; the message names file, record and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Step(_Strict):
    """One decision step: the observation the agent saw, its (optional) thought, the action it took.

    ``observation`` is what the environment returned *before* this action (the first step's observation is
    the initial room description), which is the order a ReAct prompt presents them in.
    """

    observation: str
    action: str
    thought: str | None = None
    reward: float = 0.0
    done: bool = False


class Trajectory(_Strict):
    """A whole episode of one task."""

    task_id: str
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

    entry_id: str
    task_id: str
    task_type: str = ""
    goal: str
    initial_observation: str = ""
    segments: tuple[Segment, ...] = ()
    success: bool = True
    version: int = 0
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


def _describe(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<record>"
    return f"field '{loc}': {first['msg']}"


def read_text_utf8(path: str | os.PathLike) -> str:
    """The text of ``path``, which must be UTF-8.

    Raises:
        FileNotFoundError: no such file.
        TrajectoryFormatError: the bytes are not UTF-8; the message names the file, the line and byte, and the fix.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TrajectoryFormatError(
            f"{path}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); memory, "
            "trajectory and ETO files are read as UTF-8: re-save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def read_jsonl(path: str | os.PathLike, model: type[M]) -> list[M]:
    """Read a JSONL file of ``model`` records.

    Raises:
        FileNotFoundError: the file does not exist (message names it).
        TrajectoryFormatError: a line is not JSON or a record fails validation; names file, line and field.
    """
    path = Path(path)
    out: list[M] = []
    for lineno, line in enumerate(read_text_utf8(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TrajectoryFormatError(f"{path}: record {lineno}: not valid JSON ({e.msg})") from e
        try:
            out.append(model.model_validate(obj))
        except ValidationError as e:
            raise TrajectoryFormatError(f"{path}: record {lineno}: {_describe(e)}") from e
    return out


def iter_jsonl_dicts(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the JSON objects of a JSONL file, skipping a torn final line (a kill mid-write)."""
    path = Path(path)
    if not path.exists():
        return
    lines = read_text_utf8(path).split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                return  # torn tail: the episode it held is simply not done
            raise TrajectoryFormatError(f"{path}: record {i + 1}: not valid JSON") from None


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a replaced file keeps ordinary permissions
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: str | os.PathLike, records: Iterable[BaseModel]) -> None:
    """Atomically write records as JSONL (all or nothing)."""
    atomic_write_text(path, "".join(r.model_dump_json() + "\n" for r in records))


def append_jsonl(path: str | os.PathLike, record: BaseModel | dict) -> None:
    """Append one record (a model or a JSON-serialisable dict) and fsync: a kill leaves at most a torn last line,
    which readers skip and :func:`cut_torn_tail` removes before the next append."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = record.model_dump_json() if isinstance(record, BaseModel) else json.dumps(record)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def cut_torn_tail(path: str | os.PathLike) -> None:
    """Cut the partial last line a kill mid-append leaves (atomically), so the next append starts a line of its own."""
    path = Path(path)
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            atomic_write_text(path, data[: data.rfind(b"\n") + 1].decode("utf-8"))
