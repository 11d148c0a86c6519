"""The benchmarks a run can name (``--env``): one registry from an env name to its environment and its tasks.

An env name is a benchmark, optionally with options after a colon that the benchmark reads (``scienceworld`` plays
ETO's ``easy`` simplifications, ``scienceworld:none`` none of them); the whole name is what a run folder records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from workbench.envs.base import Environment, Task
from workbench.registry import Registry

__all__ = ["Benchmark", "BENCHMARKS", "benchmark", "make_env", "load_tasks", "failure_check", "default_max_steps", "task_types"]


@dataclass(frozen=True)
class Benchmark:
    """What the runner needs of a benchmark.

    Attributes:
        make: ``make(env_name, max_steps)`` -> a fresh :class:`Environment` (max_steps: the run's cap; None: the
            benchmark's own limits).
        tasks: ``tasks(env_name, split, task_types)`` -> the split's tasks in their sorted order.
        max_steps: the step limit a run uses when it names none (a benchmark with per-type limits gives the
            largest, so that its own limits govern).
        task_types: the short task types ``--task-types`` accepts.
        splits: the splits a run can name (documentation and ``--help``; the loader checks).
        default_memory_base: ``default_memory_base(env_name)`` -> the folder of the memory base a run reads when
            it names none (None: the memory policies' own default, ALFWorld's valid_train experts).
    """

    make: Callable[[str, int | None], Environment]
    tasks: Callable[[str, str, list[str] | None], list[Task]]
    max_steps: int
    task_types: tuple[str, ...]
    splits: tuple[str, ...]
    default_memory_base: Callable[[str], str] | None = None
    check: Callable[[str], object] | None = None  # check(env_name): a clear ValueError for options it does not take
    instructions: str | None = None  # the action prompt's system text (None: the prompts' default, ALFWorld's)
    max_prompt_tokens: int | None = None  # the action prompt's budget (None: the model's context)
    history_chunk: int = 1  # how many of the oldest history steps an overflowing prompt drops at a time
    is_failure: Callable[[str], bool] | None = None  # whether an observation says the action did nothing
    default_split: str = "valid_unseen"
    default_decode: str = "score"
    teacher_forcing: bool = True  # whether a run teacher-forces unless told otherwise

    @property
    def defaults(self) -> dict:
        """What a run of this benchmark leaves unset takes: split, max_steps, teacher_forcing, decode."""
        return {"split": self.default_split, "max_steps": self.max_steps, "teacher_forcing": self.teacher_forcing,
                "decode": self.default_decode}


def _alfworld() -> Benchmark:
    from workbench.envs.alfworld import MAX_STEPS, ALFWorldEnv, load_alfworld_tasks
    from workbench.envs.alfworld_text import is_failure
    from workbench.envs.normalize import TASK_TYPE_PREFIXES

    def check(env: str) -> None:
        if env != "alfworld":
            raise ValueError(f"env '{env}': ALFWorld takes no options (write alfworld)")

    def make(env: str, max_steps: int | None) -> Environment:
        check(env)
        return ALFWorldEnv(max_steps=max_steps or MAX_STEPS)

    return Benchmark(make=make, tasks=lambda env, split, types: load_alfworld_tasks(split, types),
                     max_steps=MAX_STEPS, task_types=tuple(dict.fromkeys(TASK_TYPE_PREFIXES.values())),
                     splits=("valid_train", "valid_seen", "valid_unseen"), check=check, is_failure=is_failure)


def _scienceworld() -> Benchmark:
    from workbench.envs import scienceworld as sw

    def make(env: str, max_steps: int | None) -> Environment:
        return sw.ScienceWorldEnv(max_steps=max_steps, simplifications=sw.parse_env_spec(env))

    def tasks(env: str, split: str, types: list[str] | None) -> list[Task]:
        sw.parse_env_spec(env)
        return sw.load_scienceworld_tasks(split, types)

    def base(env: str) -> str:
        from workbench.envs.scienceworld_experts import default_scienceworld_base

        return str(default_scienceworld_base(sw.parse_env_spec(env)).root)

    return Benchmark(make=make, tasks=tasks, max_steps=max(sw.STEP_LIMITS.values()), task_types=sw.TASK_TYPES,
                     splits=("train", "dev", "test", "test@10"), default_memory_base=base,
                     check=sw.parse_env_spec, instructions=sw.INSTRUCTIONS, default_split="test@10",
                     max_prompt_tokens=sw.PROMPT_TOKENS, history_chunk=sw.HISTORY_CHUNK, is_failure=sw.is_refusal,
                     # a thousand valid actions a step: written along their trie (benchmarks/scienceworld_decode.py);
                     # teacher forcing would score them all at every expert step
                     default_decode="constrained", teacher_forcing=False)


BENCHMARKS: Registry[Callable[[], Benchmark]] = Registry("benchmark")
BENCHMARKS.register("alfworld", _alfworld, doc="ALFWorld (TextWorld games): 6 task types, 50 steps")
BENCHMARKS.register("scienceworld", _scienceworld,
                    doc="ScienceWorld (the scienceworld wheel's JVM): 30 task types, ETO's step limits per type")


def benchmark(env: str) -> Benchmark:
    """The benchmark of env name ``env`` (``alfworld``, ``scienceworld``, ``scienceworld:none`` ...).

    Raises:
        ValueError: no such benchmark (the message lists them).
    """
    if not isinstance(env, str):
        raise ValueError(f"env {env!r}: expected a string")
    bench = BENCHMARKS.get(env.partition(":")[0])()
    if bench.check is not None:
        bench.check(env)
    return bench


def make_env(env: str, max_steps: int | None = None) -> Environment:
    """A fresh environment of ``env`` capped at ``max_steps`` (None: the benchmark's own limits)."""
    return benchmark(env).make(env, max_steps)


def load_tasks(env: str, split: str, task_types: list[str] | None = None) -> list[Task]:
    """The tasks of ``env``'s ``split`` (optionally of ``task_types`` only), in the split's sorted order."""
    return benchmark(env).tasks(env, split, task_types)


def failure_check(env: str) -> Callable[[str], bool]:
    """How ``env`` says an action did nothing: ``check(observation) -> bool`` (ALFWorld's "Nothing happens.";
    ScienceWorld's refusals). The memory methods' failure signals read it (``Task.benchmark``)."""
    check = benchmark(env).is_failure
    if check is None:
        raise ValueError(f"benchmark '{env}' says nothing of how it answers a failed action (Benchmark.is_failure)")
    return check


def default_max_steps(env: str) -> int:
    """The step limit a run of ``env`` uses when it names none."""
    return benchmark(env).max_steps


def task_types(env: str) -> tuple[str, ...]:
    """The short task types of ``env``."""
    return benchmark(env).task_types
