"""ScienceWorld's experts: the simulator's gold action sequences, replayed, and the default memory base of them.

The gold path of a variation is what the simulator's own solver writes for it (``generateGoldPath``); replayed in
the same simulator it reaches a score of 100 (a replay that does not is kept, marked unsuccessful, and left out of
the memory base). The solver opens doors the ``easy`` simplification has opened already ("The door is already
open.": 826 of the gold steps of ``train@10``'s 290 variations); those no-op steps are dropped and the shorter path replayed, and
kept only if it still wins (``meta.dropped_no_ops`` counts them), so an agent cloned on it does not learn to spend
steps on them. Only gold-path states are labelled: the wheel's solver plans from a task's start, not from an
arbitrary state, so an off-plan state has no expert action (``docs/guide/benchmarks.md``).

Trajectories are computed once per split and cached, one line per variation as each finishes (a killed build
resumes where it stopped), under ``cache_root()/experts/scienceworld/<wheel>-<simplifications>/<split>/gold.jsonl``.
The default memory base is the successful gold trajectories of ``train@10`` (the first 10 train variations of
every type: 290 variations, all of whose gold paths win (in the worlds of random object order before
``envs.scienceworld.JVM_OPTIONS``, the solver's path for ``train/grow-fruit/7`` once ended at 50),
the scale of ETO's 1,483 SFT trajectories over 24 types, capped for 2 cores); a
test or dev episode never retrieves its own variation (they are not in it), a train episode never its own
(retrieval never returns the query's own game).
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

from tqdm.auto import tqdm

from workbench.envs.experts import replay
from workbench.envs.scienceworld import DEFAULT_SIMPLIFICATIONS, ScienceWorldEnv, load_scienceworld_tasks
from workbench.locks import folder_lock
from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import Trajectory, append_jsonl, cut_torn_tail, iter_jsonl_dicts
from workbench.paths import cache_root

__all__ = ["gold_trajectories", "default_scienceworld_base", "DEFAULT_BASE_SPLIT", "experts_folder"]

DEFAULT_BASE_SPLIT = "train@10"


def experts_folder(simplifications: str = DEFAULT_SIMPLIFICATIONS) -> Path:
    """Where the gold trajectories of this wheel, these simplifications and this way of running its JVM are cached
    (the JVM's options in the name: paths built in JVMs of random object order are never read as fixed ones)."""
    from workbench.envs.scienceworld import JVM_OPTIONS

    jvm = hashlib.sha1(" ".join(("fresh-jvm-per-task", *JVM_OPTIONS)).encode()).hexdigest()[:6]
    tag = f"{version('scienceworld')}-{simplifications or 'none'}-jvm{jvm}"
    return cache_root() / "experts" / "scienceworld" / tag


#: a step the simulator answers this way changed nothing (its gold paths open doors the easy simplification opened)
NO_OP = re.compile(r"^The .+ is already open\.$")


def _replayed(env: ScienceWorldEnv, task, plan: list[str]) -> Trajectory:
    start = env.reset(task)
    return replay(env, task, plan, source="gold", start=start, keep_admissible=False)


def gold_trajectory(env: ScienceWorldEnv, task) -> Trajectory:
    """``task``'s gold path replayed in ``env`` (success: it reached a score of 100), whole (``env`` built with
    ``step_limits=False``: a type's gold paths can be longer than its step limit); ``meta["within_limit"]`` says
    whether it fits the type's limit."""
    env.list_admissible = False
    try:
        start = env.reset(task, plan=True)
        plan = list(env.plan)
        traj = replay(env, task, plan, source="gold", start=start, keep_admissible=False)
        score = env.score  # of this replay (a later one changes env.score)
        after = [s.observation for s in traj.steps[1:]] + [traj.meta["final_observation"]]
        noop = [k for k, o in enumerate(after) if NO_OP.match(o.strip())]
        if traj.success and noop:  # the path without its no-op steps, kept only if it still wins
            shorter = _replayed(env, task, [a for k, a in enumerate(plan) if k not in set(noop)])
            if shorter.success:
                traj, score = shorter.model_copy(update={"meta": shorter.meta | {"dropped_no_ops": len(noop)}}), env.score
    finally:
        env.list_admissible = True
    from workbench.envs.scienceworld import STEP_LIMITS

    return traj.model_copy(update={"meta": traj.meta | {"score": score, "variation": task.meta["variation"],
                                                        "within_limit": traj.n_steps <= STEP_LIMITS[task.task_type]}})


def gold_trajectories(split: str, simplifications: str = DEFAULT_SIMPLIFICATIONS, progress: bool = True,
                      task_types: list[str] | None = None) -> list[Trajectory]:
    """The gold trajectories of every variation of ``split`` (``train@10``, ``test@10``, ``dev`` ...), computed
    where the cache lacks them (a fresh JVM per variation; a line appended per variation, so a killed build resumes), in the
    split's order."""
    tasks = load_scienceworld_tasks(split, task_types)
    path = experts_folder(simplifications) / split.replace("@", "_at_") / "gold.jsonl"
    with folder_lock(path.parent, f"computing ScienceWorld gold trajectories of {split}", wait=3600):
        done = {d["task_id"]: d for d in iter_jsonl_dicts(path)}
        todo = [t for t in tasks if t.task_id not in done]
        if todo:
            cut_torn_tail(path)
            env = ScienceWorldEnv(simplifications=simplifications, step_limits=False)
            try:
                for task in tqdm(todo, desc=f"ScienceWorld gold paths ({split})", disable=not progress):
                    traj = gold_trajectory(env, task)
                    append_jsonl(path, traj)
                    done[task.task_id] = traj.model_dump(mode="json")
            finally:
                env.close()
    return [Trajectory.model_validate(done[t.task_id]) for t in tasks]


@lru_cache(maxsize=2)
def default_scienceworld_base(simplifications: str = DEFAULT_SIMPLIFICATIONS) -> MemoryBase:
    """A MemoryBase of the successful gold trajectories of :data:`DEFAULT_BASE_SPLIT` (built once)."""
    trajs = gold_trajectories(DEFAULT_BASE_SPLIT, simplifications, progress=True)
    digest = hashlib.sha1("".join(t.model_dump_json() for t in trajs).encode()).hexdigest()[:10]
    folder = cache_root() / "memory" / f"scienceworld-{DEFAULT_BASE_SPLIT.replace('@', '_at_')}-gold-{digest}"
    if (folder / "entries.jsonl").exists():
        return MemoryBase(folder)
    with folder_lock(folder, f"building the default ScienceWorld memory base ({DEFAULT_BASE_SPLIT})", wait=600):
        base = MemoryBase(folder)
        if not base.entries():
            base.build_from_trajectories([t for t in trajs if t.success])
    return base
