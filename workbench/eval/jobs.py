"""Jobs and the worker that plays them: the unit every executor (in-process, local processes, a Ray cluster)
moves around.

A batch (one ``workbench run`` or a whole ``workbench sweep`` grid) is a list of :class:`Job` — one episode,
or the teacher-forced steps of one task, of one run configuration. A :class:`Worker` plays jobs one at a time
and returns plain JSON-able dicts; it never writes files (the driver alone writes run folders, so a run is the
same files whichever executor played it).

A worker loads what its jobs need on first use and keeps it: models by (name, dtype) — at most
``max_models`` at once, least recently used dropped first, so a grid ordered configuration by configuration
loads each model once per worker — memory policies by (memory, retriever), environments by step limit.
An environment whose simulator process dies under an episode (``SimulatorDiedError``: ScienceWorld's JVM killed or
out of memory) has the episode replayed once, from its start, on a fresh simulator; a second death stops the batch
naming the job. Every piece of state a job touches is reset at its start (the scorer's KV cache, the policy's ``begin``, the
environment's ``reset``), so a job's result depends on the job alone: a job replayed on another worker after a
crash, or played in a serial run, gives the same dict.
"""

from __future__ import annotations

import os
import resource
import sys
from collections import OrderedDict
from dataclasses import dataclass, replace

from workbench.agents.loop import Agent
from workbench.envs.base import SimulatorDiedError
from workbench.envs.benchmarks import make_env
from workbench.envs.base import Task
from workbench.eval.config import RunConfig, policy_for
from workbench.eval.teacher_forced import expert_for, teacher_forced_part
from workbench.models.loading import load_model

__all__ = ["Job", "Worker", "EPISODE", "TEACHER_FORCING"]

EPISODE = "episode"
TEACHER_FORCING = "teacher_forcing"


@dataclass(frozen=True)
class Job:
    """One unit of work: an episode, or the teacher-forced steps of one task, of one run configuration.

    Attributes:
        config: the run's ``RunConfig`` (frozen; it travels to the worker as is).
        task: the task (its game file must be readable at the same path on the worker's machine).
        kind: ``episode`` or ``teacher_forcing``.
    """

    config: RunConfig
    task: Task
    kind: str = EPISODE

    def describe(self) -> str:
        return f"{self.kind} of {self.task.task_id} for {self.config.out}"


class Worker:
    """Plays jobs; one per process (a Ray actor, or the driver itself for a serial run).

    Args:
        threads: torch threads in this process (1: batch jobs share the cores; two threads per process on a
            busy machine spin-wait and run several times slower). None leaves torch's setting alone.
        models: models already loaded in this process, ``{(name, dtype): LoadedModel}`` (a serial run reuses
            the caller's model).
        max_models: how many models to keep loaded at once.
        device: where models load (None: this process's default, ``workbench.models.device``).
        forward: how an unhooked step runs in this process (``auto`` / ``bridge`` / ``compiled``,
            ``workbench.models.scoring.set_default_forward``; None: this process's default).
    """

    def __init__(self, threads: int | None = 1, models: dict | None = None, max_models: int = 2,
                 device: str | None = None, forward: str | None = None) -> None:
        self.device = device
        if forward is not None:
            from workbench.models.scoring import set_default_forward

            set_default_forward(forward)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        self._models: OrderedDict = OrderedDict(models or {})
        self._max_models = max(max_models, len(self._models), 1)
        self._policies: dict = {}
        self._envs: dict = {}
        self._agents: dict = {}

    def pid(self) -> int:
        return os.getpid()

    def info(self) -> dict:
        """This process: pid and peak resident memory so far (MiB)."""
        return {"pid": os.getpid(), "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}

    def model(self, name: str, dtype: str):
        key = (name, dtype)
        if key not in self._models:
            while len(self._models) >= self._max_models:
                old, _ = self._models.popitem(last=False)
                self._agents = {k: v for k, v in self._agents.items() if k[:2] != old}
            self._models[key] = load_model(name, dtype=dtype, device=self.device)
        self._models.move_to_end(key)
        return self._models[key]

    def _agent(self, cfg):
        key = (cfg.model, cfg.dtype, cfg.decode, cfg.record_admissible, cfg.env.partition(":")[0])
        if key not in self._agents:  # the benchmark's instructions and prompt budget
            self._agents[key] = Agent.for_benchmark(self.model(cfg.model, cfg.dtype), cfg.env, decode=cfg.decode,
                                                    record_admissible=cfg.record_admissible)
        return self._agents[key]

    def _policy(self, cfg):
        key = cfg.policy_key()
        if key not in self._policies:
            self._policies[key] = policy_for(cfg)
        return self._policies[key]

    def _env(self, env: str, max_steps: int):
        key = (env, max_steps)
        if key not in self._envs:
            self._envs[key] = make_env(env, max_steps)
        return self._envs[key]

    def warm(self, cfg) -> dict:
        """Load what ``cfg``'s jobs need (model, agent, policy, environment) without playing; returns ``info()``.
        Benchmarks call it so that timings start with every worker ready."""
        self._agent(cfg)
        self._policy(cfg)
        self._env(cfg.env, cfg.max_steps)
        return self.info()

    def play(self, job: Job) -> dict:
        """Play ``job``; returns ``{"kind", "task_id", "worker": info()}`` plus ``trajectory`` (an episode, as
        a JSON dict) or ``teacher_forced`` (one task's scored steps, see ``teacher_forced_part``)."""
        cfg = job.config
        out: dict = {"kind": job.kind, "task_id": job.task.task_id}
        if job.kind == EPISODE:
            env = self._env(cfg.env, cfg.max_steps)
            try:
                result = self._agent(cfg).run(env, job.task, self._policy(cfg), max_steps=cfg.max_steps)
            except SimulatorDiedError as e:  # the simulator's process died under the episode: once more, afresh
                print(f"workbench: {e}; replaying the episode on a fresh one", file=sys.stderr)
                result = self._agent(cfg).run(env, job.task, self._policy(cfg), max_steps=cfg.max_steps)
            out["trajectory"] = result.trajectory.model_dump(mode="json")
        elif job.kind == TEACHER_FORCING:
            agent = self._agent(replace(cfg, decode="score", record_admissible=False))  # scores the admissible
            out["teacher_forced"] = teacher_forced_part(agent, expert_for(cfg.split, job.task.task_id), job.task,
                                                        self._policy(cfg))
        else:
            raise ValueError(f"job kind '{job.kind}': expected '{EPISODE}' or '{TEACHER_FORCING}'")
        return out | {"worker": self.info()}

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
