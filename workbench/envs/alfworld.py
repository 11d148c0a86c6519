"""ALFWorld (TextWorld PDDL games) behind the :class:`~workbench.envs.base.Environment` Protocol.

The games are looked for, in order, in ``$WORKBENCH_ALFWORLD_DATA``, the repository's ``../shared/data/alfworld``,
and alfworld-download's own folder (``$ALFWORLD_DATA``, else alfworld's default ``~/.cache/alfworld``); the first
that holds games is used, and the process says once (on stderr) which one. A root with ``manifest.json`` is read
from it; a root without one (a user's own ``alfworld-download``) is scanned:
``json_2.1.1/<split>/<task folder>/<trial>/game.tw-pddl``.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from workbench.envs.base import DataRootError, StepResult, Task
from workbench.envs.normalize import (
    normalize_observation,
    split_initial_observation,
    task_type_of,
    to_admissible,
)

__all__ = ["ALFWorldEnv", "alfworld_data_candidates", "alfworld_data_root", "load_alfworld_tasks", "DATA_ENV_VAR",
           "FETCH_COMMAND", "MAX_STEPS"]

DATA_ENV_VAR = "WORKBENCH_ALFWORLD_DATA"
MAX_STEPS = 50
_REPO_DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "alfworld"


FETCH_COMMAND = "alfworld-download"  # alfworld's own downloader (needs internet): games into $ALFWORLD_DATA


def _holds_games(root: Path) -> bool:
    """A manifest, or at least one game file under ``json_2.1.1/`` (an empty folder holds none)."""
    return (root / "manifest.json").is_file() or next((root / "json_2.1.1").glob("*/*/*/game.tw-pddl"), None) is not None


def alfworld_data_candidates() -> list[tuple[Path, str]]:
    """Where the games are looked for, in order, each with where that place comes from."""
    out = []
    if os.environ.get(DATA_ENV_VAR):
        out.append((Path(os.environ[DATA_ENV_VAR]).expanduser(), f"${DATA_ENV_VAR}"))
    out.append((_REPO_DEFAULT, "the default beside the repository"))
    # alfworld-download's folder: $ALFWORLD_DATA (importing alfworld sets it to its cache when unset)
    alf = os.environ.get("ALFWORLD_DATA")
    out.append((Path(alf).expanduser(), "$ALFWORLD_DATA, alfworld-download's folder") if alf else
               (Path("~/.cache/alfworld").expanduser(), "alfworld-download's default folder"))
    return out


_ANNOUNCED: set[Path] = set()


def alfworld_data_root() -> Path:
    """The ALFWorld data root: the first of :func:`alfworld_data_candidates` that holds games; the process says
    once, on stderr, which one it uses.

    Raises:
        DataRootError: ``$WORKBENCH_ALFWORLD_DATA`` names a folder that does not exist, or no place holds games;
            the message lists where it looked and the command that fetches them.
    """
    import sys

    value = os.environ.get(DATA_ENV_VAR)
    if value and not Path(value).expanduser().is_dir():
        raise DataRootError(
            f"ALFWorld data root '{Path(value).expanduser()}' (from ${DATA_ENV_VAR}) does not exist: set "
            f"{DATA_ENV_VAR} to a folder holding json_2.1.1/ (and optionally manifest.json), or unset it")
    candidates = alfworld_data_candidates()
    for root, how in candidates:
        if (root.is_dir() and how.startswith("$" + DATA_ENV_VAR)) or _holds_games(root):
            if root not in _ANNOUNCED:
                _ANNOUNCED.add(root)
                shown = os.path.relpath(root, Path(__file__).resolve().parents[2]) if root == _REPO_DEFAULT else root
                print(f"workbench: ALFWorld games from {shown} ({how})", file=sys.stderr)
            return root
    looked = "; ".join(f"{root} ({how})" for root, how in candidates)
    raise DataRootError(
        f"no ALFWorld games found (looked in: {looked}). On a machine with internet, `{FETCH_COMMAND}` fetches "
        f"them (into $ALFWORLD_DATA, default ~/.cache/alfworld), or set {DATA_ENV_VAR} to a folder "
        "holding json_2.1.1/")


@lru_cache(maxsize=8)
def _load_manifest(root: Path) -> tuple[Task, ...]:
    manifest = root / "manifest.json"
    rows: list[dict]
    if manifest.exists():
        try:
            rows = json.loads(manifest.read_text())
        except json.JSONDecodeError as e:
            raise DataRootError(f"{manifest}: not valid JSON ({e.msg}, line {e.lineno})") from e
        for i, r in enumerate(rows):
            missing = {"split", "task", "trial", "path"} - set(r)
            if missing:
                raise DataRootError(f"{manifest}: record {i}: missing field(s) {sorted(missing)}")
    else:
        games = sorted((root / "json_2.1.1").glob("*/*/*/game.tw-pddl"))
        if not games:
            raise DataRootError(
                f"ALFWorld data root '{root}' has neither manifest.json nor json_2.1.1/<split>/<task>/<trial>/"
                f"game.tw-pddl files; point {DATA_ENV_VAR} at the right folder"
            )
        rows = [
            {"split": g.parts[-4], "task": g.parts[-3], "trial": g.parts[-2], "path": str(g.relative_to(root))}
            for g in games
        ]
    tasks: list[Task] = []
    by_split: dict[str, int] = {}
    for r in sorted(rows, key=lambda r: (r["split"], r["task"], r["trial"])):
        idx = by_split.get(r["split"], 0)
        by_split[r["split"]] = idx + 1
        tasks.append(
            Task(
                task_id=f"{r['split']}/{r['task']}/{r['trial']}",
                split=r["split"],
                task_type=r.get("type") or task_type_of(r["task"]),
                path=str((root / r["path"]).resolve()),
                index=idx,
            )
        )
    return tuple(tasks)


def load_alfworld_tasks(split: str, task_types: list[str] | None = None, root: Path | None = None) -> list[Task]:
    """Tasks of one split, sorted by (task folder, trial), optionally filtered by short task type."""
    root = root or alfworld_data_root()
    tasks = [t for t in _load_manifest(root) if t.split == split]
    if not tasks:
        splits = sorted({t.split for t in _load_manifest(root)})
        raise DataRootError(f"ALFWorld data root '{root}' has no split '{split}' (has: {', '.join(splits)})")
    if task_types:
        tasks = [t for t in tasks if t.task_type in task_types]
    return tasks


class ALFWorldEnv:
    """One ALFWorld game at a time, with ReAct/ETO observation normalisation and a 50-step limit.

    ``step`` accepts both grammars (``put X in/on Y`` and ``move X to Y``); an action that maps to no
    admissible command is passed through so the game answers "Nothing happens." as it would for a person.
    """

    name = "alfworld"

    def __init__(self, max_steps: int = MAX_STEPS, data_root: Path | None = None, fast_text: bool = True):
        if fast_text:
            # lazy: importing it patches textworld's text generation, which only fast_text asks for
            from workbench.envs import textworld_cache

            textworld_cache.install()
        self.max_steps = max_steps
        self._root = data_root
        self._env = None
        self._infos = None
        self._state = None
        self.plan: list[str] = []
        self._goal = ""
        self._steps = 0

    @property
    def data_root(self) -> Path:
        return self._root or alfworld_data_root()

    def tasks(self, split: str, task_types: list[str] | None = None) -> list[Task]:
        return load_alfworld_tasks(split, task_types, self.data_root)

    def _start(self, path: str, with_plan: bool):
        import textworld
        from alfworld.agents.environment.alfred_tw_env import (
            AlfredDemangler,
            AlfredInfos,
        )

        if not Path(path).exists():
            raise DataRootError(f"game file '{path}' does not exist (data root: {self.data_root})")
        self._infos = textworld.EnvInfos(won=True, admissible_commands=True, policy_commands=with_plan, facts=False)
        return textworld.start(path, request_infos=self._infos, wrappers=[AlfredDemangler(), AlfredInfos])

    def _result(self, feedback: str, reward: float, done: bool) -> StepResult:
        won = bool(self._state["won"])
        done = bool(done) or won or self._steps >= self.max_steps
        return StepResult(
            observation=normalize_observation(feedback),
            reward=float(reward),
            done=done,
            won=won,
            admissible_commands=tuple(self._state["admissible_commands"] or ()),
        )

    def reset(self, task: Task, plan: bool = False) -> StepResult:
        """Start ``task``. With ``plan=True`` the planner's plan is read once (``self.plan``) and then no
        longer requested, so the steps that follow do not replan (which takes minutes on some games)."""
        if self._env is not None:
            self._env.close()
        self._env = self._start(task.path, with_plan=plan)
        self._state = self._env.reset()
        self.plan = list(self._state["policy_commands"] or []) if plan else []
        self._infos.policy_commands = False  # shared with the wrapped env: later steps skip the planner
        self._steps = 0
        _, self._goal = split_initial_observation(self._state.feedback)
        return self._result(self._state.feedback, 0.0, False)

    def step(self, action: str) -> StepResult:
        if self._env is None:
            raise RuntimeError("step() before reset()")
        admissible = self._state["admissible_commands"] or []
        command = to_admissible(action, admissible) or action
        self._state, reward, done = self._env.step(command)
        self._steps += 1
        return self._result(self._state.feedback, reward, done)

    def goal(self) -> str:
        return self._goal

    def expert_plan(self, task: Task) -> list[str]:
        """The TextWorld planner's plan for ``task``, read once at reset; leaves the env at the task's start."""
        self.reset(task, plan=True)
        return self.plan

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
