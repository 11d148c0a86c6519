"""A refinement's parameters (AGMR Algorithm 1): the split and tasks, the agent, the retrieval heads, the backend of the reflector and refiner, the variant, and what its folder's identity is made of."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from workbench.attention.head_set import check_heads
from workbench.models.registry import DEFAULT_AGENT

__all__ = ["VARIANTS", "LEGACY_IDENTITY", "RefinementError", "RefineConfig", "saved_identity"]


VARIANTS = ("agmr", "no-agr")

#: What a refinement saved before a parameter existed did: its reflector always read the expert plan, on ALFWorld.
LEGACY_IDENTITY = {"reflector_sees_plan": True, "env": "alfworld", "task_types": []}
#: E.2's weak-utilization rule per benchmark (the paper's: relative for ALFWorld, a capped global threshold for SciWorld)
WEAK_RULES = {"alfworld": "relative", "scienceworld": "global_capped"}
#: the split refined when none is given (never the test split: ALFWorld's valid_seen; ScienceWorld's dev variations)
REFINE_SPLITS = {"alfworld": "valid_seen", "scienceworld": "dev@2"}


def saved_identity(saved: dict) -> dict:
    """A saved ``config.json``'s parameters, with what a refinement made before a parameter existed did."""
    return {**LEGACY_IDENTITY, **saved}


class RefinementError(ValueError):
    """An LLM stage's answer that cannot be applied (counted as an attempt; nothing is applied)."""


@dataclass(frozen=True)
class RefineConfig:
    """One refinement run.

    Attributes:
        split, tasks: the refinement tasks (valid_seen: the default agent was cloned on valid_train's games).
        task_types: only the split's tasks of these types (before ``tasks`` slices them); empty: every type.
        model, dtype: the agent.
        heads: the retrieval heads H that C averages; empty: the model's committed heads.
        backend, backend_args: the LLM stages' backend (``offline-alfworld``: the deterministic algorithms;
            ScienceWorld's: ``offline-scienceworld``).
        variant: ``agmr`` or ``no-agr`` (the reflector edits directly, no C).
        max_attempts: K, failure-branch attempts.
        reward_gain: a failure-branch edit is also accepted when the reward rises by this much.
        weak_rule: the success branch's weak-utilization rule (relative, global_capped, global).
        retriever: how m* is retrieved (as the Traj condition).
        max_steps: episode step limit.
        source: the base refined (a folder); None: the default memory base (valid_train expert trajectories).
        env: the benchmark (``alfworld``, ``scienceworld``); ``split``, ``weak_rule`` and ``max_steps`` left unset
            take its defaults (ALFWorld: valid_seen, relative, 50; ScienceWorld: dev@2, global_capped, its type
            limits). A ScienceWorld refinement needs an LLM backend (the offline algorithms are ALFWorld's) and is
            refused on test variations.
        reflector_sees_plan: show the reflector the refinement task's expert plan (its "Reference plan" field; the
            offline reflector then localises the error with the plan-tracking oracle). False, the default, is the
            paper's reflector, which sees the memory m* and the trajectory tau only. A refinement saved before this
            option existed read the plan (:data:`LEGACY_IDENTITY`).
    """

    split: str = None  # type: ignore[assignment]  # the benchmark's (REFINE_SPLITS)
    tasks: str = "all"
    model: str = DEFAULT_AGENT
    dtype: str = "float32"
    heads: tuple[tuple[int, int], ...] = ()
    backend: str = "offline-alfworld"
    backend_args: tuple[str, ...] = ()
    variant: str = "agmr"
    max_attempts: int = 3
    reward_gain: float = 0.3
    weak_rule: str = None  # type: ignore[assignment]  # the benchmark's (WEAK_RULES)
    retriever: str = "minilm"
    max_steps: int = None  # type: ignore[assignment]  # the benchmark's (50; ScienceWorld: its type limits)
    source: str | None = None
    reflector_sees_plan: bool = False
    env: str = "alfworld"
    task_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from workbench.envs.benchmarks import benchmark

        bench = benchmark(self.env)  # a clear error for an unknown benchmark
        name = self.env.partition(":")[0]
        for field, value in (("split", REFINE_SPLITS.get(name, "valid_seen")),
                             ("weak_rule", WEAK_RULES.get(name, "relative")), ("max_steps", bench.max_steps)):
            if getattr(self, field) is None:
                object.__setattr__(self, field, value)
        if name == "scienceworld":
            if self.split.partition("@")[0] == "test":
                raise ValueError(f"split {self.split}: AGMR refines on train or dev variations, never test (the "
                                 "refined base is evaluated on test)")
            if self.backend.startswith("offline-alfworld"):
                raise ValueError("a ScienceWorld refinement's reflector and refiner need an LLM (--backend "
                                 "llama-server, openai or local: `workbench list backends`) or ScienceWorld's own "
                                 "rules (--backend offline-scienceworld); offline-alfworld runs ALFWorld's")
        elif self.backend.startswith("offline-scienceworld"):
            raise ValueError(f"--backend offline-scienceworld answers a ScienceWorld refinement's stages, not "
                             f"{name}'s: use offline-alfworld or an LLM")
        types = () if self.task_types is None else self.task_types
        if isinstance(types, str) or not all(isinstance(t, str) for t in types):
            raise ValueError(f"task_types {self.task_types!r}: expected a list of task type names")
        object.__setattr__(self, "task_types", tuple(dict.fromkeys(types)))  # in the order given, once each
        unknown = sorted(set(self.task_types) - set(bench.task_types))
        if unknown:
            raise ValueError(f"task_types {unknown}: {self.env} has no such type (`workbench list task-types --env "
                             f"{name}`)")
        # integers only (a float 20.7 is refused, never truncated to 20), distinct; empty: the committed heads
        object.__setattr__(self, "heads", tuple(check_heads(self.heads, "refinement heads", required=False)))
        object.__setattr__(self, "backend_args", tuple(self.backend_args))
        if self.variant not in VARIANTS:
            raise ValueError(f"variant '{self.variant}': expected one of {', '.join(VARIANTS)}")
        if not isinstance(self.reflector_sees_plan, bool):
            raise ValueError(f"reflector_sees_plan {self.reflector_sees_plan!r}: expected true or false")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts {self.max_attempts}: expected at least 1")
        if self.weak_rule not in ("relative", "global_capped", "global"):
            raise ValueError(f"weak_rule '{self.weak_rule}': expected relative, global_capped or global")
        for kv in self.backend_args:
            if "=" not in kv:
                raise ValueError(f"backend argument '{kv}': expected KEY=VALUE")

    def identity(self) -> dict:
        d = asdict(self)
        d["heads"] = [list(h) for h in self.heads]
        d["backend_args"] = list(self.backend_args)
        d["task_types"] = list(self.task_types)
        return d
