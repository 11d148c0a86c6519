"""ScienceWorld (the ``scienceworld`` wheel's simulator, a JVM) behind the :class:`~workbench.envs.base.Environment`
Protocol.

The simulator ships inside the wheel (``scienceworld.jar``); it needs a Java runtime (``java`` on ``PATH``, 11 or
newer; these machines have 17). Every environment object owns one JVM at a time, started on first use, a fresh one
for each task it loads (*Determinism* below), and stopped by process id on the next task, on :meth:`close`, at
interpreter exit, or when the object is collected. A JVM that dies mid-episode raises :class:`SimulatorDiedError`; the next
:meth:`ScienceWorldEnv.reset` starts a fresh one (the executor replays the episode).

Determinism. The simulator seeds its random numbers with the variation, but keeps a world's objects in hash sets of
objects hashed by identity, which the JVM draws afresh in every process (the wheel's issues #15, #33): the same
variation listed its objects in another order, and its gold path chose another inclined plane, pot or route, from one
JVM to the next (measured: 33 of 42 ``train@10`` gold paths differed between two JVMs, and even two JVMs started the
same way differed once the tasks loaded before differed). Every JVM is therefore started with
:data:`JVM_OPTIONS` (HotSpot's constant identity hash: the sets then iterate in a fixed order, set by the seeded
world; checked when the JVM starts: one that ignores them, under a ``_JAVA_OPTIONS`` override or another JVM, is a
:class:`SimulatorError`), and loads one task only: a JVM keeps some state from one load to the next (with the constant hash,
``train/chemistry-mix-paint-tertiary-color/2``'s gold path still visited the workshop before the bedroom after the
25 tasks before it in ``train@10``, and the bedroom first after none or a few), so every :meth:`ScienceWorldEnv.reset`
after the first starts a fresh one (``fresh_jvm``; 1-2 s a task). A variation is then the same world, and its gold path
the same actions, in every process and after any history (``tests/envs/test_scienceworld.py``). Run folders record
the options (``versions.jvm_options``).

Tasks. The 30 task types of the wheel, each with its train / dev / test variations; a task is one variation,
``<split>/<task type>/<variation>`` (``test/boil/21``). A split may carry a cap on the variations per type:
``test@10`` is the first 10 test variations of every type, which on ETO's 24 types is exactly ETO's test set
(Song et al. 2024, ``eval_agent/data/sciworld/test_indices.json``: 211 variations), the set the AGMR paper filters.

Protocol (ETO's, which the AGMR paper follows): the ``easy`` simplifications (teleport, open doors and containers,
self-watering pots, no electrical actions where the task allows), a step limit per task type
(:data:`STEP_LIMITS`), the score 0-100 as the reward. The episode's score is the highest score it reached (ETO keeps
the maximum: a wrong ``focus on`` drops the score to -100 and ends the episode, but what was done before counts);
each step's reward is that maximum's gain over the previous step, in 0-1 units, so the rewards of an episode add
up to its score / 100, and success is a score of 100.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import subprocess
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from workbench.envs.base import DataRootError, SimulatorDiedError, StepResult, Task

__all__ = ["INSTRUCTIONS", "PROMPT_TOKENS", "HISTORY_CHUNK", "REFUSALS", "is_refusal", "ScienceWorldEnv", "SimulatorDiedError", "SimulatorError", "JavaMissingError", "TASK_TYPES", "STEP_LIMITS", "ETO_TYPES",
           "LONG_TYPES", "SPLITS", "SIMPLIFICATIONS", "load_scienceworld_tasks", "parse_split", "parse_env_spec",
           "java_version", "variations", "JVM_OPTIONS"]

#: The JVM options every simulator starts with: the constant identity hash (module docstring, *Determinism*) and the
#: quick compiler only (a JVM lives for one task: 25 % less time per gold path, the same paths). Ours, not the wheel's.
JVM_OPTIONS = ("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2", "-XX:TieredStopAtLevel=1")

#: the wheel's splits of every type's variations
SPLITS = ("train", "dev", "test")
#: what ``scienceworld`` (no suffix) plays: ETO's protocol
DEFAULT_SIMPLIFICATIONS = "easy"
SIMPLIFICATIONS = ("easy", "teleportAction", "openDoors", "openContainers", "selfWateringFlowerPots",
                   "noElectricalAction")
#: the action prompt's system text for ScienceWorld (ours; ALFWorld's names a household and its commands)
INSTRUCTIONS = (
    "You are an agent in a simulated world of elementary science experiments. Interact with the environment to "
    "solve the task. Each turn, reply with exactly one valid action, for example: look around, teleport to kitchen, "
    "pick up thermometer, open freezer, move metal pot to stove, activate stove, use thermometer on water, "
    "focus on water, wait1. Focus only on what the task names: focusing on anything else fails the task."
)
#: the action prompt's budget on ScienceWorld, in the model's tokens (ours): beyond it the oldest history steps, then
#: the memory's trailing segments, are dropped, as ALFWorld's prompts are at the model's context. Its observations are
#: long ("look around" lists every object): whole, a long episode's prompt reaches 8k tokens, and one such training
#: sequence took 18 GB to train on this 24 GB machine; runs and training use the same budget
PROMPT_TOKENS = 4096
#: an overflowing prompt drops its oldest history steps 10 at a time (ours): the kept history then starts at the same
#: step for ~10 decisions, whose prompts extend one another (the KV cache reused; training packs them into one forward)
HISTORY_CHUNK = 10
#: how the simulator answers an action that did nothing (ALFWorld's "Nothing happens.")
REFUSALS = ("No known action matches that input.", "It's not clear how to", "That thing doesn't appear to have",
            "is already open", "is already closed", "is already activated", "is already deactivated",
            "You can't", "cannot be", "Unknown action")


def is_refusal(observation: str) -> bool:
    """Whether ``observation`` is the simulator refusing an action or answering that it did nothing."""
    return any(r in (observation or "") for r in REFUSALS)
#: seconds a simulator call may take before its JVM counts as hung (ours: the slowest seen, loading a Mendelian
#: genetics variation with its gold path, takes ~5 s)
CALL_TIMEOUT_S = 300.0
#: how the simulator asks which of several matching objects an action meant; the next input is an option's number
AMBIGUOUS = "Ambiguous request:"
AMBIGUOUS_OPTION = re.compile(r"^(\d+):\t", re.M)
#: never a candidate: it restarts the simulator's task under the agent (a written action still reaches the game)
EXCLUDED_ACTIONS = ("reset task",)

# Step limits per task type. The 24 of ETO's protocol are ETO's (eval_agent/data/sciworld/max_steps.json, the
# numbers the AGMR paper's E.1 filters on); the 6 types ETO leaves out are ours: 1.5x the longest gold path of the
# type's first 10 test variations, rounded up to a multiple of 10 (``tools/scienceworld_assets.py`` measures it).
_ETO_LIMITS = {
    "boil": 100, "change-the-state-of-matter-of": 80, "freeze": 80, "melt": 80,
    "measure-melting-point-known-substance": 120, "use-thermometer": 30, "power-component": 20,
    "power-component-renewable-vs-nonrenewable-energy": 30, "test-conductivity": 30,
    "test-conductivity-of-unknown-substances": 30, "find-animal": 15, "find-living-thing": 15,
    "find-non-living-thing": 15, "find-plant": 15, "grow-fruit": 60, "grow-plant": 30, "chemistry-mix": 60,
    "chemistry-mix-paint-secondary-color": 15, "chemistry-mix-paint-tertiary-color": 30,
    "lifespan-longest-lived": 10, "lifespan-longest-lived-then-shortest-lived": 12, "lifespan-shortest-lived": 10,
    "identify-life-stages-1": 30, "identify-life-stages-2": 30,
}
_OUR_LIMITS_FILE = Path(__file__).resolve().parents[1] / "assets" / "scienceworld" / "variations.json"

#: ETO's 24 task types (its test set); the other 6 are played only when named or with the whole split
ETO_TYPES = tuple(_ETO_LIMITS)
#: the types the AGMR paper dropped from ETO's test set (a step limit of 60 or more, E.1); reported apart
LONG_TYPES = tuple(t for t, n in _ETO_LIMITS.items() if n >= 60)


class JavaMissingError(DataRootError):
    """No Java runtime to run the simulator; the message says how to install one (a missing prerequisite, as a
    missing data folder is: the CLI reports it as the user's to fix)."""


class SimulatorError(ValueError):
    """The simulator (alive) refused an input or failed on a task: the message names the step and the task."""


@lru_cache(maxsize=1)
def java_version() -> str:
    """``java -version``'s first line.

    Raises:
        JavaMissingError: no ``java`` on ``PATH`` (or it does not run).
    """
    java = shutil.which("java")
    hint = ("ScienceWorld's simulator is a Java program: install a Java runtime 11 or newer (Debian/Ubuntu: `apt "
            "install openjdk-17-jre-headless`; macOS: `brew install openjdk@17`; conda: `conda install -c "
            "conda-forge openjdk=17`) and put `java` on PATH")
    if java is None:
        raise JavaMissingError(f"no `java` on PATH. {hint}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JavaMissingError(f"`{java} -version` failed ({e}). {hint}") from e
    first = (out.stderr or out.stdout).strip().splitlines()[:1]
    if out.returncode != 0 or not first:
        raise JavaMissingError(f"`{java} -version` exited {out.returncode}. {hint}")
    m = re.search(r'version "(\d+)(?:\.(\d+))?', first[0])
    if m:
        major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
        if major < 11:
            raise JavaMissingError(f"{first[0]}: Java {major} is too old. {hint}")
    return first[0]


@lru_cache(maxsize=1)
def _assets() -> dict:
    """The committed variation table (every type's train / dev / test variation ids) and our step limits."""
    try:
        data = json.loads(_OUR_LIMITS_FILE.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DataRootError(f"{_OUR_LIMITS_FILE}: unreadable ({e}); regenerate it with "
                            "`python tools/scienceworld_assets.py`") from e
    for field in ("wheel", "types", "our_step_limits"):
        if field not in data:
            raise DataRootError(f"{_OUR_LIMITS_FILE}: no field '{field}'; regenerate it with "
                                "`python tools/scienceworld_assets.py`")
    return data


def variations(task_type: str, split: str) -> list[int]:
    """The variation ids of ``task_type`` in ``split`` (``train``, ``dev``, ``test``), in the wheel's order."""
    types = _assets()["types"]
    if task_type not in types:
        raise ValueError(f"ScienceWorld has no task type '{task_type}' (types: {', '.join(types)})")
    if split not in SPLITS:
        raise ValueError(f"ScienceWorld split '{split}': expected one of {', '.join(SPLITS)}")
    return list(types[task_type][split])


#: every task type, in the wheel's order, and its step limit
TASK_TYPES: tuple[str, ...] = ()
STEP_LIMITS: dict[str, int] = {}


def _init_tables() -> None:
    global TASK_TYPES, STEP_LIMITS
    if not _OUR_LIMITS_FILE.exists():  # only while tools/scienceworld_assets.py writes it
        return
    data = _assets()
    TASK_TYPES = tuple(data["types"])
    STEP_LIMITS = {t: _ETO_LIMITS.get(t) or int(data["our_step_limits"][t]) for t in TASK_TYPES}


_init_tables()


def parse_split(split: str) -> tuple[str, int | None]:
    """``"test@10"`` -> ``("test", 10)``; ``"dev"`` -> ``("dev", None)``.

    Raises:
        ValueError: not one of :data:`SPLITS`, or a cap that is not a whole number of at least 1.
    """
    base, sep, cap = split.partition("@")
    if base not in SPLITS:
        raise ValueError(f"ScienceWorld split '{split}': expected one of {', '.join(SPLITS)}, optionally with a cap "
                         "on the variations per task type (test@10: the first 10 of each type, ETO's test set)")
    if not sep:
        return base, None
    if not cap.isascii() or not cap.isdigit() or int(cap) < 1:
        raise ValueError(f"ScienceWorld split '{split}': the cap after @ must be a whole number of at least 1")
    return base, int(cap)


def parse_env_spec(env: str) -> str:
    """The simplifications an env name asks for: ``scienceworld`` -> ``easy`` (ETO's protocol);
    ``scienceworld:none`` -> none; ``scienceworld:openDoors,teleportAction`` -> those.

    Raises:
        ValueError: not a ScienceWorld env name, or an unknown simplification (the message lists them).
    """
    name, sep, rest = env.partition(":")
    if name != "scienceworld":
        raise ValueError(f"env '{env}' is not ScienceWorld")
    if not sep:
        return DEFAULT_SIMPLIFICATIONS
    if rest == "none":
        return ""
    parts = rest.split(",")
    bad = [p for p in parts if p not in SIMPLIFICATIONS]
    if bad or not rest:
        raise ValueError(f"env '{env}': unknown simplification(s) {bad or [rest]} (known: none, "
                         f"{', '.join(SIMPLIFICATIONS)})")
    if len(set(parts)) != len(parts) or parts != sorted(parts, key=SIMPLIFICATIONS.index):
        canonical = ",".join(sorted(set(parts), key=SIMPLIFICATIONS.index))
        raise ValueError(f"env '{env}': write the simplifications once each, in this order: scienceworld:{canonical} "
                         "(one protocol, one name: a run folder and its caches are keyed by it)")
    return ",".join(parts)


def load_scienceworld_tasks(split: str, task_types: list[str] | None = None) -> list[Task]:
    """The tasks of ``split`` (``train``, ``dev``, ``test``, or one of them capped per type: ``test@10``), sorted
    by task type (the wheel's order) then variation; ``task_types`` keeps those types only.

    Raises:
        ValueError: an unknown split or task type (the message lists the known ones).
    """
    base, cap = parse_split(split)
    unknown = sorted(set(task_types or ()) - set(TASK_TYPES))
    if unknown:
        raise ValueError(f"ScienceWorld has no task type(s) {unknown} (types: {', '.join(TASK_TYPES)})")
    jar = _jar_path()
    tasks: list[Task] = []
    for t in TASK_TYPES:
        if task_types and t not in task_types:
            continue
        for v in variations(t, base)[:cap]:
            tasks.append(Task(task_id=f"{base}/{t}/{v}", split=base, task_type=t, path=jar, index=len(tasks),
                              benchmark="scienceworld", meta={"variation": v}))
    return tasks


def task_of(task_id: str) -> tuple[str, str, int]:
    """``"test/boil/21"`` -> ``("test", "boil", 21)``.

    Raises:
        ValueError: not a ScienceWorld task id, or a task type or variation the split does not have.
    """
    parts = task_id.split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"task id '{task_id}': expected <split>/<task type>/<variation>, e.g. test/boil/21")
    split, t, v = parts[0], parts[1], int(parts[2])
    if v not in variations(t, split):
        raise ValueError(f"task id '{task_id}': {t} has no {split} variation {v} (its {split} variations: "
                         f"{_ranges(variations(t, split))})")
    return split, t, v


def _ranges(ids: list[int]) -> str:
    return f"{ids[0]}..{ids[-1]}" if ids and ids == list(range(ids[0], ids[-1] + 1)) else ", ".join(map(str, ids))


def _jar_path() -> str:
    import importlib.util

    spec = importlib.util.find_spec("scienceworld")
    if spec is None or not spec.submodule_search_locations:
        raise DataRootError("the `scienceworld` package is not installed: `pip install scienceworld==1.2.3` "
                            "(`make install` does)")
    return str(Path(list(spec.submodule_search_locations)[0]) / "scienceworld.jar")


@dataclass
class _Jvm:
    """One simulator process: the wheel's interface object and the JVM's process (stopped through its ``Popen``
    object, by its pid, whatever state the py4j gateway is in; a process already reaped is never signalled, so a
    reused pid is safe)."""

    sim: object
    pid: int
    loaded: bool = False  # a task has been loaded into it

    def stop(self, grace_s: float = 5.0, polite: bool = True) -> None:
        """Stop the JVM: ask it to shut down (``polite``; not a hung one, which would not answer), then terminate
        it, then kill it."""
        gateway = self.sim._gateway
        proc = gateway.java_process
        try:
            if polite and proc.poll() is None:
                self.sim.close()
            else:  # a dead or hung JVM: nothing to tell it, only the callback server's thread to stop here
                gateway.shutdown_callback_server(raise_exception=False)
        except Exception:  # noqa: BLE001 - the gateway may be gone already; the process below is what counts
            pass
        try:
            proc.terminate()
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace_s)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.sim.close = lambda: None  # the wheel's __del__ closes again and would write to the dead JVM's pipe


def _timed_out(e: BaseException) -> bool:
    """Whether a py4j error comes of a read that timed out (py4j wraps it once or twice: ``cause``, ``__cause__``,
    ``__context__``)."""
    seen: set[int] = set()
    todo: list = [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, TimeoutError):
            return True
        todo += [getattr(x, "cause", None), x.__cause__, x.__context__]
    return False


@contextmanager
def _java_tool_options(options: tuple[str, ...]):
    """``JAVA_TOOL_OPTIONS`` with ``options`` added for a JVM started inside (the wheel starts its own: py4j's
    ``launch_gateway`` takes no options from it); the user's own options are kept, ours after them."""
    import os

    key = "JAVA_TOOL_OPTIONS"
    with _ENV_LOCK:  # two threads starting JVMs must not restore each other's value
        before = os.environ.get(key)
        os.environ[key] = " ".join([before, *options] if before else options)
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = before


_ENV_LOCK = threading.Lock()


_LIVE: "weakref.WeakSet[ScienceWorldEnv]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for env in list(_LIVE):
        env.close()


class ScienceWorldEnv:
    """One ScienceWorld task variation at a time, each in a fresh JVM (one started on first use, replaced at each
    later reset; ``fresh_jvm``).

    Args:
        max_steps: a cap on every task's step limit (:data:`STEP_LIMITS` per type); the limit an episode plays
            under is ``min(max_steps, STEP_LIMITS[type])``, set at :meth:`reset` (``self.max_steps``).
        simplifications: the wheel's simplification string (``easy``: ETO's protocol; ``""``: none).
        step_limits: False plays without the per-type limits (the gold paths, some longer than their type's
            limit, are replayed whole); ``max_steps``, when given, still caps.
        fresh_jvm: every :meth:`reset` after the first stops the JVM and loads the task into a fresh one (module
            docstring, *Determinism*: 1-2 s a task); False reuses one JVM, whose worlds then depend on what it
            loaded before.
    """

    name = "scienceworld"

    def __init__(self, max_steps: int | None = None, simplifications: str = DEFAULT_SIMPLIFICATIONS,
                 step_limits: bool = True, fresh_jvm: bool = True):
        self.cap = max_steps
        self.fresh_jvm = fresh_jvm
        self.step_limits = step_limits
        self.simplifications = simplifications
        self.max_steps = max(STEP_LIMITS.values()) if max_steps is None else max_steps
        self._jvm: _Jvm | None = None
        self._task: Task | None = None
        self._goal = ""
        self._steps = 0
        self._score = 0  # the simulator's current score (-100..100)
        self._best = 0  # the highest score of the episode (ETO's)
        self._done = False
        self._options: tuple[str, ...] = ()  # the numbers an ambiguity prompt offers (empty: none pending)
        self.plan: list[str] = []
        #: list the valid actions at every step (False: ``admissible_commands`` is empty, for a replay of a known
        #: action sequence that reads none)
        self.list_admissible = True
        #: seconds a simulator call may take before the JVM counts as hung (stopped; SimulatorDiedError)
        self.call_timeout_s = CALL_TIMEOUT_S
        _LIVE.add(self)

    # -- the simulator process -----------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The running JVM's process id (None before the first reset or after close)."""
        return self._jvm.pid if self._jvm else None

    def _sim(self):
        if self._jvm is None:
            java_version()
            import logging

            from scienceworld import ScienceWorldEnv as _Wheel

            # py4j logs every failed reconnection to a dead JVM with its traceback; SimulatorDiedError says it once
            logging.getLogger("py4j").setLevel(logging.CRITICAL)
            with _java_tool_options(JVM_OPTIONS):
                sim = _Wheel("", envStepLimit=10**6)  # our limit governs (self.max_steps)
            self._jvm = _Jvm(sim, sim._gateway.java_process.pid)
            # a call the JVM does not answer in call_timeout_s is a hung JVM: stopped, as a dead one is (py4j reads
            # without a timeout by default, so a hung simulator would block a worker for ever)
            client = sim._gateway._gateway_client
            client.gateway_parameters.read_timeout = self.call_timeout_s
            for conn in list(client.deque):  # the connections the wheel's start opened
                conn.socket.settimeout(self.call_timeout_s)
            self._check_constant_hash()
        return self._jvm.sim

    def _check_constant_hash(self) -> None:
        """Raise if the JVM runs without the constant identity hash (a ``_JAVA_OPTIONS`` or ``JDK_JAVA_OPTIONS``
        that overrides :data:`JVM_OPTIONS`, a JVM that is not HotSpot): its worlds would differ from one process to
        the next."""
        lang = self._jvm.sim._gateway.jvm.java.lang
        hashes = {int(lang.System.identityHashCode(lang.Object())) for _ in range(2)}
        if hashes != {1}:
            jvm, self._jvm = self._jvm, None
            jvm.stop()
            raise SimulatorError(
                "ScienceWorld's JVM ignored -XX:hashCode=2 (identity hashes vary), so a variation's world would "
                "change from one process to the next: unset _JAVA_OPTIONS / JDK_JAVA_OPTIONS where they set "
                "-XX:hashCode, or use a HotSpot JVM (OpenJDK 11+)")

    def _call(self, what: str, fn, *args):
        """``fn(*args)`` on the simulator; a dead JVM becomes :class:`SimulatorDiedError` (and is cleaned up)."""
        from py4j.protocol import Py4JError, Py4JJavaError

        import time

        t0 = time.monotonic()
        try:
            return fn(*args)
        except Py4JJavaError as e:  # the JVM is alive and threw: the input or the task, not the process
            task = self._task.task_id if self._task else "no task"
            raise SimulatorError(f"ScienceWorld's simulator failed during {what} of {task}: "
                                 f"{str(e.java_exception)[:300]}") from e
        except (Py4JError, ConnectionError, OSError, EOFError) as e:
            # py4j turns a read that timed out into a bare "error while calling": the clock says it
            hung = _timed_out(e) or time.monotonic() - t0 >= self.call_timeout_s * 0.99
            why = f"no answer in {self.call_timeout_s:g} s: hung" if hung else f"{type(e).__name__}: {str(e)[:200]}"
            if not hung and self._jvm is not None and self._jvm.sim._gateway.java_process.poll() is None and not \
                    isinstance(e, (ConnectionError, EOFError)):
                task = self._task.task_id if self._task else "no task"
                raise SimulatorError(f"ScienceWorld's simulator failed during {what} of {task} ({why})") from e
            dead = self._jvm
            self._jvm = None
            if dead is not None:
                dead.stop(polite=not hung)  # the py4j gateway's threads too, not only the JVM
            task = self._task.task_id if self._task else "no task"
            raise SimulatorDiedError(f"ScienceWorld's JVM stopped answering during {what} of {task} ({why}); "
                                     "the next reset starts a fresh one") from e

    def close(self) -> None:
        """Stop the JVM (by pid); a later :meth:`reset` starts another."""
        if self._jvm is not None:
            jvm, self._jvm = self._jvm, None
            jvm.stop()

    def __del__(self) -> None:  # a dropped env does not leave its JVM behind
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- the Protocol --------------------------------------------------------------------------------------------
    def tasks(self, split: str, task_types: list[str] | None = None) -> list[Task]:
        return load_scienceworld_tasks(split, task_types)

    def _load(self, task: Task, gold: bool) -> None:
        _, t, v = task_of(task.task_id)
        sim = self._sim()
        self._jvm.loaded = True  # even a load that fails may leave state behind: the next task gets a fresh JVM
        self._call("load", sim.load, t, v, self.simplifications, gold)

    def reset(self, task: Task, plan: bool = False) -> StepResult:
        """Load ``task``'s variation into the JVM and look around. With ``plan=True`` the simulator's gold action
        sequence is generated too (``self.plan``)."""
        self._task = task
        if self._jvm is not None and self._jvm.sim._gateway.java_process.poll() is not None:
            dead, self._jvm = self._jvm, None  # died between episodes: clean up, start another
            dead.stop()
        elif self._jvm is not None and self.fresh_jvm and self._jvm.loaded:
            used, self._jvm = self._jvm, None  # a variation's world depends on what its JVM loaded before
            used.stop()
        self._load(task, plan)
        server = self._sim().server
        self.plan = self._lines("gold path", server.getGoldActionSequence) if plan else []
        self._call("reset", server.reset)
        obs = self._call("reset", server.step, "look around")
        limit = STEP_LIMITS[task.task_type] if self.step_limits else 10**6
        self.max_steps = limit if self.cap is None else min(self.cap, limit)
        self._steps, self._score, self._best, self._done = 0, 0, 0, False
        desc = re.sub(r"^Task Description:\s*", "", str(self._call("reset", server.freeActionTaskDesc)).strip())
        self._goal = re.sub(r"^Your task is to\s+", "", desc)
        return self._result(f"{str(obs).strip()}\n\nYour task is to: {self._goal}", 0.0)

    def _lines(self, what: str, fn) -> list[str]:
        """A Java list of strings in one round trip (py4j fetches a list's elements one call each: a thousand
        valid actions took ~0.1 s a step that way)."""
        jlist = self._call(what, fn)
        joined = self._call(what, self._jvm.sim._gateway.jvm.java.lang.String.join, "\n", jlist)
        return [x for x in str(joined).split("\n") if x] if joined else []

    def admissible(self) -> tuple[str, ...]:
        """The simulator's valid action-object combinations now (deduplicated; ``reset task`` left out). After an
        ambiguous action ("Ambiguous request: Please enter the number ..."), the simulator reads a number next:
        the candidates are then the numbers of the options it lists (``0``, ``1`` ...)."""
        if self._options:
            return self._options
        seen: dict[str, None] = {}
        for a in self._lines("valid actions", self._jvm.sim.server.getValidActionObjectCombinations):
            a = " ".join(a.split())
            if a and a not in EXCLUDED_ACTIONS:
                seen.setdefault(a, None)
        return tuple(seen)

    def _result(self, obs: str, reward: float) -> StepResult:
        self._options = tuple(AMBIGUOUS_OPTION.findall(obs)) if obs.startswith(AMBIGUOUS) else ()
        won = self._best >= 100
        done = self._done or won or self._steps >= self.max_steps
        return StepResult(observation=obs.strip(), reward=reward, done=done, won=won,
                          admissible_commands=self.admissible() if self.list_admissible else ())

    def step(self, action: str) -> StepResult:
        if self._task is None or self._jvm is None:
            raise RuntimeError("step() before reset()")
        server = self._jvm.sim.server
        what = f"step {self._steps} ({action!r})"
        obs = str(self._call(what, server.step, action))
        self._steps += 1
        self._score = int(round(100 * float(self._call(what, server.getScore))))
        self._done = bool(self._call(what, server.getCompleted)) or self._score < 0
        gain = max(0, self._score - self._best)
        self._best += gain
        return self._result(obs, gain / 100.0)

    @property
    def score(self) -> int:
        """The episode's score so far: the highest the simulator reported (0-100)."""
        return self._best

    def goal(self) -> str:
        return self._goal

    def expert_plan(self, task: Task) -> list[str]:
        """The simulator's gold action sequence for ``task``; leaves the env at the task's start."""
        self.reset(task, plan=True)
        return self.plan
