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
found, bad task slices, bad types — and an error names the file, the configuration and the key. A sweep
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
import re
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from workbench.agents.loop import DECODES
from workbench.agents.policy import get_policy
from workbench.envs.alfworld import load_alfworld_tasks
from workbench.envs.selection import NO_TASKS, parse_task_slice
from workbench.eval.adoption import adopt_runs
from workbench.eval.config import DTYPES, RunConfig
from workbench.eval.driver import ORDERS, check_all, drive
from workbench.eval.sweep_status import refuse_concurrent, sweep_status, this_process
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
_CHOICES = {"dtype": DTYPES, "retriever": _RETRIEVERS, "decode": DECODES, "env": ("alfworld",)}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]*$")


class GridError(ValueError):
    """A grid file that cannot run; the message names the file, the configuration and the key."""


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
    kind = {"max_steps": int, "seed": int, "teacher_forcing": bool, "record_admissible": bool, "task_types": list, "budget": int,
            "backend_args": list, "interval": int, "triggers": list}.get(key, str)
    if key == "tasks" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise GridError(f"{where}: key '{key}': expected an integer, got {value!r}")
    if kind is bool and not isinstance(value, bool):
        raise GridError(f"{where}: key '{key}': expected true or false, got {value!r}")
    if kind is list:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            what = {"task_types": "task types", "triggers": "trigger events"}.get(key, "KEY=VALUE strings")
            raise GridError(f"{where}: key '{key}': expected a list of {what}, got {value!r}")
        return tuple(value)
    if kind is str and not isinstance(value, str):
        raise GridError(f"{where}: key '{key}': expected a string, got {value!r}")
    allowed = _CHOICES.get(key)
    if allowed and value not in allowed:
        raise GridError(f"{where}: key '{key}': '{value}' is not one of {', '.join(allowed)}")
    return value


def _check_config(where: str, cfg: RunConfig, n_tasks: dict) -> None:
    try:
        get_policy(cfg.memory)
    except ValueError as e:
        raise GridError(f"{where}: key 'memory': {e}") from None
    if cfg.max_steps < 1:
        raise GridError(f"{where}: key 'max_steps': {cfg.max_steps} (expected at least 1)")
    if get_model_spec(cfg.model) is None:
        try:
            _adapter_folder_spec(cfg.model) or _resolve_path(cfg.model)
        except ModelNotFoundError as e:
            raise GridError(f"{where}: key 'model': {e}") from None
    split_key = (cfg.split, cfg.task_types)
    if split_key not in n_tasks:
        try:
            n_tasks[split_key] = len(load_alfworld_tasks(cfg.split, list(cfg.task_types) or None))
        except (ValueError, FileNotFoundError, KeyError) as e:
            raise GridError(f"{where}: key 'split' / 'task_types': {e}") from None
    for key in ("tasks", "teacher_forcing_tasks"):
        spec = getattr(cfg, key)
        if spec is None:
            continue
        try:
            if not parse_task_slice(spec, n_tasks[split_key]) and spec.strip() != NO_TASKS:
                raise ValueError(f"--tasks '{spec}' selects no task of {n_tasks[split_key]}")
        except ValueError as e:
            raise GridError(f"{where}: key '{key}': {str(e).replace('--tasks', 'tasks')}") from None


def parse_overrides(items: list[str] | None) -> dict:
    """``--set KEY=VALUE`` items -> {key: value} (VALUE read as YAML: 500 is a number, [a, b] a list)."""
    import yaml

    out = {}
    for item in items or ():
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise GridError(f"--set {item}: expected KEY=VALUE, e.g. --set model=smollm2-135m-alfworld-v2")
        try:
            out[key.strip()] = yaml.safe_load(value) if value.strip() else value
        except yaml.YAMLError as e:
            raise GridError(f"--set {item}: VALUE is not valid YAML ({e})") from None
    return out


def load_grid(path: str | Path, out: str | None = None, overrides: dict | None = None) -> Grid:
    """Read and check a grid file (``out`` overrides the file's ``out``; ``overrides`` {key: value} set a run
    field on every configuration, over the grid's defaults and its own values). Raises GridError naming what
    is wrong."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise GridError(f"{path}: no such grid file") from None
    except yaml.YAMLError as e:
        raise GridError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise GridError(f"{path}: expected a mapping with 'out', 'defaults', 'configurations' and/or 'grid'")
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise GridError(f"{path}: unknown top-level key '{unknown[0]}' (known: {', '.join(sorted(_TOP))})")
    out = out or data.get("out")
    if not isinstance(out, str) or not out:
        raise GridError(f"{path}: key 'out': the folder the configurations write into (e.g. out: runs/grids/NAME)")
    defaults = data.get("defaults") or {}
    entries = data.get("configurations")
    grid = data.get("grid") or {}
    if entries is None and not grid:
        raise GridError(f"{path}: no configurations: give 'configurations' (a list) and/or 'grid' (key: [values])")
    if entries is not None and (not isinstance(entries, list) or not entries):
        raise GridError(f"{path}: key 'configurations': expected a non-empty list of mappings")
    if not isinstance(defaults, dict) or not isinstance(grid, dict):
        raise GridError(f"{path}: 'defaults' and 'grid' must be mappings")
    for key, values in grid.items():
        if key not in _FIELDS:
            raise GridError(f"{path}: grid: unknown key '{key}' (known: {', '.join(sorted(_FIELDS))})")
        if not isinstance(values, list) or not values:
            raise GridError(f"{path}: grid: key '{key}': expected a non-empty list of values")
    for key in overrides or {}:
        if key not in _FIELDS:
            raise GridError(f"{path}: --set {key}: unknown key (known: {', '.join(sorted(_FIELDS))})")
        if key in grid:
            raise GridError(f"{path}: --set {key}: the grid varies '{key}' (grid: {key}: [...]); edit the file instead")
    combos = [dict(zip(grid, vals)) for vals in itertools.product(*grid.values())] if grid else [{}]
    resolved: list[tuple[str, dict]] = []
    for i, entry in enumerate(entries if entries is not None else [{}]):
        if not isinstance(entry, dict):
            raise GridError(f"{path}: configuration #{i + 1}: expected a mapping, got {entry!r}")
        for combo in combos:
            name = "-".join([*([str(entry["name"])] if "name" in entry else []), *(str(v) for v in combo.values())])
            resolved.append((name or f"config{i + 1}", {**defaults, **entry, **combo, **(overrides or {})}))
    order = data.get("order", "configs")
    if order not in ORDERS:
        raise GridError(f"{path}: key 'order': '{order}' is not one of {', '.join(ORDERS)}")
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
                raise GridError(f"{where}: unknown key '{key}'{hint} (known: name, {', '.join(sorted(_FIELDS))})")
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
        for role, n in (("configuration", name), ("reference", ref)):
            if n not in seen:
                raise GridError(f"{path}: adopt_same_memory: {role} '{n}' is not a configuration of this grid "
                                f"(known: {', '.join(seen)})")
    return Grid(path=str(path), out=out, configs=tuple(configs), description=str(data.get("description") or ""),
                order=order, same_memory=tuple((str(k), str(v)) for k, v in same.items()))


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
    state_file = state_path(grid)
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    invocation = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "finished": None, "workers": workers,
                  "ray_address": ray_address, "configurations": [Path(c.out).name for c in configs],
                  **this_process()}

    def record(status: dict) -> None:
        atomic_write_text(state_file, json.dumps({
            "grid": grid.path, "description": grid.description, "out": grid.out,
            "configurations": {Path(c.out).name: c.identity() for c in grid.configs},
            "status": {Path(c.out).name: _status(c) for c in grid.configs},
            "invocations": [*state.get("invocations", []), invocation | status], "versions": versions()}, indent=1))

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
    ``OUT/sweep.<grid file stem>.json``, so neither grid's record overwrites the other's."""
    main = Path(grid.out) / "sweep.json"
    try:
        other = Path(json.loads(main.read_text()).get("grid") or "").name
    except (OSError, json.JSONDecodeError):
        return main
    if other in ("", Path(grid.path).name):
        return main
    return Path(grid.out) / f"sweep.{Path(grid.path).stem}.json"


def _status(cfg: RunConfig) -> dict:
    metrics_path = Path(cfg.out) / "metrics.json"
    if not metrics_path.exists():
        return {"complete": False}
    m = json.loads(metrics_path.read_text())
    return {"complete": True, "n_episodes": m.get("n_episodes"), "success_rate": m.get("success_rate"),
            "teacher_forced": (m.get("teacher_forced") or {}).get("accuracy")}
