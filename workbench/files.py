"""Strict reading of the files the workbench stores: every error names the file, the line or record, the field and
the fix; nothing malformed is read as something shorter.

One rule for append-only files (``trajectories.jsonl``, a memory base's ``history.jsonl``, a refinement's logs,
the teacher-forcing parts): a kill in the middle of an append leaves a *torn last line*, an unterminated prefix of
one JSON record. That, and only that, is tolerated: a reader skips it and says so in the log, and the next writer
cuts it (:func:`cut_torn_tail`) before it appends. Any other malformed line -- one in the middle, a last line that
is not a prefix of a record (NUL bytes, a list, text), a record failing its model -- is a :class:`FormatError`.
Files written whole (``config.json``, ``metrics.json``, ``entries.jsonl``: temp file, fsync, rename) tolerate
nothing.

JSON is read strictly: ``NaN``/``Infinity`` (and ``1e999``, which Python reads as infinity) and duplicate keys are errors (Python's ``json`` accepts both, the
last duplicate silently winning), and so is nesting deeper than :data:`MAX_DEPTH` (instead of a ``RecursionError``).
Records are validated with pydantic in strict JSON mode (no ``"yes"`` for a bool, no ``1.0`` for an int).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = [
    "FormatError",
    "MAX_DEPTH",
    "Torn",
    "atomic_write_text",
    "check_file",
    "present",
    "cut_torn_tail",
    "describe",
    "is_torn_prefix",
    "iter_jsonl",
    "loads_strict",
    "read_json",
    "read_json_model",
    "read_jsonl_models",
    "read_text",
]

log = logging.getLogger("workbench.files")

MAX_DEPTH = 64  # deeper JSON is refused; the deepest record we write nests 6 levels

M = TypeVar("M", bound=BaseModel)


class FormatError(ValueError):
    """A stored file is malformed. The message names the file, the line or record, the field and the fix.

    Attributes:
        path: the file.
        where: ``"line 3"``, ``"record 'x'"``... (``""``: the whole file).
        problem: what is wrong.
        fix: what to do about it (``""``: the problem says it).
    """

    def __init__(self, path: str | os.PathLike, problem: str | None = None, *, where: str = "", fix: str = ""):
        if problem is None:  # FormatError("PATH: ... whole message") (the older form)
            self.path, self.where, self.problem, self.fix = None, "", str(path), ""
            super().__init__(str(path))
            return
        self.path, self.where, self.problem, self.fix = Path(path), where, problem, fix
        super().__init__(f"{path}: {where + ': ' if where else ''}{problem}{'; ' + fix if fix else ''}")


def describe(err: ValidationError, limit: int = 3) -> str:
    """A pydantic error as ``field 'a.b': message`` (the first ``limit`` of them)."""
    parts = []
    for e in err.errors()[:limit]:
        loc = ".".join(str(p) for p in e["loc"]) or "<record>"
        got = e.get("input")
        shown = "" if isinstance(got, dict | list) else f" (got {json.dumps(got)[:60]})" if _jsonable(got) else ""
        parts.append(f"field '{loc}': {e['msg']}{shown}")
    more = len(err.errors()) - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _jsonable(x: Any) -> bool:
    try:
        json.dumps(x, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


def present(path: str | os.PathLike) -> bool:
    """Whether anything is at ``path`` (a dangling symlink or a symlink loop counts: reading it is an error,
    not an empty file)."""
    return os.path.lexists(path)


def check_file(path: str | os.PathLike, what: str = "file") -> Path:
    """``path`` as a Path, if it is a readable regular file.

    Raises:
        FileNotFoundError: it does not exist (the message names it).
        FormatError: it is a directory, a symlink loop or not a regular file.
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such {what}") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise FormatError(path, "a symlink loop", fix=f"point it at the real {what}") from None
        raise FormatError(path, f"cannot be read ({e.strerror})") from None
    if path.is_dir():
        raise FormatError(path, f"is a directory, where the {what} belongs", fix="pass the file inside it")
    import stat as _stat

    if not _stat.S_ISREG(st.st_mode):
        raise FormatError(path, f"is not a regular file, where the {what} belongs")
    return path


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """The UTF-8 text of a regular file.

    Raises:
        FileNotFoundError, FormatError: see :func:`check_file`; not UTF-8 (naming the line and byte).
    """
    path = check_file(path, what)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FormatError(path, f"cannot be read ({e.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise FormatError(path, f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})", where=f"line {line}",
                          fix="re-save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"{text} is out of a float's range (it would read as infinity)")
    return x


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in one object (the file's meaning is ambiguous)")
        out[k] = v
    return out


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def _depth(text: str) -> int:
    """The deepest bracket nesting outside strings (strings removed by a regex first: the loop sees brackets only)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0  # cannot be deeper than the limit
    depth = best = 0
    for m in _BRACKET.finditer(_STRING.sub("", text)):
        if m.group() in "[{":
            depth += 1
            best = max(best, depth)
        else:
            depth -= 1
    return best


def loads_strict(text: str, path: str | os.PathLike, where: str = "") -> Any:
    """Parse JSON strictly: no NaN/Infinity, no duplicate keys, at most :data:`MAX_DEPTH` levels.

    Raises:
        FormatError: naming ``path``, ``where`` and what is wrong.
    """
    if (d := _depth(text)) > MAX_DEPTH:
        raise FormatError(path, f"JSON nested {d} levels deep (at most {MAX_DEPTH})", where=where)
    try:
        return json.loads(text, parse_constant=_no_constants, parse_float=_finite_float,
                          object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        at = f"line {e.lineno} column {e.colno}" if not where else f"column {e.colno}"
        raise FormatError(path, f"not valid JSON ({e.msg} at {at})", where=where) from None
    except ValueError as e:  # our hooks
        raise FormatError(path, str(e), where=where) from None


def read_json(path: str | os.PathLike, what: str = "JSON file") -> Any:
    """The strictly parsed JSON of a whole file (see :func:`loads_strict`); an empty file is an error."""
    text = read_text(path, what)
    if not text.strip():
        raise FormatError(path, f"empty, where the {what} belongs", fix="restore it or remove the folder")
    return loads_strict(text, path)


def read_json_model(path: str | os.PathLike, model: type[M], what: str | None = None, fix: str = "") -> M:
    """A whole-file JSON record validated as ``model`` (strict)."""
    obj = read_json(path, what or model.__name__)
    if not isinstance(obj, dict):
        raise FormatError(path, f"holds a JSON {type(obj).__name__}, where a {what or model.__name__} object belongs",
                          fix=fix)
    try:
        return model.model_validate_json(json.dumps(obj), strict=True)
    except ValidationError as e:
        raise FormatError(path, describe(e), fix=fix) from None


_UNICODE_TAIL = re.compile(r"\\u[0-9a-fA-F]{0,3}$")
_FILLERS = ("", "0", ":0", '"":0', "rue", "ue", "e", "alse", "lse", "se", "ull", "ll", "l")


def is_torn_prefix(line: str) -> bool:
    """Whether ``line`` is a strict prefix of some JSON object: what a kill in the middle of an append leaves."""
    s = line.rstrip("\r")
    if not s.lstrip().startswith("{"):
        return False
    stack: list[str] = []
    in_str = esc = False
    for ch in s:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            elif ord(ch) < 0x20:
                return False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            stack.append(ch)
        elif ch in "]}":
            if not stack or stack.pop() != ("[" if ch == "]" else "{"):
                return False
            if not stack:
                return False  # the object closed: the line is whole (or more than one)
    tail = ""
    if in_str:
        m = _UNICODE_TAIL.search(s)
        run = len(s[: m.start()]) - len(s[: m.start()].rstrip("\\")) if m else 0
        if m and run % 2 == 0:  # the backslash opens an escape (an odd run before it would be an escaped one)
            tail = "0" * (6 - len(m.group()))
        elif esc:
            tail = "n"
        tail += '"'
    closers = "".join("}" if c == "{" else "]" for c in reversed(stack))
    for filler in _FILLERS:
        try:
            json.loads(s + tail + filler + closers, parse_constant=_no_constants)
            return True
        except ValueError:
            continue
    return False


@dataclass
class Torn:
    """A torn last line found by a reader: its 1-based line number and length in bytes."""

    line: int
    n_bytes: int


def _text_with_torn_char(path: Path, what: str) -> str:
    """The file's text; a kill mid-append can cut the last line inside a multi-byte character, and those last
    bytes alone (an unterminated last line ending in an incomplete UTF-8 sequence) are dropped: the line is torn
    either way. Invalid bytes anywhere else are an error (:func:`read_text`)."""
    try:
        return read_text(path, what)
    except FormatError:
        data = check_file(path, what).read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.reason == "unexpected end of data" and e.end == len(data) and b"\n" not in data[e.start:]:
                return data[: e.start].decode("utf-8")  # raises, naming nothing, if anything before is bad too
        raise


def iter_jsonl(path: str | os.PathLike, *, torn_ok: bool, what: str = "JSONL file",
               torn: list[Torn] | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed object)`` of each non-blank line of a JSONL file.

    Args:
        torn_ok: the file is appended to (a kill can tear its last line): skip a torn last line (logged, and
            added to ``torn`` when given). Otherwise a torn line is an error like any other.

    Raises:
        FormatError: a line that is not strict JSON (but the tolerated torn tail).
    """
    if torn_ok:
        try:
            text = _text_with_torn_char(Path(path), what)
        except UnicodeDecodeError:
            text = read_text(path, what)  # the named error, for the byte that is bad
    else:
        text = read_text(path, what)
    lines = text.split("\n")
    last = len(lines)  # the unterminated remainder ("" when the file ends with a newline)
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if i == last and torn_ok and is_torn_prefix(line):
            try:
                loads_strict(line, path)
            except FormatError:
                log.warning("%s: line %d: a torn last line (%d bytes, a write killed mid-append) is skipped; the "
                            "next write cuts it", path, i, len(line.encode()))
                if torn is not None:
                    torn.append(Torn(i, len(line.encode())))
                return
        where = f"line {i}" + (" (the last, unterminated)" if i == last else "")
        obj = loads_strict(line, path, where)
        yield i, obj


def read_jsonl_models(path: str | os.PathLike, model: type[M], *, torn_ok: bool, what: str | None = None,
                      fix: str = "", torn: list[Torn] | None = None) -> list[tuple[int, M]]:
    """``(line number, record)`` of a JSONL file of ``model`` records, each validated strictly.

    Raises:
        FormatError: a line that is not a JSON object or fails the model (naming line and field).
    """
    out = []
    for i, obj in iter_jsonl(path, torn_ok=torn_ok, what=what or f"{model.__name__} file", torn=torn):
        if not isinstance(obj, dict):
            raise FormatError(path, f"a JSON {type(obj).__name__}, where a {model.__name__} object belongs",
                              where=f"line {i}", fix=fix)
        try:
            out.append((i, model.model_validate_json(json.dumps(obj), strict=True)))
        except ValidationError as e:
            raise FormatError(path, describe(e), where=f"line {i}", fix=fix) from None
    return out


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


def cut_torn_tail(path: str | os.PathLike) -> Torn | None:
    """Before an append: cut the torn last line a killed append left (atomically, logged), so the next record
    starts a line of its own.

    Returns:
        What was cut (None: the file ends with a newline, or does not exist).

    Raises:
        FormatError: the unterminated last line is not a torn record (something else wrote the file); nothing is cut.
    """
    path = Path(path)
    if not path.exists():
        return None
    data = check_file(path).read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    keep = data.rfind(b"\n") + 1
    tail = data[keep:]
    line = data.count(b"\n") + 1
    try:
        tail_text = tail.decode("utf-8")
    except UnicodeDecodeError as e:  # a kill can cut a multi-byte character in two: only at the very end
        if e.reason != "unexpected end of data" or e.end != len(tail):
            raise FormatError(path, f"the last line is unterminated and holds bytes that are not UTF-8 (byte "
                                    f"0x{tail[e.start]:02x})", where=f"line {line}",
                              fix="look at it and remove it by hand if it is garbage") from None
        tail_text = tail[: e.start].decode("utf-8")
    if tail.strip() and not is_torn_prefix(tail_text):
        try:
            loads_strict(tail_text, path)  # a whole record without its newline: keep it, end its line
            atomic_write_text(path, data.decode("utf-8") + "\n")
            return None
        except FormatError:
            raise FormatError(path, "the last line is unterminated and not a record cut short by a kill "
                                    f"({len(tail)} bytes)", where=f"line {line}",
                              fix="look at it and remove it by hand if it is garbage") from None
    log.warning("%s: line %d: cut a torn last line (%d bytes, a write killed mid-append)", path, line, len(tail))
    atomic_write_text(path, data[:keep].decode("utf-8"))
    return Torn(line, len(tail))
