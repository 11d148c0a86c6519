"""The driver: run configurations -> jobs -> an executor -> run folders. ``workbench run`` (one configuration)
and ``workbench sweep`` (a grid) are both this loop.

    for each configuration:  check its folder (refuse a mismatch before anything is written), list what is
                             left: episodes not in trajectories.jsonl, teacher-forced tasks not yet scored
    all configurations' jobs -> executor.map_unordered -> as each result arrives, the driver (alone) appends it
                             to its folder; when a configuration's last job lands, the folder is completed
                             (episodes in task order, teacher_forced.json, metrics.json)

What a kill leaves behind (crash-consistency):
- **a worker** (kill -9, OOM): its one job was never written; the executor replays it elsewhere.
- **the driver**, at any point: every result it appended is in the folder, fsynced — whole episode lines in
  ``trajectories.jsonl`` (a torn last line is skipped and cut on resume) and whole task lines in
  ``teacher_forced.parts.jsonl``; ``teacher_forced.json`` and ``metrics.json`` are replaced atomically, so they are
  either the previous complete version or absent. ``--resume`` (a sweep always resumes) plays only what is
  missing; nothing is played or written twice.
- completing a folder rewrites ``trajectories.jsonl`` in task order by an atomic rename of the same lines, so the
  finished folder is byte-for-byte the one a serial run writes, whatever the completion order was.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from workbench.envs.base import Task
from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.adoption import adopt_same_memory
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.executor import Executor, make_executor
from workbench.eval.jobs import EPISODE, TEACHER_FORCING, Job
from workbench.eval.run_folder import (
    _episode_lines,
    batch_metrics,
    check_resume,
    episode_lines,
    read_episodes,
    read_metrics,
    write_run_config,
)
from workbench.eval.sweep_status import refuse_live_folders
from workbench.eval.teacher_forced import (
    TF_FILE,
    combine_teacher_forced,
    read_teacher_forced,
    read_teacher_forced_parts,
    teacher_forced_key,
)
from workbench.locks import folder_locks
from workbench.memory.trajectory import (
    Trajectory,
    append_jsonl,
    atomic_write_text,
    cut_torn_tail,
)

__all__ = ["drive", "check_all", "BatchReport", "PARTS_FILE"]

PARTS_FILE = "teacher_forced.parts.jsonl"  # one teacher-forced task per line while a run is incomplete


@dataclass
class BatchReport:
    """What one ``drive`` call did.

    Attributes:
        metrics: ``metrics.json`` of every configuration, by its ``out``.
        jobs: jobs played in this call (per kind).
        workers: per worker process id, its peak resident memory (MiB) as last reported.
        replayed: jobs replayed after their worker died.
        wall_s: wall time of the call.
    """

    metrics: dict[str, dict] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)
    workers: dict[int, float] = field(default_factory=dict)
    replayed: int = 0
    wall_s: float = 0.0


@dataclass
class _Plan:
    cfg: RunConfig
    tasks: list[Task]
    episodes: list[Task]  # still to play
    tf_key: dict | None
    tf_order: list[str]  # task ids teacher forcing covers, in the split's expert order
    tf_parts: dict[str, dict]  # task id -> part already scored
    tf_todo: list[Task]
    left: int = 0  # jobs of this call not yet landed
    episodes_left: int = 0
    deferred: int = 0  # episodes left for a later call (the folder is not complete: no metrics.json)

    @property
    def name(self) -> str:
        return Path(self.cfg.out).name


def _plan(cfg: RunConfig, resume: bool, defer: frozenset[str] = frozenset()) -> _Plan:
    tasks = select_tasks(cfg)
    done = check_resume(cfg, resume)
    episodes = [t for t in tasks if t.task_id not in done and t.task_id not in defer]
    key, order, parts, todo = None, [], {}, []
    if cfg.teacher_forcing:
        key = teacher_forced_key(cfg.model, cfg.dtype, cfg.method, cfg.split, cfg.tf_tasks)
        out = Path(cfg.out)
        cached = read_teacher_forced(out / TF_FILE) if (out / TF_FILE).exists() else {}
        by_id = {t.task_id: t for t in (tasks if cfg.tf_tasks == cfg.tasks else select_tasks(cfg, cfg.tf_tasks))}
        order = [e.task_id for e in expert_trajectories_for(cfg.split) if e.task_id in by_id]
        if cached.get("key") != key:
            parts = read_teacher_forced_parts(out / PARTS_FILE, key)
            todo = [by_id[t] for t in order if t not in parts]
    plan = _Plan(cfg, tasks, episodes, key, order, parts, todo)
    plan.left = len(episodes) + len(todo)
    plan.episodes_left = len(episodes)
    plan.deferred = len([t for t in tasks if t.task_id in defer and t.task_id not in done])
    return plan


def _check_distinct(cfgs: list[RunConfig]) -> None:
    outs = [c.out for c in cfgs]
    if len(set(outs)) != len(outs):
        raise ValueError(f"two configurations write the same folder: {sorted({o for o in outs if outs.count(o) > 1})}")


def check_all(cfgs: list[RunConfig], resume: bool) -> None:
    """Every check ``drive`` makes before it writes anything (folders, parameters), without playing."""
    _check_distinct(cfgs)
    for c in cfgs:
        check_resume(c, resume)


def _jobs(plan: _Plan) -> list[Job]:
    return ([Job(plan.cfg, t, EPISODE) for t in plan.episodes]
            + [Job(plan.cfg, t, TEACHER_FORCING) for t in plan.tf_todo])


ORDERS = ("configs", "interleaved")


def _ordered(plans: list[_Plan], order: str) -> list[Job]:
    """One job list: configuration after configuration, or interleaved so the fewest-done configuration goes next."""
    if order not in ORDERS:
        raise ValueError(f"order '{order}': expected one of {', '.join(ORDERS)}")
    if order == "configs":
        return [j for p in plans for j in _jobs(p)]
    keyed = []
    for ci, p in enumerate(plans):
        done = (len(p.tasks) - len(p.episodes)) + (len(p.tf_order) - len(p.tf_todo))
        keyed += [((done + k, ci), j) for k, j in enumerate(_jobs(p))]
    return [j for _, j in sorted(keyed, key=lambda kj: kj[0])]


def _complete(plan: _Plan, t0: float) -> dict:
    """Episodes in task order, teacher_forced.json, metrics.json: the folder a serial run writes."""
    out = Path(plan.cfg.out)
    rows = out / "trajectories.jsonl"
    order = {t.task_id: i for i, t in enumerate(plan.tasks)}
    found = episode_lines(rows)
    ids, lines = [tid for _, tid, _ in found], [line + "\n" for _, _, line in found]
    ranked = sorted(range(len(lines)), key=lambda i: order.get(ids[i], len(order)))
    if ranked != list(range(len(lines))) or not rows.exists():  # (a teacher-forcing-only run: an empty file)
        atomic_write_text(rows, "".join(lines[i] for i in ranked))
    trajs = read_episodes(out)
    metrics = batch_metrics(trajs) if plan.tasks else {"n_episodes": 0}  # tasks: none -> teacher forcing only
    metrics["wall_s_this_invocation"] = round(time.perf_counter() - t0, 1)
    # unchanged but for the wall time (a resume with nothing to play): keep the invocation that played
    old = read_metrics(out) or None
    if plan.tf_key is not None:
        tf_path = out / "teacher_forced.json"
        if plan.tf_todo or not tf_path.exists() or read_teacher_forced(tf_path)["key"] != plan.tf_key:
            record = combine_teacher_forced(plan.tf_key, [plan.tf_parts[t] for t in plan.tf_order])
            atomic_write_text(tf_path, json.dumps(record, indent=1))
        (out / PARTS_FILE).unlink(missing_ok=True)
        metrics["teacher_forced"] = read_teacher_forced(tf_path)["result"]
    if old is not None and ({**old, "wall_s_this_invocation": None}
                            == json.loads(json.dumps({**metrics, "wall_s_this_invocation": None}))):
        return old
    atomic_write_text(out / "metrics.json", json.dumps(metrics, indent=1))
    return metrics


def drive(cfgs: list[RunConfig], resume: bool = False, progress: bool = True, lm=None, workers: int | None = None,
          ray_address: str | None = None, executor: Executor | None = None, on_result=None, desc: str | None = None,
          order: str = "configs", same_memory: Sequence[tuple[RunConfig, RunConfig]] = (),
          on_adopt: Callable[[RunConfig, int], None] | None = None) -> BatchReport:
    """Play every configuration's missing jobs over one executor and complete their run folders.

    Args:
        cfgs: the configurations (distinct ``out`` folders).
        resume: continue folders that already hold runs of the same parameters.
        lm (LoadedModel | None): a model loaded in this process (serial only): it plays the configurations that
            name it.
        workers: worker processes (with ``ray_address``: the executor, see ``make_executor``); or pass
            ``executor`` (it is not closed).
        ray_address: a Ray cluster to play on (see ``workers``).
        on_result (Callable | None): called as ``on_result(job, result)`` after each result is written (monitoring, tests).
        desc: the progress bar's label.
        order: ``configs`` plays each configuration's jobs before the next's; ``interleaved`` next plays a job
            of the configuration with the fewest jobs done (its earlier runs included), so a grid stopped early
            holds as equal a share of every configuration as it can. Either order writes the same folders (each
            episode is played alone and stored in task order).
        same_memory: ``(configuration, reference)`` pairs: the configuration takes the reference's episodes on
            which its policy shows the same memory at every step (:func:`workbench.eval.adoption.adopt_same_memory`:
            a budget that does not bind, a memory agent that stays silent), and its other tasks wait until the
            reference has played them -- in rounds, until nothing waits (a reference not among ``cfgs``, or that
            plays nothing more, releases them). Needs ``resume=True``.
        on_adopt: called as ``on_adopt(configuration, n)`` after each adoption of ``n`` episodes.

    Returns:
        A :class:`BatchReport`; ``report.metrics[cfg.out]`` is what that folder's ``metrics.json`` holds.
    """
    refuse_live_folders(c.out for c in cfgs)  # a live background sweep playing these folders: stop, write nothing
    _check_distinct(cfgs)
    with folder_locks([c.out for c in cfgs]):  # one writer per folder: a second process refuses, naming this one
        return _drive_locked(cfgs, resume, same_memory, on_adopt, progress=progress, lm=lm, workers=workers,
                             ray_address=ray_address, executor=executor, on_result=on_result, desc=desc, order=order)


def _drive_locked(cfgs, resume, same_memory, on_adopt, **kw) -> BatchReport:
    pairs = [(c, r) for c, r in same_memory if c in cfgs]
    kw = dict(resume=resume, **kw)
    if not pairs:
        return _drive_once(cfgs, **kw)
    if not resume:
        raise ValueError("same-memory adoption writes into the configurations' folders: drive with resume=True")
    report, previous = None, None
    while True:
        defer = _adopt_and_defer(cfgs, pairs, on_adopt)
        if defer == previous:  # the references played nothing more (not driven here, or done): play it all
            defer = {}
        one = _drive_once(cfgs, defer=defer, **kw)
        report = one if report is None else _merged(report, one)
        if not any(defer.values()):
            return report
        previous = defer


def _adopt_and_defer(cfgs: list[RunConfig], pairs: list[tuple[RunConfig, RunConfig]],
                     on_adopt: Callable[[RunConfig, int], None] | None) -> dict[str, set[str]]:
    """Each pair's configuration adopts what its reference has played with the same memory; returns, by folder,
    the tasks it waits for its reference (driven here too) to play first."""
    defer: dict[str, set[str]] = {}
    for cfg, ref in pairs:
        if (Path(ref.out) / "config.json").exists():
            n = len(adopt_same_memory(cfg, ref.out))
            if n and on_adopt is not None:
                on_adopt(cfg, n)
        if ref in cfgs:
            played = {tid for out in (ref.out, cfg.out) for tid, _ in _episode_lines(Path(out) / "trajectories.jsonl")}
            defer[cfg.out] = {t.task_id for t in select_tasks(cfg)} - played
    return defer


def _merged(a: BatchReport, b: BatchReport) -> BatchReport:
    """Two rounds' reports as one."""
    return BatchReport(metrics={**a.metrics, **b.metrics},
                       jobs={k: a.jobs.get(k, 0) + b.jobs.get(k, 0) for k in {*a.jobs, *b.jobs}},
                       workers={**a.workers, **b.workers}, replayed=a.replayed + b.replayed,
                       wall_s=round(a.wall_s + b.wall_s, 1))


def _playing_device(lm, workers: int | None, ray_address: str | None, cfgs: Sequence[RunConfig] = ()) -> str:
    """Where this batch's episodes are played: the given model's device, the Ray workers' GPUs, or the process
    default (checked here, before any folder is written)."""
    from workbench.eval.executor import default_gpus_per_worker
    from workbench.models.device import check_dtype, resolve_device

    gpus = default_gpus_per_worker()
    if lm is not None:
        return lm.device
    if workers is None and ray_address is None:
        if gpus:
            raise ValueError("--gpus-per-worker reserves GPUs for Ray workers: add --workers N or --ray-address "
                             "(in this process, --device cuda runs the model on a GPU)")
        device = resolve_device()
    else:
        device = "cuda" if gpus else resolve_device()
    for c in cfgs:  # a dtype the device cannot run: refused before any folder is written
        check_dtype(device, c.dtype)
    return device


def _drive_once(cfgs: list[RunConfig], resume: bool = False, progress: bool = True, lm=None,
                workers: int | None = None, ray_address: str | None = None, executor: Executor | None = None,
                on_result=None, desc: str | None = None, order: str = "configs",
                defer: dict[str, set[str]] | None = None) -> BatchReport:
    """One round of :func:`drive`. ``defer``: ``out`` folder -> task ids not to play in this call (they may be
    adopted once their same-memory reference has played them); such a folder gets no metrics.json."""
    t0 = time.perf_counter()
    if workers is not None and workers < 1:
        raise ValueError(f"--workers {workers}: expected at least 1")
    _check_distinct(cfgs)  # the folders' own checks run in _plan, every one before anything is written
    models = None
    if lm is not None:
        if workers is not None or ray_address is not None or executor is not None:
            raise ValueError("a model loaded in this process (lm=...) plays serially; leave workers/ray_address unset")
        for c in cfgs:
            if lm.name != c.model:
                raise ValueError(f"run: the loaded model is '{lm.name}' but the run's config says model='{c.model}'; "
                                 "config.json would misname the model that played")
            if lm.dtype != c.dtype:
                raise ValueError(f"run: the loaded model is {lm.dtype} but the run's config says "
                                 f"dtype='{c.dtype}'; load it with load_model(..., dtype='{c.dtype}')")
        models = {(lm.name, lm.dtype): lm}
    plans = [_plan(c, resume, frozenset((defer or {}).get(c.out, ()))) for c in cfgs]  # every check first
    device = _playing_device(lm, workers, ray_address, cfgs) if executor is None else (lm.device if lm else "cpu")
    for p in plans:
        if p.left or not (Path(p.cfg.out) / "config.json").exists():  # a resume with nothing to play records no
            write_run_config(p.cfg, device)                             # versions: none of its episodes are new
        cut_torn_tail(Path(p.cfg.out) / "trajectories.jsonl")
        cut_torn_tail(Path(p.cfg.out) / PARTS_FILE)
    by_out = {p.cfg.out: p for p in plans}
    jobs = _ordered(plans, order)
    report = BatchReport(jobs={EPISODE: sum(j.kind == EPISODE for j in jobs),
                               TEACHER_FORCING: sum(j.kind == TEACHER_FORCING for j in jobs)})
    if jobs:
        own = executor is None
        executor = executor or make_executor(workers, ray_address, models=models)
        single = len(plans) == 1
        label = desc or (f"{plans[0].cfg.split} [{plans[0].cfg.method}]" if single else f"{len(plans)} configurations")
        bar = tqdm(total=len(jobs), desc=label, disable=not progress, smoothing=0.05)
        try:
            for job, result in executor.map_unordered(jobs):
                plan = by_out[job.config.out]
                out = Path(plan.cfg.out)
                if job.kind == EPISODE:
                    traj = Trajectory.model_validate(result["trajectory"])
                    append_jsonl(out / "trajectories.jsonl", traj)
                else:
                    part = result["teacher_forced"]
                    append_jsonl(out / PARTS_FILE, {"key": plan.tf_key, "part": part})
                    plan.tf_parts[part["task_id"]] = part
                info = result.get("worker") or {}
                if "pid" in info:
                    report.workers[info["pid"]] = info["peak_rss_mib"]
                plan.left -= 1
                plan.episodes_left -= job.kind == EPISODE
                if plan.left == 0 and not plan.deferred:
                    report.metrics[plan.cfg.out] = _complete(plan, t0)
                bar.update(1)
                if single and job.kind == EPISODE:
                    bar.set_postfix(success=traj.success, steps=traj.n_steps)
                elif not single:
                    bar.set_postfix_str("  ".join(
                        f"{p.name} {len(p.tasks) - p.episodes_left - p.deferred}/{len(p.tasks)}" for p in plans))
                if on_result is not None:
                    on_result(job, result)
        finally:
            bar.close()
            report.replayed = getattr(executor, "replayed", 0)
            if own:
                executor.close()
    for p in plans:
        if p.cfg.out not in report.metrics and not p.deferred:  # nothing was left to play
            report.metrics[p.cfg.out] = _complete(p, t0)
    report.wall_s = round(time.perf_counter() - t0, 1)
    return report
