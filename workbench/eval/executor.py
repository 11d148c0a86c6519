"""Executors: where jobs are played. One interface, two implementations, one driver above them.

``InProcessExecutor``  the driver's own process plays every job in order (a serial run, a notebook, a test).
``RayExecutor``        N :class:`~workbench.eval.jobs.Worker` actors, each its own process with one torch thread
                       and its own loaded models. ``address=None`` starts a local Ray instance sized to the
                       workers and stops it on ``close``; ``address="HOST:PORT"`` (or ``"auto"``) joins an
                       existing cluster (``ray start --head`` on one machine, ``ray start --address`` on the
                       others) and leaves it running.

Both yield ``(job, result)`` as jobs finish, in completion order; the driver writes the results. Every worker
holds exactly one job at a time, so a worker that dies (kill -9, out of memory, a lost node) loses at most the
job it was playing: that job goes back to the front of the queue and is replayed on another worker (a fresh
one replaces the dead), and because a worker never writes anything, nothing of it was written and nothing is
written twice. A job that has killed ``max_tries`` workers stops the batch with an error naming it. An
exception raised *inside* a job (a bug, a bad game file) is not retried: it stops the batch, naming the job.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Protocol

from workbench.eval.jobs import Job, Worker
from workbench.models.device import default_device

__all__ = ["GPUS_ENV", "Executor", "InProcessExecutor", "RayExecutor", "JobError", "default_gpus_per_worker",
           "make_executor"]

GPUS_ENV = "WORKBENCH_GPUS_PER_WORKER"


class JobError(RuntimeError):
    """A job failed inside a worker (or killed too many workers); the message names the job."""


class Executor(Protocol):
    n_workers: int

    def warm(self, cfg) -> None: ...

    def map_unordered(self, jobs: Sequence[Job]) -> Iterator[tuple[Job, dict]]: ...

    def close(self) -> None: ...


class InProcessExecutor:
    """Plays jobs one by one in this process (with the caller's already loaded models, if given)."""

    n_workers = 1

    def __init__(self, models: dict | None = None, threads: int | None = None) -> None:
        self.worker = Worker(threads=threads, models=models)
        self.replayed = 0

    def warm(self, cfg) -> None:
        self.worker.warm(cfg)

    def map_unordered(self, jobs: Sequence[Job]) -> Iterator[tuple[Job, dict]]:
        for job in jobs:
            try:
                result = self.worker.play(job)
            except Exception as e:
                raise JobError(f"{job.describe()}: {type(e).__name__}: {e}") from e
            yield job, result

    def close(self) -> None:
        self.worker.close()


class RayExecutor:
    """Jobs over ``workers`` Ray actors (a local instance, or an existing cluster at ``address``).

    Args:
        workers: number of worker actors (processes); None with an address: one per CPU of the cluster.
        address: an existing cluster (``HOST:PORT``, ``auto``); None starts a local instance and stops it on
            ``close``.
        threads: torch threads per worker.
        gpus_per_worker: GPUs each worker reserves (e.g. 1 for a 7-8B model per GPU); models then load on cuda
            (the GPU Ray gives the worker). None: ``--gpus-per-worker`` (``WORKBENCH_GPUS_PER_WORKER``), else 0.
        max_tries: how many workers a single job may see die before the batch stops.
        device: where the workers load models when they reserve no GPU (None: this process's default device).
    """

    def __init__(self, workers: int | None = 2, address: str | None = None, threads: int = 1,
                 gpus_per_worker: float | None = None, max_tries: int = 3, device: str | None = None) -> None:
        try:
            import ray
        except ImportError:  # pragma: no cover - ray is a dependency
            raise RuntimeError("the Ray executor needs `ray` (pip install ray)") from None
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self._ray = ray
        self._owns_instance = address is None
        if workers is not None and workers < 1:
            raise ValueError(f"--workers {workers}: expected at least 1")
        # ray.init installs its own SIGTERM handler (sys.exit) over the caller's; the CLI's turns SIGTERM into the
        # same clean stop as Ctrl-C (a sweep records "interrupted"), so a handler the caller set is put back
        main = threading.current_thread() is threading.main_thread()
        caller_sigterm = signal.getsignal(signal.SIGTERM) if main else None
        if self._owns_instance:
            # address="local": a new instance even where a stale /tmp/ray/ray_current_cluster names another
            ray.init(address="local", num_cpus=workers or 1, include_dashboard=False, log_to_driver=False,
                     logging_level="ERROR", object_store_memory=80 * 1024 * 1024)
        else:
            # a cluster with token authentication (Ray's default from 2.59 on) needs its token here too:
            # RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) as on its nodes
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        if callable(caller_sigterm):
            signal.signal(signal.SIGTERM, caller_sigterm)
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1) // max(threads, 1)))
        self.n_workers = workers
        self.address = address
        gpus_per_worker = default_gpus_per_worker() if gpus_per_worker is None else gpus_per_worker
        device = device or default_device()
        if not gpus_per_worker and device.startswith("cuda"):
            gpus_per_worker = 1  # Ray hides the GPUs from a worker that reserves none: --device cuda means one each
        self.threads, self.gpus_per_worker, self.max_tries = threads, gpus_per_worker, max_tries
        self.device = "cuda" if gpus_per_worker else device
        from workbench.models.scoring import default_forward

        self.forward = default_forward()  # handed to each worker: a cluster's workers do not share our environment
        self._remote = ray.remote(Worker)
        self._actors: list = []
        self._pids: dict = {}  # actor -> pid ObjectRef (asked first, so it never waits behind a job)
        self._busy: set = set()  # actors holding a job
        self.replayed = 0
        self.deaths = 0
        for _ in range(workers):
            self._spawn()

    def _spawn(self):
        device_kw = {"num_gpus": self.gpus_per_worker} if self.gpus_per_worker else {}
        actor = self._remote.options(num_cpus=self.threads, max_restarts=0, max_task_retries=0, **device_kw).remote(
            threads=self.threads, device=self.device, forward=self.forward)
        self._pids[actor] = actor.pid.remote()
        self._actors.append(actor)
        return actor

    def warm(self, cfg) -> None:
        """Every worker loads what ``cfg``'s jobs need (see ``Worker.warm``); returns when all are ready."""
        self._ray.get([a.warm.remote(cfg) for a in self._actors])

    def worker_pids(self, busy: bool = False) -> list[int]:
        """The process ids of the live workers (``busy``: only those playing a job right now), for monitoring
        and for the tests that kill one mid-episode."""
        return [self._ray.get(self._pids[a]) for a in self._actors if not busy or a in self._busy]

    def map_unordered(self, jobs: Sequence[Job]) -> Iterator[tuple[Job, dict]]:
        ray = self._ray
        from ray.exceptions import (
            ActorDiedError,
            ActorUnavailableError,
            RayActorError,
            RayTaskError,
            WorkerCrashedError,
        )

        died = (RayActorError, ActorDiedError, ActorUnavailableError, WorkerCrashedError)
        queue = deque(jobs)
        tries: dict[int, int] = {}
        idle = deque(self._actors)
        inflight: dict = {}  # ObjectRef -> (job, actor)
        while queue or inflight:
            while queue and idle:
                actor, job = idle.popleft(), queue.popleft()
                inflight[actor.play.remote(job)] = (job, actor)
                self._busy.add(actor)
            ready, _ = ray.wait(list(inflight), num_returns=1)
            ref = ready[0]
            job, actor = inflight.pop(ref)
            self._busy.discard(actor)
            try:
                result = ray.get(ref)
            except RayTaskError as e:
                if isinstance(e, died) or isinstance(getattr(e, "cause", None), died):
                    result = None
                else:
                    raise JobError(f"{job.describe()}: {e.cause!r}" if getattr(e, "cause", None) else
                                   f"{job.describe()}: {e}") from e
            except died:
                result = None
            if result is not None:
                idle.append(actor)
                yield job, result
                continue
            # the worker died while playing ``job``: nothing of it was written; replay it on a fresh worker
            self.deaths += 1
            key = id(job)
            tries[key] = tries.get(key, 0) + 1
            if tries[key] >= self.max_tries:
                raise JobError(f"{job.describe()}: {tries[key]} workers died playing it; giving up")
            self._actors.remove(actor)
            self._pids.pop(actor, None)
            idle.append(self._spawn())
            queue.appendleft(job)
            self.replayed += 1
            print(f"workbench: a worker died during the {job.describe()}; replaying it on a fresh worker",
                  file=sys.stderr, flush=True)

    def close(self, grace_s: float = 10.0) -> None:
        # each worker first closes its environments (a ScienceWorld JVM stopped by its pid), then is killed
        closing = []
        for actor in self._actors:
            try:
                closing.append(actor.close.remote())
            except Exception:  # already gone
                pass
        if closing:
            try:
                self._ray.wait(closing, num_returns=len(closing), timeout=grace_s)
            except Exception:  # a dead worker's call fails: its JVM died with it (py4j's die-on-exit)
                pass
        for actor in self._actors:
            try:
                self._ray.kill(actor)
            except Exception:  # already gone
                pass
        self._actors.clear()
        self._ray.shutdown()  # a local instance stops; a cluster only loses this driver


def make_executor(workers: int | None = None, ray_address: str | None = None, models: dict | None = None,
                  threads: int = 1) -> Executor:
    """The executor for ``--workers N`` / ``--ray-address ADDRESS``: in-process without either, else Ray
    (a local instance of N workers, or N workers on the cluster at the address)."""
    if workers is None and ray_address is None:
        if default_gpus_per_worker():
            raise ValueError("--gpus-per-worker reserves GPUs for Ray workers: add --workers N or --ray-address "
                             "(in this process, --device cuda runs the model on a GPU)")
        return InProcessExecutor(models=models)
    return RayExecutor(workers=workers, address=ray_address, threads=threads)


def default_gpus_per_worker() -> float:
    """GPUs each Ray worker reserves: ``--gpus-per-worker`` (``WORKBENCH_GPUS_PER_WORKER``), else 0."""
    raw = os.environ.get(GPUS_ENV) or "0"
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{GPUS_ENV}={raw!r}: expected a number of GPUs (e.g. 1, 0.5)") from None
    if value < 0:
        raise ValueError(f"--gpus-per-worker {raw}: expected 0 or more")
    return value
