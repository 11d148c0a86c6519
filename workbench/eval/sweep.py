"""Experiment grids: ``workbench sweep GRID.yaml`` — configurations x tasks as one job list over one executor.

A grid file::

    out: runs/grids/dtype          # configuration NAME writes OUT/NAME, exactly the folder `workbench run` writes
    defaults:                      # any field of a run (RunConfig) but out; each configuration may override
      model: smollm2-135m-alfworld
      split: valid_unseen
      tasks: all
    configurations:                # a list; each needs a name (default: the grid's values joined by '-')
      - {name: none, memory: none}
      - {name: traj, memory: traj, retriever: minilm}
    grid:                          # optional: every configuration crossed with every combination of these
      dtype: [float32, bfloat16]   # -> none-float32, none-bfloat16, traj-float32, traj-bfloat16
    order: interleaved             # optional: next, a job of the configuration with the fewest done (default:
                                   # configs, one after another); a grid stopped early is then balanced
    adopt_same_memory:             # optional: NAME: REF -- configuration NAME (another memory base or budget)
      agmr: traj                   # takes REF's episodes whose memory its policy leaves the same at every step,
                                   # instead of playing them (workbench.eval.adoption.adopt_same_memory); NAME's
                                   # tasks wait for REF to play them first

``workbench sweep GRID.yaml --set model=NAME --out DIR`` plays the same grid for another value of a run field
(over the defaults and every configuration's own value).

Everything is checked before anything runs — unknown keys, unknown memory policies, models that are not to be
found, bad task slices, bad types — and an error names the file, the configuration and the key. The file is read
strictly: UTF-8, a key given twice in one mapping is an error (YAML would keep the last silently), and only plain
decimal numbers and true/false are read as such (not YAML 1.1's base-60 ``10:20`` = 620, octal ``017``, ``1_0``,
``yes``/``on`` or dates). ``tasks`` is a quoted slice string checked against the split's tasks (a bound past them
is an error, not clipped); ``max_steps`` is an integer in 1..1000; list fields (``task_types``: the short types,
``triggers``, ``backend_args``) are lists. A sweep
always resumes: run the same command again after a kill and only what is missing is played; a configuration
whose folder holds a run of other parameters is refused (rename it). ``OUT/sweep.json`` records the resolved
configurations, what each invocation played, its wall time and each worker's peak memory (written
atomically, so a kill leaves the previous version). Two grids may share ``OUT`` (their configurations have
other names): the second one's record is ``OUT/sweep.<its file stem>.json`` (:func:`state_path`). A sweep refuses
configurations a live sweep is playing, and ``workbench sweep GRID --status`` says where each configuration stands
(:mod:`workbench.eval.sweep_status`).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import reprlib
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from workbench.agents.loop import DECODES
from workbench.agents.policy import get_policy
from workbench.envs.benchmarks import BENCHMARKS, load_tasks, task_types
from workbench.envs.selection import NO_TASKS, parse_task_slice
from workbench.eval.adoption import adopt_runs
from workbench.eval.config import DTYPES, RunConfig
from workbench.eval.driver import ORDERS, check_all, drive
from workbench.eval.sweep_status import (
    read_sweep_record,
    refuse_concurrent,
    sweep_status,
    this_process,
)
from workbench.files import FormatError, read_json, read_text
from workbench.locks import folder_locks
from workbench.memory.trajectory import atomic_write_text
from workbench.models.loading import (
    ModelNotFoundError,
    _adapter_folder_spec,
    _resolve_path,
)
from workbench.models.registry import get_model_spec
from workbench.provenance import versions

__all__ = ["GridError", "Grid", "load_grid", "parse_overrides", "run_sweep", "state_path"]

_TOP = {"out", "defaults", "configurations", "grid", "description", "order", "adopt_same_memory"}
_FIELDS = {f.name: f for f in fields(RunConfig) if f.name != "out"}
_RETRIEVERS = ("minilm", "bm25")
_TASK_TYPES = tuple(dict.fromkeys(t for name in BENCHMARKS.names() for t in task_types(name)))  # every benchmark's
_CHOICES = {"dtype": DTYPES, "retriever": _RETRIEVERS, "decode": DECODES}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]*$")
# integer fields: their bounds (a step limit of 1e30, a seed past 32 bits, is a typo, not a setting)
_INTS = {"max_steps": (1, 1000), "seed": (0, 2**32 - 1), "budget": (1, 1_000_000), "interval": (1, 1000),
         "window": (1, 1000)}
_BOOLS = ("teacher_forcing", "record_admissible")
_LISTS = {"task_types": "task types", "backend_args": "KEY=VALUE strings", "triggers": "trigger events"}
_SLICES = ("tasks", "teacher_forcing_tasks")
MAX_CONFIGURATIONS = 10_000  # a grid expanding past this is a mistake (e.g. a list where a value belongs)
_REPR = reprlib.Repr()  # bounded, even for a value YAML aliases make enormous
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 2, 4, 4, 60, 60
_show = _REPR.repr


class GridError(ValueError):
    """A grid file that cannot run; the message names the file, the configuration and the key."""


# YAML 1.1, as PyYAML reads it, turns 10:20 into 620 (base 60), 017 into 15, 1_0 into 10, yes/on into true and
# 2024-01-01 into a date: a grid reads plain decimal numbers, true/false and strings only.
_INT_TAG, _FLOAT_TAG, _BOOL_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class _GridLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last one silently) and reads
    only plain decimal numbers and true/false as such."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # SafeLoader refuses an unhashable key itself
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {_show(key)} appears twice in one mapping (first on line {seen[key]}); "
                                    "keep one (YAML would silently keep the last)", key_node.start_mark)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


_GridLoader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag not in (_INT_TAG, _FLOAT_TAG, _BOOL_TAG, _TIMESTAMP_TAG)]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_GridLoader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_GridLoader.add_implicit_resolver(_INT_TAG, re.compile(r"^[-+]?[0-9]+$", re.ASCII), list("-+0123456789"))
_GridLoader.add_implicit_resolver(
    _FLOAT_TAG, re.compile(r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?$", re.ASCII),
    list("-+0123456789."))
_GridLoader.add_constructor(_INT_TAG, lambda loader, node: int(loader.construct_scalar(node)))  # 017 is 17


def _yaml(text: str, path: str | Path, what: str = "") -> Any:
    """``text`` read as a grid's YAML (:class:`_GridLoader`); errors name the file and line, on one line."""
    try:
        return yaml.load(text, Loader=_GridLoader)  # noqa: S506 -- a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise GridError(f"{path}: {what}{at}not valid YAML ({problem})") from None
    except yaml.YAMLError as e:
        raise GridError(f"{path}: {what}not valid YAML ({' '.join(str(e).split())})") from None
    except RecursionError:
        raise GridError(f"{path}: {what}nested too deep to be a grid (a grid nests a few levels)") from None


@dataclass(frozen=True)
class Grid:
    """A validated grid: where it writes and its configurations (one RunConfig each, ``out`` = OUT/NAME)."""

    path: str
    out: str
    configs: tuple[RunConfig, ...]
    description: str = ""
    order: str = "configs"
    same_memory: tuple[tuple[str, str], ...] = ()  # (name, reference name): adopt_same_memory before playing

    @property
    def names(self) -> list[str]:
        return [Path(c.out).name for c in self.configs]


def _check_value(where: str, key: str, value: Any) -> Any:
    """One configuration value, type-checked against the RunConfig field it sets."""
    if key in _SLICES:
        if not isinstance(value, str):
            raise GridError(f"{where}: key '{key}': expected a task slice as a string, got {_show(value)}; quote it "
                            f'(e.g. {key}: "0:20", {key}: "5", {key}: all)')
        return value
    if key in _INTS:
        lo, hi = _INTS[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise GridError(f"{where}: key '{key}': expected an integer, got {_show(value)}")
        if not lo <= value <= hi:
            raise GridError(f"{where}: key '{key}': {value} is out of range ({lo}..{hi})")
        return value
    if key in _BOOLS:
        if not isinstance(value, bool):
            raise GridError(f"{where}: key '{key}': expected true or false, got {_show(value)}")
        return value
    if key in _LISTS:
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise GridError(f"{where}: key '{key}': expected a list of {_LISTS[key]}, got {_show(value)} "
                            f"(e.g. {key}: [{_TASK_TYPES[0] if key == 'task_types' else '...'}])")
        if len(set(value)) != len(value):
            raise GridError(f"{where}: key '{key}': {_show(value)} names one value twice")
        if key == "task_types" and (bad := [v for v in value if v not in _TASK_TYPES]):
            raise GridError(f"{where}: key 'task_types': '{bad[0]}' is not a task type (known: "
                            f"{', '.join(_TASK_TYPES)})")
        return tuple(value)
    if not isinstance(value, str):
        raise GridError(f"{where}: key '{key}': expected a string, got {_show(value)}")
    if not value.strip():
        raise GridError(f"{where}: key '{key}': empty (leave the key out for its default)")
    allowed = _CHOICES.get(key)
    if allowed and value not in allowed:
        raise GridError(f"{where}: key '{key}': '{value}' is not one of {', '.join(allowed)}")
    if key == "env":
        try:
            task_types(value)
        except ValueError as e:
            raise GridError(f"{where}: key 'env': {e}") from None
    return value


def _check_config(where: str, cfg: RunConfig, n_tasks: dict) -> None:
    try:
        get_policy(cfg.memory)
    except ValueError as e:
        raise GridError(f"{where}: key 'memory': {e}") from None
    if get_model_spec(cfg.model) is None:
        try:
            _adapter_folder_spec(cfg.model) or _resolve_path(cfg.model)
        except ModelNotFoundError as e:
            raise GridError(f"{where}: key 'model': {e}") from None
    split_key = (cfg.env, cfg.split, cfg.task_types)
    if split_key not in n_tasks:
        try:
            n_tasks[split_key] = len(load_tasks(cfg.env, cfg.split, list(cfg.task_types) or None))
        except (ValueError, FileNotFoundError, KeyError) as e:
            raise GridError(f"{where}: key 'split' / 'task_types': {e}") from None
    for key in _SLICES:
        spec = getattr(cfg, key)
        if spec is None:
            continue
        try:  # strict: a bound past the split's tasks is an error, not clipped
            if not parse_task_slice(spec, n_tasks[split_key], strict=True) and spec.strip() != NO_TASKS:
                raise ValueError(f"--tasks '{spec}' selects no task of {n_tasks[split_key]}")
        except ValueError as e:
            raise GridError(f"{where}: key '{key}': {str(e).replace('--tasks', 'tasks')}") from None


def parse_overrides(items: list[str] | None) -> dict:
    """``--set KEY=VALUE`` items -> {key: value} (VALUE read as a grid's YAML: 500 is a number, [a, b] a list; a
    task slice, ``tasks=10:20``, stays the string it is)."""
    out = {}
    for item in items or ():
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise GridError(f"--set {item}: expected KEY=VALUE, e.g. --set model=smollm2-135m-alfworld-v2")
        if key in out:
            raise GridError(f"--set {key}: given twice; give each key once")
        out[key] = value.strip() if key in _SLICES or not value.strip() else _yaml(value, f"--set {item}")
    return out


def load_grid(path: str | Path, out: str | None = None, overrides: dict | None = None) -> Grid:
    """Read and check a grid file (``out`` overrides the file's ``out``; ``overrides`` {key: value} set a run
    field on every configuration, over the grid's defaults and its own values). Raises GridError naming what
    is wrong."""
    path = Path(path)
    try:
        text = read_text(path, "grid file")
    except FileNotFoundError:
        raise GridError(f"{path}: no such grid file") from None
    except FormatError as e:  # a directory, a symlink loop, not UTF-8
        raise GridError(str(e)) from None
    data = _yaml(text, path)
    if not isinstance(data, dict):
        raise GridError(f"{path}: expected a mapping with 'out', 'defaults', 'configurations' and/or 'grid'")
    unknown = sorted(set(data) - _TOP, key=str)
    if unknown:
        raise GridError(f"{path}: unknown top-level key {_show(unknown[0])} (known: {', '.join(sorted(_TOP))})")
    out = out or data.get("out")
    if not isinstance(out, str) or not out.strip():
        raise GridError(f"{path}: key 'out': the folder the configurations write into (e.g. out: runs/grids/NAME)")
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        raise GridError(f"{path}: key 'description': expected a string, got {_show(description)}")
    defaults = data.get("defaults") or {}
    entries = data.get("configurations")
    grid = data.get("grid") or {}
    if not isinstance(defaults, dict) or not isinstance(grid, dict):
        raise GridError(f"{path}: 'defaults' and 'grid' must be mappings")
    if entries is None and not grid:
        raise GridError(f"{path}: no configurations: give 'configurations' (a list) and/or 'grid' (key: [values])")
    if entries is not None and (not isinstance(entries, list) or not entries):
        raise GridError(f"{path}: key 'configurations': expected a non-empty list of mappings")
    for key, values in grid.items():
        if key not in _FIELDS:
            raise GridError(f"{path}: grid: unknown key {_show(key)} (known: {', '.join(sorted(_FIELDS))})")
        if not isinstance(values, list) or not values:
            raise GridError(f"{path}: grid: key '{key}': expected a non-empty list of values")
        for v in values:
            _check_value(f"{path}: grid", key, v)
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) != len(values):
            raise GridError(f"{path}: grid: key '{key}': a value is listed twice ({_show(values)})")
    n_configs = len(entries if entries is not None else [{}]) * math.prod(len(v) for v in grid.values())
    if n_configs > MAX_CONFIGURATIONS:
        raise GridError(f"{path}: the grid expands to {n_configs} configurations (at most {MAX_CONFIGURATIONS})")
    for key in overrides or {}:
        if key not in _FIELDS:
            raise GridError(f"{path}: --set {key}: unknown key (known: {', '.join(sorted(_FIELDS))})")
        if key in grid:
            raise GridError(f"{path}: --set {key}: the grid varies '{key}' (grid: {key}: [...]); edit the file instead")
    combos = [dict(zip(grid, vals)) for vals in itertools.product(*grid.values())] if grid else [{}]
    resolved: list[tuple[str, dict]] = []
    for i, entry in enumerate(entries if entries is not None else [{}]):
        if not isinstance(entry, dict):
            raise GridError(f"{path}: configuration #{i + 1}: expected a mapping, got {_show(entry)}")
        if "name" in entry and (not isinstance(entry["name"], str) or not entry["name"]):
            raise GridError(f"{path}: configuration #{i + 1}: key 'name': expected a non-empty string, got "
                            f"{_show(entry['name'])} (quote it)")
        for combo in combos:
            name = "-".join([*([entry["name"]] if "name" in entry else []),
                             *(str(v) for v in combo.values())])
            resolved.append((name or f"config{i + 1}", {**defaults, **entry, **combo, **(overrides or {})}))
    order = data.get("order", "configs")
    if not isinstance(order, str) or order not in ORDERS:
        raise GridError(f"{path}: key 'order': {_show(order)} is not one of {', '.join(ORDERS)}")
    configs, n_tasks, seen = [], {}, {}
    for name, values in resolved:
        where = f"{path}: configuration '{name}'"
        if not _NAME.match(name):
            raise GridError(f"{where}: key 'name': use letters, digits and . _ - + = (it names the folder)")
        if name in seen:
            raise GridError(f"{where}: two configurations are named '{name}' (names must be unique)")
        seen[name] = True
        kwargs = {}
        for key, value in values.items():
            if key == "name":
                continue
            if key not in _FIELDS:
                hint = " (the folder is OUT/NAME)" if key == "out" else ""
                raise GridError(f"{where}: unknown key {_show(key)}{hint} (known: name, {', '.join(sorted(_FIELDS))})")
            kwargs[key] = _check_value(where, key, value)
            if key == "memory":
                try:
                    get_policy(kwargs[key])
                except ValueError as e:
                    raise GridError(f"{where}: key 'memory': {e}") from None
        try:
            cfg = RunConfig(out=str(Path(out) / name), **kwargs)
        except ValueError as e:
            raise GridError(f"{where}: {e}") from None
        _check_config(where, cfg, n_tasks)
        configs.append(cfg)
    same = data.get("adopt_same_memory") or {}
    if not isinstance(same, dict):
        raise GridError(f"{path}: key 'adopt_same_memory': expected a mapping NAME: REFERENCE (e.g. agmr: traj)")
    for name, ref in same.items():
        if not isinstance(name, str) or not isinstance(ref, str):
            raise GridError(f"{path}: adopt_same_memory: {_show(name)}: {_show(ref)}: expected NAME: REFERENCE, "
                            "two configuration names")
        if name == ref:
            raise GridError(f"{path}: adopt_same_memory: '{name}' names itself as its reference")
        for role, n in (("configuration", name), ("reference", ref)):
            if n not in seen:
                raise GridError(f"{path}: adopt_same_memory: {role} '{n}' is not a configuration of this grid "
                                f"(known: {', '.join(seen)})")
    return Grid(path=str(path), out=out, configs=tuple(configs), description=description or "",
                order=order, same_memory=tuple(same.items()))


def run_sweep(grid: Grid, workers: int | None = None, ray_address: str | None = None, only: list[str] | None = None,
              progress: bool = True, on_result=None, adopt_from: str | Path | None = None):
    """Play (or continue) every configuration of ``grid`` over one executor; returns the ``BatchReport``.

    ``only``: names of the configurations to play now (the others are left as they are).
    ``adopt_from``: a runs root (``ROOT/<model>/<name>``) whose episodes of the same parameters are copied in
    first instead of being played (:func:`workbench.eval.adoption.adopt_runs`); what was adopted is recorded in
    ``sweep.json`` and each folder's ``config.json``.
    """
    configs = list(grid.configs)
    if only:
        missing = sorted(set(only) - set(grid.names))
        if missing:
            raise GridError(f"{grid.path}: --only {missing[0]}: no such configuration (known: {', '.join(grid.names)})")
        configs = [c for c in configs if Path(c.out).name in only]
    refuse_concurrent(grid.out, [Path(c.out).name for c in configs])  # before anything is written
    # the folders this invocation writes (adoption included) are its own until it ends: another `run` or sweep on
    # one of them refuses, naming this process (two sweeps over disjoint --only sets run side by side)
    with folder_locks([c.out for c in configs], f"workbench sweep {grid.path} (--out {grid.out})"):
        return _run_sweep_locked(grid, configs, workers, ray_address, progress, on_result, adopt_from)


def _run_sweep_locked(grid: Grid, configs: list[RunConfig], workers, ray_address, progress, on_result, adopt_from):
    state_file = state_path(grid)
    earlier = ([inv.model_dump(exclude_unset=True) for inv in read_sweep_record(state_file).invocations]
               if state_file.exists() or state_file.is_symlink() else [])
    invocation = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "finished": None, "workers": workers,
                  "ray_address": ray_address, "configurations": [Path(c.out).name for c in configs],
                  **this_process()}

    def record(status: dict) -> None:
        atomic_write_text(state_file, json.dumps({
            "grid": grid.path, "description": grid.description, "out": grid.out,
            "configurations": {Path(c.out).name: c.identity() for c in grid.configs},
            "status": {Path(c.out).name: _status(c) for c in grid.configs},
            "invocations": [*earlier, invocation | status], "versions": versions()}, indent=1))

    check_all(configs, resume=True)  # a mismatch is refused before sweep.json is touched
    if adopt_from is not None:
        invocation["adopted"] = {Path(out).name: what for out, what in adopt_runs(configs, adopt_from).items()}
    names = set(invocation["configurations"])
    invocation["played_at_start"] = {r.name: r.played for r in sweep_status(grid) if r.name in names}  # for ETAs
    record({})
    by_name = {Path(c.out).name: c for c in grid.configs}

    def adopted(cfg: RunConfig, n: int) -> None:  # recorded as soon as it is made
        name = Path(cfg.out).name
        total = invocation.setdefault("adopted_same_memory", {}).get(name, 0) + n
        invocation["adopted_same_memory"][name] = total
        invocation.setdefault("adopted", {})[name] = (f"{total} episodes adopted from "
                                                      f"{dict(grid.same_memory)[name]} (the same memory)")
        record({})

    try:
        report = drive(configs, resume=True, progress=progress, workers=workers, ray_address=ray_address,
                       on_result=on_result, desc=f"sweep {Path(grid.path).name}", order=grid.order,
                       same_memory=[(by_name[n], by_name[r]) for n, r in grid.same_memory], on_adopt=adopted)
    except BaseException as e:  # a failed or interrupted invocation says so (what it wrote stays, resumable)
        record({"finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "error": f"{type(e).__name__}: {e}"[:2000]})
        raise
    record({"finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "wall_s": report.wall_s, "played": report.jobs,
            "replayed": report.replayed,
            "worker_peak_rss_mib": {str(k): v for k, v in sorted(report.workers.items())}})
    return report


def state_path(grid: Grid) -> Path:
    """Where ``grid``'s sweep record lives: ``OUT/sweep.json``, unless that file records another grid (by file
    name; e.g. MemArbiter's written-action grid beside its main grid in one model folder): then
    ``OUT/sweep.<grid file stem>.json``, so neither grid's record overwrites the other's.

    Raises:
        FormatError: ``OUT/sweep.json`` is there but is not a sweep record (naming the file and field).
    """
    main = Path(grid.out) / "sweep.json"
    if not main.exists() and not main.is_symlink():
        return main
    other = Path(read_sweep_record(main).grid).name
    if other in ("", Path(grid.path).name):
        return main
    return Path(grid.out) / f"sweep.{Path(grid.path).stem}.json"


def _status(cfg: RunConfig) -> dict:
    """What a configuration's ``metrics.json`` says of it (``complete``: the file is there).

    Raises:
        FormatError: the file is there but is not a metrics object of the expected types.
    """
    metrics_path = Path(cfg.out) / "metrics.json"
    if not metrics_path.exists() and not metrics_path.is_symlink():
        return {"complete": False}
    m = read_json(metrics_path, "metrics file")
    if not isinstance(m, dict):
        raise FormatError(metrics_path, f"holds a JSON {type(m).__name__}, where a metrics object belongs",
                          fix="run the configuration again (--resume) to rewrite it")
    tf = m.get("teacher_forced")
    checks = (("n_episodes", m.get("n_episodes"), int), ("success_rate", m.get("success_rate"), (int, float)),
              ("teacher_forced", tf, dict),
              ("teacher_forced.accuracy", (tf or {}).get("accuracy") if isinstance(tf, dict) else None, (int, float)))
    for field, value, kind in checks:
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise FormatError(metrics_path, f"field '{field}': expected {getattr(kind, '__name__', 'a number')}, got "
                                            f"{_show(value)}", fix="run the configuration again (--resume) to rewrite "
                                                                   "it")
    return {"complete": True, "n_episodes": m.get("n_episodes"), "success_rate": m.get("success_rate"),
            "teacher_forced": (tf or {}).get("accuracy")}
