"""Run configurations and the run folder they write.

``out/config.json``        what ran (parameters, dtype included; package versions, git commit)
``out/trajectories.jsonl`` one Trajectory per finished episode, appended and fsynced as it finishes (in
                           completion order; rewritten in task order when the run completes)
``out/teacher_forced.json`` teacher-forced accuracy on the tasks' expert plans (when asked)
``out/metrics.json``       episode metrics (+ teacher-forced accuracy)

A kill mid-episode loses only that unfinished episode (it was never written); ``resume=True`` skips every
task already in trajectories.jsonl (and every task already teacher-forced, see ``workbench.eval.driver``), so
no finished episode is lost and none runs twice. Whichever executor plays the jobs (in-process, ``--workers
N`` local processes, a Ray cluster) the folder is the same files.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workbench.agents.policy import policy_options, predated_options
from workbench.envs.benchmarks import benchmark
from workbench.eval.config import MAX_STEPS, RunConfig, RunIdentity
from workbench.eval.metrics import by_task_type, episode_metrics
from workbench.files import (
    FormatError,
    present,
    read_json,
    read_json_model,
    read_jsonl_models,
    read_text,
)
from workbench.memory.base import MemoryBase
from workbench.memory.keyed import key_diff
from workbench.memory.trajectory import Trajectory, atomic_write_text
from workbench.models.adapters import model_adapter_hash as _adapter_hash
from workbench.provenance import versions

__all__ = ["model_adapter_hash", "identity_diff", "check_resume", "memory_base_digest", "write_run_config",
           "batch_metrics", "load_run", "ConfigFile", "read_config", "read_episodes", "read_metrics", "episode_lines",
           "CONFIG_FILE", "EPISODES_FILE", "METRICS_FILE"]

CONFIG_FILE, EPISODES_FILE, METRICS_FILE = "config.json", "trajectories.jsonl", "metrics.json"


class ConfigFile(BaseModel):
    """A run folder's ``config.json``, read strictly."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    run: RunIdentity
    versions: dict[str, str | None] = Field(default_factory=dict)
    earlier_versions: list[dict[str, str | None]] = Field(default_factory=list)
    adopted: list[dict[str, Any]] = Field(default_factory=list)
    model_adapter: str | None = None
    memory_base_digest: str | None = None


_NOT_RUN = "pass a folder `workbench run` wrote, or move it away and use a new --out"


def read_config(folder: str | Path) -> ConfigFile:
    """``FOLDER/config.json``, strictly (unknown fields, wrong types, out-of-range values are errors).

    Raises:
        FileNotFoundError: no config.json (not a run folder).
        FormatError: names the file, the field and the fix.
    """
    path = Path(folder) / CONFIG_FILE
    if not present(path):
        raise FileNotFoundError(f"{path}: not a run folder (no config.json)")
    return read_json_model(path, ConfigFile, "run config", fix=_NOT_RUN)


def episode_lines(path: str | Path) -> list[tuple[int, str, str]]:
    """``(line number, task id, the line as written)`` of each episode of a ``trajectories.jsonl``, strictly (each
    line a whole episode record); a torn last line (a kill mid-append) is skipped and logged, as the driver cuts it.

    Raises:
        FormatError: a malformed line (naming it), or one task's episode twice.
    """
    path = Path(path)
    if not present(path):
        return []
    text_lines = dict(enumerate(read_text(path, "episodes file").split("\n"), start=1))
    seen: dict[str, int] = {}
    out = []
    for i, traj in read_jsonl_models(path, Trajectory, torn_ok=True, what="episodes file",
                                     fix="the file is damaged: restore it, or remove this line to replay the episode"):
        if traj.task_id in seen:
            raise FormatError(path, f"field 'task_id': task {traj.task_id!r} again (also line {seen[traj.task_id]})",
                              where=f"line {i}", fix="keep one episode per task (remove one of the two lines)")
        seen[traj.task_id] = i
        out.append((i, traj.task_id, text_lines[i]))
    return out


def read_episodes(folder: str | Path) -> list[Trajectory]:
    """The episodes of ``FOLDER/trajectories.jsonl`` (none when it is missing), strictly: see :func:`episode_lines`."""
    path = Path(folder) / EPISODES_FILE
    if not present(path):
        return []
    return [t for _, t in read_jsonl_models(path, Trajectory, torn_ok=True, what="episodes file")]


def _finite(x: Any, path: Path, where: str = "") -> None:
    if isinstance(x, float) and not math.isfinite(x) or isinstance(x, int) and abs(x) > 2**63:
        raise FormatError(path, f"field '{where}': not a finite number in range")
    if isinstance(x, dict):
        for k, v in x.items():
            _finite(v, path, f"{where}.{k}" if where else k)
    elif isinstance(x, list):
        for k, v in enumerate(x):
            _finite(v, path, f"{where}.{k}")


def read_metrics(folder: str | Path) -> dict:
    """``FOLDER/metrics.json`` (an empty dict when the run is not complete), strictly: a JSON object of finite
    numbers whose ``n_episodes`` is a count."""
    path = Path(folder) / METRICS_FILE
    if not present(path):
        return {}
    data = read_json(path, "metrics file")
    if not isinstance(data, dict):
        raise FormatError(path, f"a JSON {type(data).__name__}, where the metrics object belongs",
                          fix="delete it: `workbench run --resume` writes it again")
    fix = "delete it: `workbench run --resume` writes it again"
    _finite(data, path)
    if not isinstance(by_type := data.get("by_task_type", {}), dict):
        raise FormatError(path, "field 'by_task_type': not an object", fix=fix)
    for where, m in [("", data), *((f"by_task_type.{k}.", v) for k, v in by_type.items())]:
        if not isinstance(m, dict):
            raise FormatError(path, f"field '{where.rstrip('.')}': not an object", fix=fix)
        n = m.get("n_episodes", 0)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise FormatError(path, f"field '{where}n_episodes': {n!r} is not a count", fix=fix)
        for key, lo, hi in (("success_rate", 0, 1), ("avg_steps", 0, MAX_STEPS)):
            v = m.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi):
                raise FormatError(path, f"field '{where}{key}': {v!r} is not in [{lo}, {hi}]", fix=fix)
    return data


def model_adapter_hash(model: str) -> str | None:
    return _adapter_hash(model)


def identity_diff(old: dict, new: dict, ignore: tuple[str, ...] = ()) -> dict:
    """The run parameters that differ between two identities, ``{key: (old, new)}``. A memory base is compared by
    content, not by path (its digest is checked apart, see :func:`check_resume`): the same refined base read
    through a relative path by a sweep and through an absolute one by a notebook, or from another checkout, is
    the same run."""
    skip = {*ignore, *(("memory_base",) if old.get("memory_base") and new.get("memory_base") else ())}
    return key_diff(old, new, skip)


def played_forward() -> str:
    """How this process plays a run's unhooked steps, as far as its scores go: ``compiled`` or ``eager`` (the plain
    path and the bridge give the same scores)."""
    from workbench.models.scoring import default_forward

    return "compiled" if default_forward() == "compiled" else "eager"


def check_resume(cfg: RunConfig, resume: bool) -> set[str]:
    """The task ids ``cfg.out`` already holds episodes of; refuses (before anything is written) a folder holding
    a run without ``resume``, or a run of other parameters (a folder written before runs recorded their
    dtype was played in float32)."""
    out = Path(cfg.out)
    cfg_path, rows = out / CONFIG_FILE, out / EPISODES_FILE
    if out.exists() and not out.is_dir():
        raise FormatError(out, "is a file, where a run folder belongs", fix="pass a folder as --out")
    if present(cfg_path):
        saved = read_config(out)
        old = saved.run.model_dump()
        if not resume:
            if rows.exists() and rows.stat().st_size:
                raise FileExistsError(f"{out} already holds a run: pass --resume to continue it, or a new --out")
        elif diff := identity_diff(old, cfg.identity()):
            hint = "".join(f"; it was played with --{k.replace('_', '-')} {diff[k][0]}: pass that to continue it"
                           for k in diff if k in predated_options(cfg.memory))
            raise ValueError(f"{cfg_path}: --resume with different parameters {diff}{hint}; or use a new --out")
        if resume and (then := saved.model_adapter) and then != (now := model_adapter_hash(cfg.model)):
            raise ValueError(f"{cfg_path}: --resume, but the adapter of model {cfg.model} changed since this run "
                             f"began ({then} -> {now}: it was retrained); its episodes would mix two agents: "
                             "evaluate it in a new --out")
        if resume and (then := saved.versions.get("forward") or "eager") != (now := played_forward()):
            raise ValueError(f"{cfg_path}: --resume, but this run was played {then} and this process plays {now} "
                             f"(--forward {'compiled' if then == 'compiled' else 'auto'} continues it): a compiled "
                             "step's scores are not eager's, and its episodes would mix the two; or use a new --out")
        if resume and (then := saved.memory_base_digest):
            now = memory_base_digest(cfg)
            if now != then:
                raise ValueError(f"{cfg_path}: --resume, but the memory base {cfg.memory_base or '(the default)'} "
                                 f"changed since this run began (digest {then} -> {now}: a refinement committed or rolled "
                                 "back an entry, or the default base was rebuilt); its episodes would mix two bases: "
                                 "evaluate the base in a new --out")
    # every episode line is checked now, before anything plays: a damaged file stops the run at once
    return {tid for _, tid, _ in episode_lines(rows)} if resume else set()


def _episode_lines(path: Path) -> list[tuple[str, str]]:
    """(task id, the line as written) of each episode of a ``trajectories.jsonl`` (see :func:`episode_lines`)."""
    return [(tid, line) for _, tid, line in episode_lines(path)]


def memory_base_digest(cfg: RunConfig) -> str | None:
    """The content hash of the memory base ``cfg`` reads: the one it names, or a benchmark's default base that is
    built on the machine (ScienceWorld's, from the simulator's gold paths); None: ALFWorld's default base (the
    committed planner file's, which no run edits) or a policy that reads no base."""
    if cfg.memory_base:
        return MemoryBase(cfg.memory_base).digest()
    if cfg.env != "alfworld" and "memory_base" in policy_options(cfg.memory):
        default = benchmark(cfg.env).default_memory_base
        return MemoryBase(default(cfg.env)).digest() if default else None
    return None


def write_run_config(cfg: RunConfig, device: str | None = None, forward: str | None = None) -> None:
    """``cfg.out/config.json``: the run's identity (what ``--resume`` must match) and the package versions; with
    them the accelerator that plays the episodes (``device``, when not the CPU: e.g. ``cuda:0 (NVIDIA H100 ...)``;
    not identity, so a run may resume on another device, which its ``earlier_versions`` then show) and ``forward``
    when the episodes were played ``compiled`` (None: this process's, :func:`played_forward`; a merge passes its
    parts')."""
    from workbench.models.device import describe_device

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"run": cfg.identity(), "versions": versions()}
    if cfg.env != "alfworld":  # the simulator's version and the protocol constants the episodes were played under
        from importlib.metadata import PackageNotFoundError, version

        try:
            record["versions"]["scienceworld"] = version("scienceworld")
        except PackageNotFoundError:
            record["versions"]["scienceworld"] = None
        from workbench.envs.benchmarks import benchmark

        bench = benchmark(cfg.env)  # the action prompt's budget and history drop (informational: not the identity)
        record["versions"]["prompt_budget"] = str(bench.max_prompt_tokens)
        record["versions"]["history_chunk"] = str(bench.history_chunk)
        if cfg.env.split(":")[0] == "scienceworld":  # how its JVM runs (the worlds' object order: envs.scienceworld)
            from workbench.envs.scienceworld import JVM_OPTIONS

            record["versions"]["jvm_options"] = " ".join(JVM_OPTIONS)
    if cfg.decode == "constrained":
        from workbench.agents.loop import BEAM

        record["versions"]["beam"] = str(BEAM)  # the constrained decode's (the file keeps strings)
    if device and device != "cpu":
        record["versions"]["device"] = describe_device(device)
    if (forward or played_forward()) == "compiled":  # not eager's scores (models.compiled): the run says so
        record["versions"]["forward"] = "compiled"
    # a run resumed under other versions (a later commit, a package upgrade) keeps those it was played with before
    old = read_config(out).model_dump(exclude_defaults=True) if present(out / CONFIG_FILE) else {}
    earlier = [v for v in [*old.get("earlier_versions", []), old.get("versions")] if v]
    earlier = [v for i, v in enumerate(earlier) if v != record["versions"] and v not in earlier[:i]]
    if earlier:
        record["earlier_versions"] = earlier
    if old.get("adopted"):  # episodes copied from another run folder (adopt_episodes) keep their provenance
        record["adopted"] = old["adopted"]
    if (adapter := model_adapter_hash(cfg.model)) is not None:  # which weights under the model's name (ditto)
        record["model_adapter"] = adapter
    if (digest := memory_base_digest(cfg)) is not None:  # which state of the base the episodes read (resume
        record["memory_base_digest"] = digest              # refuses another)
    atomic_write_text(out / "config.json", json.dumps(record, indent=1))


def batch_metrics(trajs: list[Trajectory]) -> dict:
    """What ``metrics.json`` holds about a batch of episodes: the metrics overall and per task type."""
    return episode_metrics(trajs) | {"by_task_type": by_task_type(trajs)}


def load_run(out: str | Path) -> tuple[list[Trajectory], dict, dict]:
    """(trajectories, metrics, config) of a run folder, each file read strictly (see :func:`read_config`,
    :func:`read_episodes`, :func:`read_metrics`); config is ``{}`` when the folder has none."""
    out = Path(out)
    if not out.is_dir():
        raise (FormatError(out, "is a file, where a run folder belongs") if out.exists()
               else FileNotFoundError(f"{out}: no such run folder"))
    config = read_config(out).model_dump(exclude_defaults=False) if present(out / CONFIG_FILE) else {}
    return read_episodes(out), read_metrics(out), config
