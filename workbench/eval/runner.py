"""Batch runner: one row per episode, resumable, with config and metrics written beside the rows.

``out/config.json``       what ran (parameters, package versions, git commit)
``out/trajectories.jsonl`` one Trajectory per finished episode, appended and fsynced as it finishes
``out/metrics.json``      episode metrics (+ teacher-forced accuracy when asked)

A kill mid-episode loses only that unfinished episode (it was never written); ``resume=True`` skips every
task already in trajectories.jsonl, so no finished episode is lost and none runs twice.
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from tqdm.auto import tqdm

from workbench.envs.alfworld import ALFWorldEnv, load_alfworld_tasks
from workbench.envs.base import Task
from workbench.eval.metrics import by_task_type, episode_metrics
from workbench.memory.trajectory import Trajectory, append_jsonl, atomic_write_text, iter_jsonl_dicts
from workbench.models.registry import DEFAULT_AGENT

__all__ = ["RunConfig", "parse_task_slice", "select_tasks", "run", "load_run", "versions", "teacher_forced_for",
           "write_run_config", "batch_metrics"]

_VERSIONED = ("torch", "transformers", "transformer-lens", "textworld", "alfworld", "workbench")


@dataclass(frozen=True)
class RunConfig:
    """One batch run.

    Attributes:
        split: task split (valid_unseen, valid_seen, valid_train).
        tasks: a Python-style slice of the split's sorted task list ("0:20", ":", "5") or "all".
        memory: memory policy name (none, icl, traj).
        model: model name or path for ``load_model``.
        retriever: retriever for ``traj`` (minilm, bm25).
        task_types: optional filter by short task type.
        teacher_forcing: also compute teacher-forced next-action accuracy on the tasks' expert plans.
        decode: ``score`` (likelihood over admissible commands) or ``generate`` (Thought/Action, big models).
    """

    out: str
    env: str = "alfworld"
    split: str = "valid_unseen"
    tasks: str = "0:20"
    memory: str = "traj"
    model: str = DEFAULT_AGENT  # the behaviour-cloned SmolLM2; "smollm2-135m-instruct" is the untrained one
    retriever: str = "minilm"
    max_steps: int = 50
    task_types: tuple[str, ...] = ()
    teacher_forcing: bool = True
    decode: str = "score"
    seed: int = 0

    def identity(self) -> dict:
        """The fields that must match for ``--resume`` to continue a run."""
        d = asdict(self)
        d.pop("out")
        d["task_types"] = list(d["task_types"])
        return d


def parse_task_slice(spec: str, n: int) -> list[int]:
    """Indices selected by ``spec`` ("0:20", "10:", "0:134:11", ":", "all", "7") out of ``n`` tasks."""
    spec = spec.strip()
    if spec in ("all", ":", ""):
        return list(range(n))
    try:
        if ":" in spec:
            parts = [int(p) if p else None for p in spec.split(":")]
            if len(parts) > 3:
                raise ValueError
            return list(range(n))[slice(*parts)]
        i = int(spec)
    except ValueError:
        raise ValueError(f"--tasks '{spec}': expected a slice like 0:20, 10:, 0:134:11, all, or an index") from None
    if not 0 <= i < n:
        raise ValueError(f"--tasks {i}: out of range for {n} tasks")
    return [i]


def select_tasks(cfg: RunConfig) -> list[Task]:
    if cfg.env != "alfworld":
        raise ValueError(f"env '{cfg.env}' is not available (available: alfworld)")
    tasks = load_alfworld_tasks(cfg.split, list(cfg.task_types) or None)
    return [tasks[i] for i in parse_task_slice(cfg.tasks, len(tasks))]


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    try:
        root = Path(__file__).resolve().parents[2]
        out["git_commit"] = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        out["git_commit"] = None
    return out


def _prepare_out(cfg: RunConfig, resume: bool) -> set[str]:
    out = Path(cfg.out)
    cfg_path, rows = out / "config.json", out / "trajectories.jsonl"
    done: set[str] = set()
    if cfg_path.exists():
        old = json.loads(cfg_path.read_text())
        if not resume:
            if rows.exists() and rows.stat().st_size:
                raise FileExistsError(f"{out} already holds a run: pass --resume to continue it, or a new --out")
        elif old.get("run") != cfg.identity():
            diff = {k: (old.get("run", {}).get(k), v) for k, v in cfg.identity().items() if old.get("run", {}).get(k) != v}
            raise ValueError(f"{cfg_path}: --resume with different parameters {diff}; use a new --out")
    if resume:
        done = {d["task_id"] for d in iter_jsonl_dicts(rows)}
        _drop_torn_tail(rows)
    write_run_config(cfg)
    return done


def write_run_config(cfg: RunConfig) -> None:
    """``cfg.out/config.json``: the run's identity (what ``--resume`` must match) and the package versions."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "config.json", json.dumps({"run": cfg.identity(), "versions": versions()}, indent=1))


def batch_metrics(trajs: list[Trajectory]) -> dict:
    """What ``metrics.json`` holds about a batch of episodes: the metrics overall and per task type."""
    return episode_metrics(trajs) | {"by_task_type": by_task_type(trajs)}


def _drop_torn_tail(rows: Path) -> None:
    """A kill mid-append leaves a partial last line; cut it so the next append starts a clean line."""
    if not rows.exists():
        return
    data = rows.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        atomic_write_text(rows, data[:cut].decode("utf-8"))


def build_policy(name: str, retriever: str = "minilm"):
    """A memory policy over the default memory base (valid_train planner trajectories)."""
    from workbench.agents.policy import FixedICL, NoMemory, RetrievedTrajectory, get_policy
    from workbench.eval.memory_base import default_memory_base
    from workbench.memory.retrieval import get_retriever

    get_policy(name)  # a clear error for unknown names
    if name == "none":
        return NoMemory()
    base = default_memory_base()
    if name == "icl":
        return FixedICL(base)
    if name == "traj":
        return RetrievedTrajectory(get_retriever(retriever, base))
    return get_policy(name)(base)


def run(cfg: RunConfig, resume: bool = False, progress: bool = True, lm=None) -> dict:
    """Run (or resume) a batch and write config.json, trajectories.jsonl and metrics.json.

    Returns:
        The metrics dict written to metrics.json.
    """
    from workbench.agents.loop import Agent
    from workbench.models.loading import load_model

    if lm is not None and lm.name != cfg.model:
        raise ValueError(f"run: the loaded model is '{lm.name}' but the run's config says model='{cfg.model}'; "
                         "config.json would misname the model that played")
    tasks = select_tasks(cfg)
    done = _prepare_out(cfg, resume)
    lm = lm or load_model(cfg.model)
    agent = Agent.from_model(lm, decode=cfg.decode)
    policy = build_policy(cfg.memory, cfg.retriever)
    env = ALFWorldEnv(max_steps=cfg.max_steps)
    rows = Path(cfg.out) / "trajectories.jsonl"
    todo = [t for t in tasks if t.task_id not in done]
    t0 = time.perf_counter()
    bar = tqdm(todo, desc=f"{cfg.split} [{cfg.memory}]", disable=not progress)
    for task in bar:
        result = agent.run(env, task, policy, max_steps=cfg.max_steps)
        append_jsonl(rows, result.trajectory)
        bar.set_postfix(success=result.trajectory.success, steps=result.trajectory.n_steps)
    env.close()
    trajs = [Trajectory.model_validate(d) for d in iter_jsonl_dicts(rows)]
    metrics = batch_metrics(trajs)
    metrics["wall_s_this_invocation"] = round(time.perf_counter() - t0, 1)
    if cfg.teacher_forcing:
        metrics["teacher_forced"] = teacher_forced_for(lm, cfg.memory, cfg.split, cfg.tasks, cfg.out, progress)
    atomic_write_text(Path(cfg.out) / "metrics.json", json.dumps(metrics, indent=1))
    return metrics


def teacher_forced_for(lm, memory: str, split: str, tasks: str, out: str | Path, progress: bool = True,
                       policy=None) -> dict:
    """Teacher-forced accuracy of ``lm`` under memory ``memory`` on the expert plans of ``tasks``.

    ``policy``: a memory policy object to use instead of ``build_policy(memory)`` (``memory`` then names it
    in the cache key). Cached in ``out/teacher_forced.json`` (recomputed when the parameters differ).
    """
    from workbench.agents.loop import Agent
    from workbench.eval.memory_base import expert_trajectories_for
    from workbench.eval.teacher_forcing import teacher_forced_accuracy

    path = Path(out) / "teacher_forced.json"
    key = {"model": lm.name, "memory": memory, "split": split, "tasks": tasks}
    if path.exists():
        cached = json.loads(path.read_text())
        if cached.get("key") == key:
            return cached["result"]
    task_list = select_tasks(RunConfig(out=str(out), split=split, tasks=tasks))
    by_id = {t.task_id: t for t in task_list}
    experts = [e for e in expert_trajectories_for(split) if e.task_id in by_id]
    res = teacher_forced_accuracy(Agent.from_model(lm), experts, by_id, policy or build_policy(memory),
                                  progress=progress)
    result = {"accuracy": res.accuracy, "n_steps": res.n_steps, "n_tasks": len(experts), "mean_p_expert": res.mean_p_expert}
    atomic_write_text(path, json.dumps({"key": key, "result": result, "per_task": res.per_task,
                                        "per_step": list(res.per_step)}, indent=1))
    return result


def load_run(out: str | Path) -> tuple[list[Trajectory], dict, dict]:
    """(trajectories, metrics, config) of a finished run folder."""
    out = Path(out)
    trajs = [Trajectory.model_validate(d) for d in iter_jsonl_dicts(out / "trajectories.jsonl")]
    metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else {}
    config = json.loads((out / "config.json").read_text()) if (out / "config.json").exists() else {}
    return trajs, metrics, config
