"""Hypothesis strategies that damage a valid file the way users and crashes do: a field set to a hostile value,
deleted, renamed or duplicated; the text cut, spliced, NUL-filled, re-encoded, nested 5,000 deep; a line repeated,
dropped or moved; a directory or a symlink loop where the file belongs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

HOSTILE = [None, True, False, 0, -1, -5, 1.5, 20.7, 1e30, -1e30, 2**63, 10**400, "", "yes", "50", "-1", "\x00",
           "\u0661\u0662", "1_0", "NaN", [], {}, [[]], [[-1, -5]], [[1e9, 1e9]], {"a": None}, "a" * 3000]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
hostile_values = st.sampled_from(HOSTILE) | json_values


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``obj`` (dict keys and list indices)."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:4]):
            out += _paths(v, prefix + (i,))
    return out


def _parent(obj: Any, path: tuple) -> Any:
    for p in path[:-1]:
        obj = obj[p]
    return obj


@st.composite
def mutated_object(draw, obj: Any) -> Any:
    """``obj`` (a parsed JSON value) with one structural change."""
    obj = json.loads(json.dumps(obj))
    paths = _paths(obj)
    op = draw(st.sampled_from(["set", "set", "set", "delete", "add", "rename", "replace_top"]))
    if op == "replace_top" or not paths:
        return draw(hostile_values)
    path = draw(st.sampled_from(paths))
    parent, key = _parent(obj, path), path[-1]
    if op == "set":
        parent[key] = draw(hostile_values)
    elif op == "delete":
        del parent[key]
    elif op == "add":
        target = parent if isinstance(parent, dict) else obj if isinstance(obj, dict) else None
        if target is not None:
            target[draw(st.sampled_from(["extra", "typo", "__proto__", "versio"]))] = draw(hostile_values)
        else:
            parent.append(draw(hostile_values))
    elif op == "rename" and isinstance(parent, dict):
        parent[f"{key}_"] = parent.pop(key)
    return obj


def _dump(obj: Any, nan: bool) -> str:
    text = json.dumps(obj, separators=(",", ":"), default=str)
    return text


@st.composite
def damaged_text(draw, text: str) -> bytes:
    """``text`` (a whole file) with one textual change."""
    data = text.encode()
    lines = text.split("\n")
    op = draw(st.sampled_from(["cut", "splice", "nul", "nul_tail", "latin1", "nan", "dup_key", "deep",
                               "dup_line", "drop_line", "swap_lines", "empty", "blank_lines", "crlf"]))
    n = max(len(data), 1)
    k = draw(st.integers(0, n))
    if op == "cut":
        return data[:k]
    if op == "splice":
        return data[:k] + draw(st.binary(min_size=1, max_size=8)) + data[k:]
    if op == "nul":
        return b"\0" * draw(st.integers(1, 200))
    if op == "nul_tail":
        return data + b"\0" * draw(st.integers(1, 100))
    if op == "latin1":
        return data[:k] + b"\xe9" + data[k:]
    if op == "nan":
        import re
        nums = list(re.finditer(rb"(?<![\w.\"])-?\d+(\.\d+)?(?![\w\"])", data))
        if nums:
            m = draw(st.sampled_from(nums))
            return data[:m.start()] + draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e999"])) + data[m.end():]
        return data + b"NaN"
    if op == "dup_key":
        i = data.find(b"{")
        if i < 0:
            return data
        first = data.find(b'"', i)
        end = data.find(b'"', first + 1)
        if first < 0 or end < 0:
            return data
        key = data[first:end + 1]
        return data[:i + 1] + key + b":" + json.dumps(draw(hostile_values)).encode() + b"," + data[i + 1:]
    if op == "deep":
        d = draw(st.sampled_from([70, 5000]))
        return b"[" * d + b"]" * d
    if op == "dup_line" and len(lines) > 1:
        i = draw(st.integers(0, len(lines) - 2))
        return "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]).encode()
    if op == "drop_line" and len(lines) > 1:
        i = draw(st.integers(0, len(lines) - 2))
        return "\n".join(lines[:i] + lines[i + 1:]).encode()
    if op == "swap_lines" and len(lines) > 2:
        i, j = draw(st.integers(0, len(lines) - 2)), draw(st.integers(0, len(lines) - 2))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines).encode()
    if op == "empty":
        return b""
    if op == "blank_lines":
        return data.replace(b"\n", b"\n\n   \n")
    if op == "crlf":
        return data.replace(b"\n", b"\r\n")
    return data


@st.composite
def damaged_file(draw, text: str, jsonl: bool, loads=json.loads, dumps=None) -> tuple[str, bytes | None]:
    """A damaged version of a valid file: ``("bytes", data)``, ``("dir", None)`` or ``("loop", None)``. ``loads``
    and ``dumps`` parse and write the format (JSON by default; YAML for grids)."""
    kind = draw(st.sampled_from(["object"] * 6 + ["text"] * 5 + ["dir", "loop"]))
    if kind in ("dir", "loop"):
        return kind, None
    if kind == "text":
        return "bytes", draw(damaged_text(text))
    if jsonl:
        lines = [ln for ln in text.split("\n") if ln.strip()]
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = _dump(draw(mutated_object(json.loads(lines[i]))), False)
        return "bytes", ("\n".join(lines) + "\n").encode()
    obj = draw(mutated_object(loads(text)))
    return "bytes", (dumps(obj) if dumps else _dump(obj, False)).encode()


def place(path: Path, case: tuple[str, bytes | None]) -> None:
    """Put the damaged file at ``path`` (replacing what is there)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        import shutil

        shutil.rmtree(path)
    kind, data = case
    if kind == "dir":
        path.mkdir()
    elif kind == "loop":
        os.symlink(path.name, path)
    else:
        path.write_bytes(data)
