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
from pathlib import Path

from workbench.eval.config import RunConfig
from workbench.eval.metrics import by_task_type, episode_metrics
from workbench.memory.base import MemoryBase
from workbench.memory.keyed import key_diff
from workbench.memory.trajectory import (
    Trajectory,
    atomic_write_text,
    iter_jsonl_dicts,
)
from workbench.models.adapters import model_adapter_hash as _adapter_hash
from workbench.provenance import versions

__all__ = ["model_adapter_hash", "identity_diff", "check_resume", "memory_base_digest", "write_run_config", "batch_metrics", "load_run"]


def model_adapter_hash(model: str) -> str | None:
    return _adapter_hash(model)


def identity_diff(old: dict, new: dict, ignore: tuple[str, ...] = ()) -> dict:
    """The run parameters that differ between two identities, ``{key: (old, new)}``. A memory base is compared by
    content, not by path (its digest is checked apart, see :func:`check_resume`): the same refined base read
    through a relative path by a sweep and through an absolute one by a notebook, or from another checkout, is
    the same run."""
    skip = {*ignore, *(("memory_base",) if old.get("memory_base") and new.get("memory_base") else ())}
    return key_diff(old, new, skip)


def check_resume(cfg: RunConfig, resume: bool) -> set[str]:
    """The task ids ``cfg.out`` already holds episodes of; refuses (before anything is written) a folder holding
    a run without ``resume``, or a run of other parameters (a folder written before runs recorded their
    dtype was played in float32)."""
    out = Path(cfg.out)
    cfg_path, rows = out / "config.json", out / "trajectories.jsonl"
    if cfg_path.exists():
        try:
            # fields added since a folder was written take their defaults (e.g. dtype: float32)
            saved = json.loads(cfg_path.read_text())
            old = RunConfig(out="").identity() | saved.get("run", {})
        except (json.JSONDecodeError, AttributeError) as e:
            raise ValueError(f"{cfg_path}: not a run config ({e}); move it away or use a new --out") from None
        if not resume:
            if rows.exists() and rows.stat().st_size:
                raise FileExistsError(f"{out} already holds a run: pass --resume to continue it, or a new --out")
        elif diff := identity_diff(old, cfg.identity()):
            raise ValueError(f"{cfg_path}: --resume with different parameters {diff}; use a new --out")
        if resume and (then := saved.get("model_adapter")) and then != (now := model_adapter_hash(cfg.model)):
            raise ValueError(f"{cfg_path}: --resume, but the adapter of model {cfg.model} changed since this run "
                             f"began ({then} -> {now}: it was retrained); its episodes would mix two agents: "
                             "evaluate it in a new --out")
        if resume and cfg.memory_base and (then := saved.get("memory_base_digest")):
            now = memory_base_digest(cfg)
            if now != then:
                raise ValueError(f"{cfg_path}: --resume, but the memory base {cfg.memory_base} changed since this run "
                                 f"began (digest {then} -> {now}: a refinement committed or rolled back an entry); "
                                 "its episodes would mix two bases: evaluate the base in a new --out")
    return {d["task_id"] for d in iter_jsonl_dicts(rows)} if resume else set()


def _episode_lines(path: Path) -> list[tuple[str, str]]:
    """(task id, the line as written) of each episode in a ``trajectories.jsonl``; a torn last line (a kill
    mid-append) is skipped, as readers skip it."""
    if not path.exists():
        return []
    lines = [ln for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()]
    out = []
    for i, line in enumerate(lines):
        try:
            out.append((json.loads(line)["task_id"], line))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}: line {i + 1}: not an episode record ({e}); the file is damaged") from None
    return out


def memory_base_digest(cfg: RunConfig) -> str | None:
    """The content hash of the memory base ``cfg`` reads (None: the default base, which no run edits)."""
    return MemoryBase(cfg.memory_base).digest() if cfg.memory_base else None


def write_run_config(cfg: RunConfig) -> None:
    """``cfg.out/config.json``: the run's identity (what ``--resume`` must match) and the package versions."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"run": cfg.identity(), "versions": versions()}
    # a run resumed under other versions (a later commit, a package upgrade) keeps those it was played with before
    try:
        old = json.loads((out / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        old = {}
    earlier = [v for v in [*old.get("earlier_versions", []), old.get("versions")] if v]
    earlier = [v for i, v in enumerate(earlier) if v != record["versions"] and v not in earlier[:i]]
    if earlier:
        record["earlier_versions"] = earlier
    if old.get("adopted"):  # episodes copied from another run folder (adopt_episodes) keep their provenance
        record["adopted"] = old["adopted"]
    if (adapter := model_adapter_hash(cfg.model)) is not None:  # which weights under the model's name (ditto)
        record["model_adapter"] = adapter
    if cfg.memory_base:  # which state of an editable base the episodes read (resume refuses another)
        record["memory_base_digest"] = memory_base_digest(cfg)
    atomic_write_text(out / "config.json", json.dumps(record, indent=1))


def batch_metrics(trajs: list[Trajectory]) -> dict:
    """What ``metrics.json`` holds about a batch of episodes: the metrics overall and per task type."""
    return episode_metrics(trajs) | {"by_task_type": by_task_type(trajs)}


def load_run(out: str | Path) -> tuple[list[Trajectory], dict, dict]:
    """(trajectories, metrics, config) of a finished run folder."""
    out = Path(out)
    trajs = [Trajectory.model_validate(d) for d in iter_jsonl_dicts(out / "trajectories.jsonl")]
    metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else {}
    config = json.loads((out / "config.json").read_text()) if (out / "config.json").exists() else {}
    return trajs, metrics, config
