"""Per-task results of a notebook analysis, kept as each task finishes, so a render that is killed or fails in a
later cell redoes only what was not done.

The analyses beyond the papers (item attention while MemArbiter plays, band switches along the experts,
reminder attention while the memory agent plays) run for tens of minutes at paper scale. Each writes one line
per task to ``FOLDER/<name>-<digest>.jsonl`` where the digest is a hash of everything the result depends on
(model, its adapter, dtype, split, the analysis's parameters); the key itself is written beside it
(``...key.json``) for a reader. Other parameters give another file, so no stored result is overwritten or mixed
with another's; a torn last line (a kill mid-write) is dropped when the file is opened again. The code is not
in the key: after changing an analysis, delete its files (or pass ``folder=None``, which keeps nothing).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workbench.envs.alfworld import ALFWorldEnv
from workbench.memory.keyed import canonical, digest
from workbench.memory.trajectory import (
    TrajectoryFormatError,
    append_jsonl,
    atomic_write_text,
    cut_torn_tail,
    iter_jsonl_dicts,
)
from workbench.models.adapters import model_adapter_hash

__all__ = ["TaskCache", "analysis_key", "rows_per_episode", "replay_game", "admissible_along", "require_score"]


class TaskCache:
    """``get(task_id)`` -> the payload stored for a task (None: not done); ``put(task_id, payload)`` stores one.

    Args:
        folder: where the file lives; None keeps nothing (every ``get`` misses).
        name: the analysis (the file name's stem).
        key: what the result depends on (JSON-serialisable).
    """

    def __init__(self, folder: str | os.PathLike | None, name: str, key: dict) -> None:
        self.key = canonical(key)
        self.done: dict[str, Any] = {}
        self.path: Path | None = None
        if folder is None:
            return
        self.path = Path(folder) / f"{name}-{digest(self.key)}.jsonl"
        if not self.path.exists():
            return
        try:
            rows = list(iter_jsonl_dicts(self.path))  # a torn last line (a kill mid-write) is skipped
        except TrajectoryFormatError as e:
            raise ValueError(f"{e} (only a torn last line is expected after a kill); delete the file to compute "
                             "the analysis again") from None
        self.done = {rec["task_id"]: rec["payload"] for rec in rows}
        cut_torn_tail(self.path)  # before anything is appended

    def get(self, task_id: str) -> Any | None:
        return self.done.get(task_id)

    def put(self, task_id: str, payload: Any) -> None:
        self.done[task_id] = payload
        if self.path is None:
            return
        if not self.path.exists():
            atomic_write_text(self.path.with_name(self.path.stem + ".key.json"), json.dumps(self.key, indent=1))
        append_jsonl(self.path, {"task_id": task_id, "payload": payload})


def analysis_key(lm, **params) -> dict:
    """What an analysis of model ``lm`` depends on besides the code: its name, adapter (content hash), dtype and
    ``params``."""
    return {"model": lm.name, "adapter": model_adapter_hash(lm.name), "dtype": lm.dtype, **params}


def rows_per_episode(cache: TaskCache, trajs, pick, analyse) -> list[dict]:
    """The rows of an analysis of recorded episodes, one episode at a time: for every episode ``traj`` that
    ``pick(traj)`` gives steps for, ``cache``'s rows where the episode's actions are the ones analysed before,
    else ``analyse(traj, steps)``'s, kept in ``cache`` (with the actions) as each episode finishes: an episode
    played again differently is analysed again."""
    rows: list[dict] = []
    for traj in trajs:
        if not (steps := pick(traj)):
            continue
        actions = traj.actions()
        if (done := cache.get(traj.task_id)) is not None and done["actions"] == actions:
            rows += done["rows"]
            continue
        mine = analyse(traj, steps)
        cache.put(traj.task_id, {"actions": actions, "rows": mine})
        rows += mine
    return rows


def require_score(cfg, analysis: str) -> None:
    """An analysis that re-scores the admissible commands at a recorded state needs a run that scored them."""
    if cfg.decode != "score":
        raise ValueError(f"{analysis} re-scores the admissible commands: run {cfg.out} decodes '{cfg.decode}', "
                         "expected 'score'")


@contextmanager
def replay_game(cfg):
    """``game()``: one ALFWorld environment for an analysis that replays recorded episodes (for each step's
    admissible commands), opened at its first use (an analysis read whole from its cache opens none) and closed
    when the analysis ends."""
    envs: list = []

    def game():
        if not envs:
            envs.append(ALFWorldEnv(max_steps=cfg.max_steps))
        return envs[0]
    try:
        yield game
    finally:
        for env in envs:
            env.close()


def admissible_along(env, task, actions) -> list[list[str]]:
    """The commands admissible before each step of an episode of ``task`` that takes ``actions``: ``env`` reset to
    the task and stepped through them (``len(actions) + 1`` lists; the first is step 0's)."""
    out = [list(env.reset(task).admissible_commands)]
    for a in actions:
        out.append(list(env.step(a).admissible_commands))
    return out
