"""Import and export of ETO's SFT conversation format (Song et al., 2024) for ALFWorld.

An ETO record is ``{"id": ..., "conversations": [{"from": "human"|"gpt", "value": ...}, ...]}`` (also read:
``{"role": "user"|"assistant", "content": ...}`` turns under ``messages`` or ``conversations``). The turns are

1. a prefix: the instruction prompt (human), "OK" (gpt), possibly in-context example turns;
2. the task (human): ``Here is your task. <room description>\\nYour task is to: <goal>``;
3. alternating ``Thought: ...\\nAction: ...`` (gpt) and ``Observation: ...`` (human) turns.

A trailing observation (the result of the last action) becomes ``meta["final_observation"]``. What the format
has no place for (task type, success, source, split, meta, step rewards) travels in an extra
``workbench_meta`` key, which ETO/FastChat loaders ignore, so export -> import is exact for every
Trajectory field. Records without it (ETO's own files) get ``success``/``source`` from the caller and a task
type inferred from the id/game file or the goal.

A file is read strictly (:mod:`workbench.files`): UTF-8, strict JSON (no NaN, no key twice), a JSON list of at
least one record (a ``.json`` file holding a single record object is refused: a list belongs there) or one record
per line (JSONL). Each record's ``id`` is a non-empty string or an integer (read as its string), and no two
records share one. Every error is a :class:`~workbench.files.FormatError` naming the file, the record (its list
index or line, and id) and the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.files import (
    FormatError,
    atomic_write_text,
    describe,
    loads_strict,
    read_text,
)
from workbench.memory.task_info import infer_task_type, parse_game_ref
from workbench.memory.trajectory import Step, Trajectory

__all__ = [
    "ETO_ALFWORLD_INSTRUCTION",
    "EtoStyle",
    "import_eto",
    "export_eto",
    "trajectory_to_eto",
    "eto_to_trajectory",
]

EtoStyle = Literal["from_value", "role_content"]

# ETO's ALFWorld instruction (eval_agent/prompt/instructions/alfworld_inst.txt), typos included: the SFT data
# was trained on it verbatim.
ETO_ALFWORLD_INSTRUCTION = (
    "Interact with a household to solve a task. Imagine you are an intelligent agent in a household environment "
    "and your target is to perform actions to complete the task goal. At the beginning of your interactions, you "
    "will be given the detailed description of the current environment and your goal to accomplish. \nFor each "
    "of your turn, you will be given the observation of the last turn. You should first think about the current "
    "condition and plan for your future actions, and then output your action in this turn. Your output must "
    'strictly follow this format:"Thought: your thoughts.\\nAction: your next action".\n\nThe available actions '
    "are:\n1. go to {recep}\n2. task {obj} from {recep}\n3. put {obj} in/on {recep}\n4. open {recep}\n5. close "
    "{recep}\n6. toggle {obj} {recep}\n7. clean {obj} with {recep}\n8. heat {obj} with {recep}\n9. cool {obj} "
    "with {recep}\nwhere {obj} and {recep} correspond to objects and receptacles.\nAfter your each turn, the "
    "environment will give you immediate feedback based on which you plan your next few steps. if the envrionment "
    'output "Nothing happened", that means the previous action is invalid and you should try more options.\n\n'
    "Your response should use the following format:\n\nThought: <your thoughts>\nAction: <your next action>"
)
_DEFAULT_PREFIX = [{"from": "human", "value": ETO_ALFWORLD_INSTRUCTION}, {"from": "gpt", "value": "OK"}]

_SPEAKERS = {"human": "human", "user": "human", "gpt": "gpt", "assistant": "gpt", "system": "system"}
_ROLE_OF = {"human": "user", "gpt": "assistant", "system": "system"}
_INTRO = re.compile(r"^\s*Here is your task\.?[ \t]*")
_GOAL_MARK = "Your task is to:"
_ACTION_LINE = re.compile(r"(?:^|\n)[ \t]*Action:[ \t]*")
_THOUGHT = re.compile(r"^\s*Thought:[ \t]?")
_OBS = "Observation: "
_REPEAT = re.compile(r"^(.+)#([0-9]+)$")  # the id export_eto gives a task's second, third... trajectory
# Meta keys rebuilt from the record itself, so not repeated inside workbench_meta.
_RECORD_KEYS = ("eto_id", "eto_prefix", "eto_extra", "final_observation")


class _WorkbenchMeta(BaseModel):
    """The Trajectory fields an ETO record has no place for."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task_id: Annotated[str, Field(min_length=1)]
    task_type: str = ""
    success: bool = True
    source: str = ""
    split: str = ""
    initial_observation: str | None = None  # only when it differs from the first step's observation
    rewards: list[float] = []
    dones: list[bool] = []
    meta: dict = {}


_FIX = "an ETO file is a JSON list of {\"id\": ..., \"conversations\": [...]} records, or one record per line (.jsonl)"


def _error(path: str | os.PathLike | None, where: str, problem: str, fix: str = "") -> FormatError:
    """A FormatError naming ``path`` and ``where``; without a path (a record converted on its own) ``where`` leads."""
    if path is None:
        return FormatError(where, problem, fix=fix)
    return FormatError(path, problem, where=where, fix=fix)


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _turns(record: dict, where: str, path: str | os.PathLike | None = None) -> tuple[str, list[tuple[str, str]]]:
    """(turn-list key, [(speaker in human/gpt/system, text)]) with every malformed turn named."""

    def _fail(where: str, field: str, problem: str) -> FormatError:
        return _error(path, where, f"{field}: {problem}")

    keys = [k for k in ("conversations", "messages") if k in record]
    if len(keys) != 1:
        problem = "missing" if not keys else "both present; keep one"
        raise _fail(where, "conversations", f"{problem} (expected a 'conversations' or 'messages' list of turns)")
    key = keys[0]
    raw = record[key]
    if not isinstance(raw, list):
        raise _fail(where, key, f"expected a list of turns, got {type(raw).__name__}")
    out = []
    for j, turn in enumerate(raw):
        at = f"{key}[{j}]"
        if not isinstance(turn, dict):
            raise _fail(where, at, f"expected an object with 'from' and 'value', got {type(turn).__name__}")
        who_key = "from" if "from" in turn else "role"
        text_key = "value" if "value" in turn else "content"
        if who_key not in turn:
            raise _fail(where, f"{at}.from", "missing (expected 'from' or 'role')")
        if text_key not in turn:
            raise _fail(where, f"{at}.value", "missing (expected 'value' or 'content')")
        who, text = turn[who_key], turn[text_key]
        if not isinstance(who, str) or who not in _SPEAKERS:
            raise _fail(where, f"{at}.{who_key}", f"unknown speaker {who!r}; expected one of {sorted(_SPEAKERS)}")
        if not isinstance(text, str):
            raise _fail(where, f"{at}.{text_key}", f"expected string, got {type(text).__name__}")
        out.append((_SPEAKERS[who], text))
    return key, out


def _parse_gpt(text: str, where: str, at: str, path: str | os.PathLike | None = None) -> tuple[str | None, str]:
    matches = list(_ACTION_LINE.finditer(text))
    if not matches:
        raise _error(path, where, f"{at}: gpt turn has no 'Action:' line (expected 'Thought: ...\\nAction: <action>')")
    last = matches[-1]
    action = text[last.end():].strip()
    if not action:
        raise _error(path, where, f"{at}: gpt turn has an empty 'Action:' line")
    thought = _THOUGHT.sub("", text[: last.start()], count=1).strip()
    return thought or None, action


def eto_to_trajectory(record: Any, *, where: str = "record", success: bool = True, source: str = "eto",
                      path: str | os.PathLike | None = None) -> Trajectory:
    """Convert one ETO record (already parsed from JSON) to a Trajectory.

    Args:
        record: the record dict.
        where: how error messages name the record, e.g. ``"record 3"`` (with ``path``) or ``"data.json: record 3"``.
        success: success of a record without ``workbench_meta`` (ETO's SFT data are expert successes).
        source: source of a record without ``workbench_meta``.
        path: the file the record was read from (named first in error messages).

    Raises:
        FormatError: the record is malformed; the message names the file, the record, id and field.
    """

    def _fail(where: str, field: str, problem: str) -> FormatError:
        return _error(path, where, f"{field}: {problem}")

    if not isinstance(record, dict):
        raise _error(path, where, f"expected an object with 'id' and 'conversations', got {type(record).__name__}")
    if "id" not in record:
        raise _fail(where, "id", "missing; every ETO record needs an 'id'")
    rec_id = record["id"]
    if isinstance(rec_id, bool) or not isinstance(rec_id, str | int) or (isinstance(rec_id, str)
                                                                         and not rec_id.strip()):
        raise _fail(where, "id", f"{_show(rec_id)}: expected a non-empty string (or an integer)")
    where = f"{where} (id {rec_id!r})"
    key, turns = _turns(record, where, path)
    # The task is the last human turn that says "Here is your task"; failing that, the last one that names a
    # goal (in-context examples before it name goals too, observations after it never do).
    humans = [j for j in range(len(turns) - 1, -1, -1) if turns[j][0] == "human" and _GOAL_MARK in turns[j][1]]
    task_idx = next((j for j in humans if _INTRO.match(turns[j][1])), humans[0] if humans else None)
    if task_idx is None:
        raise _fail(where, key, f"no human turn holds the task ('{_GOAL_MARK} <goal>')")
    body = _INTRO.sub("", turns[task_idx][1], count=1)
    cut = body.rindex(_GOAL_MARK)
    room, goal = body[:cut].strip(), body[cut + len(_GOAL_MARK):].strip()
    if not goal:
        raise _fail(where, f"{key}[{task_idx}].value", f"empty goal after '{_GOAL_MARK}'")

    observations, thoughts, actions, final = [room], [], [], None
    for j in range(task_idx + 1, len(turns)):
        who, text = turns[j]
        expected = "gpt" if (j - task_idx) % 2 == 1 else "human"
        if who != expected:
            raise _fail(where, f"{key}[{j}].from", f"expected a {expected} turn here (turns after the task alternate "
                                                   f"gpt/human), got {who}")
        if who == "gpt":
            thought, action = _parse_gpt(text, where, f"{key}[{j}].value", path)
            thoughts.append(thought)
            actions.append(action)
        else:
            obs = text[len(_OBS):] if text.startswith(_OBS) else text.removeprefix("Observation:")
            observations.append(obs)
    if not actions:
        raise _fail(where, key, f"no gpt turn after the task turn {key}[{task_idx}]; a trajectory needs an action")
    if len(observations) > len(actions):
        final = observations.pop()

    meta: dict[str, Any] = {}
    wb = None
    if "workbench_meta" in record:
        try:
            wb = _WorkbenchMeta.model_validate(record["workbench_meta"], strict=True)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise _fail(where, f"workbench_meta.{loc}" if loc else "workbench_meta", err["msg"]) from e
        meta.update(wb.meta)
    ref = parse_game_ref(record["game_file"]) if isinstance(record.get("game_file"), str) else None
    repeat = _REPEAT.match(str(rec_id))  # "<task id>#2": the second trajectory of one task (export_eto)
    if wb:
        task_id = wb.task_id
    elif ref:
        task_id = ref.task_id
    else:
        task_id = repeat.group(1) if repeat and parse_game_ref(repeat.group(1)) else str(rec_id)
    if rec_id != task_id and not (repeat and repeat.group(1) == task_id and wb):
        meta["eto_id"] = rec_id
    prefix = [{"from": who, "value": text} for who, text in turns[:task_idx]]
    if prefix != _DEFAULT_PREFIX:
        meta["eto_prefix"] = prefix
    extra = {k: v for k, v in record.items() if k not in ("id", key, "workbench_meta")}
    if extra:
        meta["eto_extra"] = extra
    if final is not None:
        meta["final_observation"] = final

    n = len(actions)
    if wb is not None and (len(wb.rewards), len(wb.dones)) != (n, n):
        raise _fail(where, "workbench_meta.rewards", f"has {len(wb.rewards)} rewards and {len(wb.dones)} dones "
                                                     f"for {n} actions; they must match")
    ok = wb.success if wb else success
    rewards = wb.rewards if wb else [0.0] * (n - 1) + [1.0 if ok else 0.0]
    dones = wb.dones if wb else [False] * (n - 1) + [ok]
    if wb is not None:
        split = wb.split
    else:
        split = ref.split if (ref := parse_game_ref(task_id)) else ""
    try:
        steps = tuple(Step(observation=observations[k], thought=thoughts[k], action=actions[k], reward=rewards[k],
                           done=dones[k]) for k in range(n))
        return Trajectory(
            task_id=task_id,
            task_type=wb.task_type if wb else infer_task_type(task_id, goal),
            goal=goal,
            initial_observation=room if wb is None or wb.initial_observation is None else wb.initial_observation,
            steps=steps,
            success=ok,
            source=wb.source if wb else source,
            split=split,
            meta=meta,
        )
    except ValidationError as e:  # a value the episode record refuses (an id over 512 characters, a reward of 1e9)
        raise _error(path, where, describe(e)) from None


def trajectory_to_eto(traj: Trajectory, *, style: EtoStyle = "from_value", with_meta: bool = True) -> dict:
    """One Trajectory as an ETO record (see the module docstring for the layout).

    Raises:
        ValueError: the trajectory cannot be written unambiguously (no steps, a multi-line action, a thought
            with an 'Action:' line); the message names the task and step.
    """
    if style not in ("from_value", "role_content"):
        raise ValueError(f"style={style!r}: expected 'from_value' or 'role_content'")
    if not traj.steps:
        raise ValueError(f"trajectory '{traj.task_id}': has no steps; an ETO record needs at least one action")
    for k, s in enumerate(traj.steps):
        if "\n" in s.action or not s.action.strip():
            raise ValueError(f"trajectory '{traj.task_id}': steps[{k}].action {s.action!r} must be one non-empty line")
        if s.thought and _ACTION_LINE.search(s.thought):
            raise ValueError(f"trajectory '{traj.task_id}': steps[{k}].thought has an 'Action:' line, which would be "
                             "read back as the action; rephrase it")
    meta = traj.meta
    turns = [(t["from"], t["value"]) for t in meta.get("eto_prefix", _DEFAULT_PREFIX)]
    turns.append(("human", f"Here is your task. {traj.steps[0].observation}\n{_GOAL_MARK} {traj.goal}"))
    for k, s in enumerate(traj.steps):
        turns.append(("gpt", f"Thought: {s.thought}\nAction: {s.action}" if s.thought else f"Action: {s.action}"))
        if k + 1 < len(traj.steps):
            turns.append(("human", _OBS + traj.steps[k + 1].observation))
    if meta.get("final_observation") is not None:
        turns.append(("human", _OBS + meta["final_observation"]))
    if style == "from_value":
        key, conv = "conversations", [{"from": w, "value": t} for w, t in turns]
    else:
        key, conv = "messages", [{"role": _ROLE_OF[w], "content": t} for w, t in turns]
    record: dict[str, Any] = {"id": meta.get("eto_id", traj.task_id), **meta.get("eto_extra", {}), key: conv}
    if with_meta:
        wb = _WorkbenchMeta(
            task_id=traj.task_id, task_type=traj.task_type, success=traj.success, source=traj.source, split=traj.split,
            initial_observation=(
                None if traj.initial_observation == traj.steps[0].observation else traj.initial_observation
            ),
            rewards=[s.reward for s in traj.steps], dones=[s.done for s in traj.steps],
            meta={k: v for k, v in meta.items() if k not in _RECORD_KEYS},
        )
        record["workbench_meta"] = wb.model_dump(exclude_none=True)
    return record


def _records(path: Path) -> Iterable[tuple[str, Any]]:
    """``(where, record)`` of each record of an ETO file: a JSON list (``record i``) or JSONL (``line n``)."""
    text = read_text(path, "ETO file")
    if not text.strip():
        raise FormatError(path, "empty, where ETO records belong", fix=_FIX)
    head = text.lstrip()[:1]
    whole = None
    if path.suffix != ".jsonl" and head != "{":
        whole = loads_strict(text, path)  # a list (or something that is not one: named below)
    elif path.suffix != ".jsonl":
        try:
            whole = loads_strict(text, path)  # one object, over one line or many
        except FormatError:
            whole = None  # several lines, one record each: JSONL
    if whole is not None or (path.suffix != ".jsonl" and head != "{"):
        if isinstance(whole, dict):
            raise FormatError(path, "holds a single JSON object, where a list of records belongs",
                              fix="wrap it in [ ] (or name the file .jsonl for one record per line)")
        if not isinstance(whole, list):
            kind = {str: "string", int: "number", float: "number", bool: "boolean"}.get(type(whole), "null")
            raise FormatError(path, f"holds a JSON {kind}, where a list of ETO records belongs", fix=_FIX)
        if not whole:
            raise FormatError(path, "an empty list: no ETO records", fix="export at least one trajectory")
        for i, rec in enumerate(whole):
            yield f"record {i}", rec
        return
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = loads_strict(line, path, where=f"line {lineno}")
        except FormatError as e:
            raise FormatError(path, e.problem, where=e.where, fix=_FIX) from None
        yield f"line {lineno}", rec


def import_eto(path: str | os.PathLike, *, success: bool = True, source: str = "eto") -> list[Trajectory]:
    """Read an ETO SFT file: a JSON list of records, or JSONL (one record per line).

    Args:
        path: the file.
        success: success of records without ``workbench_meta`` (ETO's SFT data are successful experts).
        source: source of records without ``workbench_meta``.

    Returns:
        One Trajectory per record, in file order. Errors name records as ``record i`` (0-based list index)
        for a JSON list and ``line n`` for JSONL.

    Raises:
        FileNotFoundError: no such file.
        FormatError: not UTF-8, not strict JSON, a single object or an empty list where a list of records belongs,
            a malformed record or two records with one id; names the file, record, id and field.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(f"{path}: no such file (expected an ETO SFT .json/.jsonl file)")
    out, first = [], {}
    for where, rec in _records(path):
        traj = eto_to_trajectory(rec, where=where, success=success, source=source, path=path)
        rec_id = str(rec["id"])
        if rec_id in first:
            raise FormatError(path, f"id {rec_id!r} appears twice ({first[rec_id]} and {where})", where=where,
                              fix="give each record its own id")
        first[rec_id] = where
        out.append(traj)
    return out


def export_eto(trajs: Iterable[Trajectory], path: str | os.PathLike, *, style: EtoStyle = "from_value",
               with_meta: bool = True) -> Path:
    """Write trajectories as ETO records, atomically: JSONL if ``path`` ends in ``.jsonl``, else a JSON list.

    Args:
        trajs: trajectories (each needs at least one step).
        path: output file.
        style: ``"from_value"`` (ETO/FastChat ``conversations`` of ``from``/``value``) or ``"role_content"``
            (``messages`` of ``role``/``content``).
        with_meta: add the ``workbench_meta`` key that makes the round trip exact; off for a pure ETO file.

    Returns:
        The path written.

    Raises:
        ValueError: no trajectories, one that cannot be written (see :func:`trajectory_to_eto`), or two that would
            share one record id (:func:`import_eto` refuses such a file). Several trajectories of one task are
            written as ids ``<task id>``, ``<task id>#2``, ...; import reads them back as that task's.
    """
    path = Path(path)
    records = [trajectory_to_eto(t, style=style, with_meta=with_meta) for t in trajs]
    if not records:
        raise ValueError(f"{path}: no trajectories to export (an ETO file holds at least one record)")
    repeats: dict[str, int] = {}
    for r in records:  # one task played twice: its records are "<id>", "<id>#2", ... (ids must be unique)
        n = repeats[str(r["id"])] = repeats.get(str(r["id"]), 0) + 1
        if n > 1:
            r["id"] = f"{r['id']}#{n}"
    first: dict[str, int] = {}
    for i, r in enumerate(records):
        if str(r["id"]) in first:
            raise ValueError(f"{path}: trajectories {first[str(r['id'])]} and {i} would share the record id "
                             f"{r['id']!r} (one task played twice?); export one of them, or give them distinct ids")
        first[str(r["id"])] = i
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    else:
        text = json.dumps(records, ensure_ascii=False, indent=2) + "\n"
    atomic_write_text(path, text)
    return path
