"""A run's configuration: the tasks, the agent (model, dtype, decode) and the memory policy with its options; what a run folder's identity is made of."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workbench.agents.loop import check_decode
from workbench.agents.policy import POLICIES, build_policy, policy_options, predated_options
from workbench.envs.benchmarks import benchmark, load_tasks
from workbench.envs.base import Task
from workbench.envs.selection import NO_TASKS, parse_task_slice
from workbench.models.registry import DEFAULT_AGENT

__all__ = ["DTYPES", "OPTION_FIELDS", "RunConfig", "RunIdentity", "MAX_STEPS", "select_tasks", "policy_for",
           "check_policy_on_benchmark"]


DTYPES = ("float32", "bfloat16")
MAX_STEPS = 1000  # an episode's step limit at most (ALFWorld's own is 50)
MAX_SEED = 2**32 - 1


#: RunConfig fields that are memory-policy options (validated by the policy's own options model)
OPTION_FIELDS = ("budget", "ablation", "backend", "backend_args", "interval", "triggers", "memory_base", "window")


#: memory policies whose LLM stages speak one benchmark's language (ALFWorld's commands): refused elsewhere
ALFWORLD_ONLY_POLICIES = ("awm", "dc-rs")


@dataclass(frozen=True)
class RunConfig:
    """One batch run.

    Attributes:
        env: the benchmark (``workbench.envs.benchmarks``): alfworld, scienceworld (``scienceworld:none`` ...).
            ``split``, ``max_steps``, ``teacher_forcing`` and ``decode`` left unset take its defaults (ALFWorld:
            valid_unseen, 50, on, score; ScienceWorld: test@10, its longest type limit, off, constrained).
        split: task split (valid_unseen, valid_seen, valid_train; ScienceWorld: train, dev, test, test@10 ...).
        tasks: a Python-style slice of the split's sorted task list ("0:20", ":", "5") or "all".
        memory: memory policy name (none, icl, traj).
        model: model name or path for ``load_model``.
        retriever: retriever for ``traj`` (minilm, bm25).
        task_types: optional filter by short task type.
        teacher_forcing: also compute teacher-forced next-action accuracy on the tasks' expert plans.
        decode: ``score`` (likelihood over admissible commands), ``generate`` (Thought/Action mapped to an
            admissible command) or ``generate-verbatim`` (Thought/Action executed as written: ALFWorld answers an
            invalid command "Nothing happens."); see ``workbench.agents.loop.DECODES``.
        dtype: the model's weights and activations: ``float32`` or ``bfloat16`` (docs/guide/models.md: which
            batch runs use and why).
        teacher_forcing_tasks: the slice teacher forcing scores, when it is not ``tasks`` (teacher forcing is
            cheap and low-variance, so it often covers more tasks than the episodes).
        budget: the memory block's budget in o200k tokens (working-memory policies: arbiter, flat-recency,
            flat-retrieval; 500 when not given).
        ablation: a MemArbiter ablation (no-banks, no-signals, no-gate).
        backend: the LLM backend of a method's memory stages (arbiter: offline-alfworld when not given).
        backend_args: ``KEY=VALUE`` arguments of that backend (base_url=..., model=...).
        interval: the proactive memory agent runs at step 0 and every ``interval`` steps (1 when not given).
        triggers: its extra event triggers (failed, repeated, new-location).
        record_admissible: keep every step's admissible commands in the episode records (on-policy data).
        memory_base: the memory base folder icl / traj / awm read (e.g. one ``workbench refine`` wrote); None: the
            benchmark's default base (ALFWorld: valid_train expert trajectories; ScienceWorld: train@10 gold paths).
        window: how many recent steps the proactive memory agent reads (8 when not given: the authors' public
            configuration; run folders written before it was an option were played with 10).
    """

    out: str
    env: str = "alfworld"
    split: str = None  # type: ignore[assignment]  # the benchmark's default (valid_unseen; ScienceWorld: test@10)
    tasks: str = "0:20"
    memory: str = "traj"
    model: str = DEFAULT_AGENT  # agent v2; "smollm2-135m-alfworld" is v1, "smollm2-135m-instruct" the untrained model
    retriever: str = "minilm"
    max_steps: int = None  # type: ignore[assignment]  # the benchmark's default (50; ScienceWorld: its type limits)
    task_types: tuple[str, ...] = ()
    teacher_forcing: bool = None  # type: ignore[assignment]  # the benchmark's default (on; ScienceWorld: off)
    decode: str = None  # type: ignore[assignment]  # the benchmark's default (score; ScienceWorld: constrained)
    seed: int = 0
    dtype: str = "float32"
    teacher_forcing_tasks: str | None = None
    budget: int | None = None
    ablation: str | None = None
    backend: str | None = None
    backend_args: tuple[str, ...] = ()
    interval: int | None = None
    triggers: tuple[str, ...] = ()
    record_admissible: bool = False
    memory_base: str | None = None
    window: int | None = None

    @property
    def tf_tasks(self) -> str:
        """The slice teacher forcing covers."""
        return self.teacher_forcing_tasks or self.tasks

    def __post_init__(self) -> None:
        if not isinstance(self.env, str):
            raise ValueError(f"env {self.env!r}: expected a string")
        bench = benchmark(self.env)  # a clear error for an unknown env, naming the known ones
        for name in ("split", "max_steps", "teacher_forcing", "decode"):  # what the run leaves unset: the benchmark's
            if getattr(self, name) is None:
                object.__setattr__(self, name, bench.defaults[name])
        self._check_types()
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype '{self.dtype}': expected one of {', '.join(DTYPES)}")
        check_decode(self.decode)
        unknown = sorted(set(self.task_types) - set(bench.task_types))
        if unknown:
            raise ValueError(f"task_types {unknown}: {self.env} has no such type (types: {', '.join(bench.task_types)})")
        if self.env != "alfworld" and self.teacher_forcing:
            raise ValueError(f"env {self.env}: teacher forcing scores every admissible command of every expert step, "
                             "which ScienceWorld's thousand valid actions a step put out of reach; pass "
                             "--no-teacher-forcing (teacher_forcing: false)")
        if self.tasks.strip() == NO_TASKS and (not self.teacher_forcing or self.tf_tasks.strip() == NO_TASKS):
            raise ValueError("tasks 'none' plays no episode: it is a teacher-forcing-only run, so give "
                             "teacher_forcing_tasks (--teacher-forcing-tasks), e.g. 0:140:7, and leave teacher forcing on")
        for name in ("task_types", "backend_args", "triggers"):  # config.json stores them as lists
            object.__setattr__(self, name, tuple(getattr(self, name) or ()))
        self._validate_options()
        if self.memory_base is not None and not (Path(self.memory_base) / "entries.jsonl").exists():
            raise ValueError(f"--memory-base {self.memory_base}: no memory base there (no entries.jsonl); pass a "
                             "folder `workbench refine --base-out` wrote, or leave it out for the default base")

    def _check_types(self) -> None:
        """Each field of its type and in its range (``--max-steps 1e30`` or ``"50"`` from a file are errors)."""
        for name, lo, hi in (("max_steps", 1, MAX_STEPS), ("seed", 0, MAX_SEED)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} {v!r}: expected a whole number from {lo} to {hi}")
        for name in ("out", "env", "split", "tasks", "memory", "model", "retriever", "decode", "dtype"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} {getattr(self, name)!r}: expected a string")
        for name in ("teacher_forcing", "record_admissible"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} {getattr(self, name)!r}: expected true or false")
        for name in ("task_types", "backend_args", "triggers"):
            v = getattr(self, name)
            if isinstance(v, str) or not all(isinstance(x, str) for x in (v or ())):
                raise ValueError(f"{name} {v!r}: expected a list of strings" +
                                 (f" (e.g. [{v!r}])" if isinstance(v, str) else ""))

    @classmethod
    def from_identity(cls, out: str, identity: "RunIdentity | dict", **changes) -> "RunConfig":
        """The configuration a run folder's ``config.json`` ``run`` record names (its fields checked)."""
        ident = identity if isinstance(identity, RunIdentity) else RunIdentity.model_validate(identity)
        d = ident.model_dump() | changes
        return cls(out=out, **{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    def _validate_options(self) -> None:
        """The memory policy's own options model checks the options this run sets and fills in its defaults; the
        runner knows no policy's options (``workbench.agents.policy.POLICIES``)."""
        takes = policy_options(self.memory)  # a clear error for unknown policies
        given = {k: getattr(self, k) for k in OPTION_FIELDS if getattr(self, k) not in (None, ())}
        for opt in given:
            if opt not in takes:
                raise ValueError(f"--{opt.replace('_', '-')} does not apply to --memory {self.memory} "
                                 f"(it takes: {', '.join(t for t in takes if t != 'retriever') or 'no options'})")
        valid = POLICIES.validate(self.memory, given)
        for opt in OPTION_FIELDS:
            if opt in valid:
                value = valid[opt]
                object.__setattr__(self, opt, tuple(value) if isinstance(value, list) else value)
        check_policy_on_benchmark(self.env, self.memory, self.backend)

    @property
    def options(self) -> dict:
        """The memory policy's options as this run sets them (after its defaults)."""
        return {k: getattr(self, k) for k in policy_options(self.memory) if k != "retriever"}

    def policy_key(self) -> tuple:
        """What a policy built for this run depends on (a worker reuses one policy per key)."""
        return (self.env, self.memory, self.retriever, self.budget, self.ablation, self.backend, self.backend_args,
                self.interval, self.triggers, self.window, self.memory_base)  # env: its default memory base

    @property
    def method(self) -> str:
        """The memory condition as tables name it: ``arbiter/no-gate@500``, ``flat-recency@750``, ``traj``."""
        name = self.memory + (f"/{self.ablation}" if self.ablation else "")
        name += f"[{Path(self.memory_base).name}]" if self.memory_base else ""
        name += f"@{self.budget}" if self.budget is not None else ""
        name += f"/k={self.interval}" if self.interval not in (None, 1) else ""
        return name + (f"+{'+'.join(self.triggers)}" if self.triggers else "")

    def identity(self) -> dict:
        """The fields that must match for ``--resume`` to continue a run."""
        d = asdict(self)
        d.pop("out")
        d["task_types"] = list(d["task_types"])
        d["backend_args"] = list(d["backend_args"])
        d["triggers"] = list(d["triggers"])
        return d


class RunIdentity(BaseModel):
    """A run's identity as ``config.json`` stores it (``RunConfig.identity()``), read strictly: each field of its
    type and range; fields a folder predates take their defaults (a folder written before runs recorded their
    dtype was played in float32)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    env: str = "alfworld"
    split: str = Field("valid_unseen", min_length=1)
    tasks: str = Field("0:20", min_length=1)
    memory: str = Field("traj", min_length=1)
    model: str = Field(DEFAULT_AGENT, min_length=1)
    retriever: str = "minilm"
    max_steps: int = Field(50, ge=1, le=MAX_STEPS)
    task_types: list[str] = []
    teacher_forcing: bool = True
    decode: str = "score"
    seed: int = Field(0, ge=0, le=MAX_SEED)
    dtype: Literal["float32", "bfloat16"] = "float32"
    teacher_forcing_tasks: str | None = None
    budget: int | None = Field(None, ge=1, le=1_000_000)
    ablation: str | None = None
    backend: str | None = None
    backend_args: list[str] = []
    interval: int | None = Field(None, ge=1, le=MAX_STEPS)
    triggers: list[str] = []
    record_admissible: bool = False
    memory_base: str | None = None
    window: int | None = Field(None, ge=1, le=MAX_STEPS)

    @model_validator(mode="before")
    @classmethod
    def _predated(cls, data: Any) -> Any:
        """An option the folder predates reads as the value it was played with (``PolicyOptions.PREDATES``)."""
        if isinstance(data, dict) and isinstance(memory := data.get("memory", "traj"), str):
            missing = {k: v for k, v in predated_options(memory).items() if k not in data}
            return data | missing if missing else data
        return data


assert set(RunIdentity.model_fields) == {f.name for f in fields(RunConfig)} - {"out"}, "RunIdentity != RunConfig"


def check_policy_on_benchmark(env: str, memory: str, backend: object = None) -> None:
    """Refuse a memory policy that cannot play on benchmark ``env`` as configured (a batch run and a live session
    check the same): an ALFWorld-only baseline elsewhere, ALFWorld's offline stages on another benchmark's text, the
    ScienceWorld refinement backend as a policy's.

    Args:
        backend: the policy's ``backend`` option after its defaults (None: it takes none).

    Raises:
        ValueError: naming the option and what to give instead.
    """
    if isinstance(backend, str) and backend.startswith("offline-scienceworld"):
        raise ValueError(f"--backend offline-scienceworld answers AGMR's refinement stages on ScienceWorld "
                         f"(`workbench refine --env scienceworld`), not --memory {memory}'s: give it an LLM "
                         "(`workbench list backends`)")
    if env != "alfworld" and memory in ALFWORLD_ONLY_POLICIES:
        raise ValueError(f"--memory {memory} on {env}: AGMR Table 1's {memory} baseline is built for "
                         "ALFWorld (its prompts teach ALFWorld's command language); on this benchmark play none, "
                         "icl, traj (over a refined base for AGMR), arbiter or proactive")
    if env != "alfworld" and isinstance(backend, str) and backend.startswith("offline-alfworld"):
        raise ValueError(f"--memory {memory} on {env}: its LLM stages would run {backend}, "
                         "ALFWorld's deterministic algorithms, on another benchmark's text; give it an LLM "
                         "(--backend openai --backend-arg base_url=http://HOST:PORT/v1, or --backend local: "
                         "`workbench list backends`)")


def select_tasks(cfg: RunConfig, spec: str | None = None) -> list[Task]:
    """The tasks of ``cfg`` (its ``tasks`` slice, or ``spec``), in the split's sorted order."""
    tasks = load_tasks(cfg.env, cfg.split, list(cfg.task_types) or None)
    return [tasks[i] for i in parse_task_slice(spec or cfg.tasks, len(tasks))]


def policy_for(cfg: "RunConfig"):
    """The memory policy of run ``cfg`` (over its benchmark's default memory base when it names none)."""
    options = cfg.options
    if "memory_base" in options and options["memory_base"] is None and cfg.env != "alfworld":
        options = options | {"memory_base": str(benchmark(cfg.env).default_memory_base(cfg.env))}
    return build_policy(cfg.memory, cfg.retriever, **options)
