"""Run configurations and the run folder they write; ``run`` plays one through the driver.

``out/config.json``        what ran (parameters, dtype included; package versions, git commit)
``out/trajectories.jsonl`` one Trajectory per finished episode, appended and fsynced as it finishes (in
                           completion order; rewritten in task order when the run completes)
``out/teacher_forced.json`` teacher-forced accuracy on the tasks' expert plans (when asked)
``out/metrics.json``       episode metrics (+ teacher-forced accuracy)

A kill mid-episode loses only that unfinished episode (it was never written); ``resume=True`` skips every
task already in trajectories.jsonl (and every task already teacher-forced, see ``workbench.eval.driver``), so
no finished episode is lost and none runs twice. Whichever executor plays the jobs (in-process, ``--workers
N`` local processes, a Ray cluster) the folder is the same files.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm.auto import tqdm

from workbench.agents.loop import Agent, check_decode
from workbench.agents.policy import POLICIES, build_policy, policy_options, replay
from workbench.agents.teacher_forcing import teacher_forced_accuracy
from workbench.envs.alfworld import load_alfworld_tasks
from workbench.envs.base import Task
from workbench.envs.memory_base import expert_trajectories_for
from workbench.envs.selection import NO_TASKS, parse_task_slice
from workbench.eval.metrics import by_task_type, episode_metrics
from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import (
    Trajectory,
    atomic_write_text,
    iter_jsonl_dicts,
)
from workbench.models.adapters import model_adapter_hash as _adapter_hash
from workbench.models.registry import DEFAULT_AGENT
from workbench.provenance import versions

__all__ = ["RunConfig", "DTYPES", "select_tasks", "run", "load_run", "teacher_forced_for", "teacher_forced_part", "combine_teacher_forced", "expert_for", "write_run_config", "batch_metrics", "check_resume", "build_policy", "policy_for", "adopt", "adopt_episodes", "adopt_same_memory", "adopt_runs", "ADOPT_IGNORES", "identity_diff"]

DTYPES = ("float32", "bfloat16")
#: RunConfig fields that are memory-policy options (validated by the policy's own options model)
OPTION_FIELDS = ("budget", "ablation", "backend", "backend_args", "interval", "triggers", "memory_base")


@dataclass(frozen=True)
class RunConfig:
    """One batch run.

    Attributes:
        split: task split (valid_unseen, valid_seen, valid_train).
        tasks: a Python-style slice of the split's sorted task list ("0:20", ":", "5") or "all".
        memory: memory policy name (none, icl, traj).
        model: model name or path for ``load_model``.
        retriever: retriever for ``traj`` (minilm, bm25).
        task_types: optional filter by short task type.
        teacher_forcing: also compute teacher-forced next-action accuracy on the tasks' expert plans.
        decode: ``score`` (likelihood over admissible commands), ``generate`` (Thought/Action mapped to an
            admissible command) or ``generate-verbatim`` (Thought/Action executed as written: ALFWorld answers an
            invalid command "Nothing happens."); see ``workbench.agents.loop.DECODES``.
        dtype: the model's weights and activations: ``float32`` or ``bfloat16`` (see the README for which
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
            default base (valid_train expert trajectories).
    """

    out: str
    env: str = "alfworld"
    split: str = "valid_unseen"
    tasks: str = "0:20"
    memory: str = "traj"
    model: str = DEFAULT_AGENT  # agent v2; "smollm2-135m-alfworld" is v1, "smollm2-135m-instruct" the untrained model
    retriever: str = "minilm"
    max_steps: int = 50
    task_types: tuple[str, ...] = ()
    teacher_forcing: bool = True
    decode: str = "score"
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

    @property
    def tf_tasks(self) -> str:
        """The slice teacher forcing covers."""
        return self.teacher_forcing_tasks or self.tasks

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype '{self.dtype}': expected one of {', '.join(DTYPES)}")
        check_decode(self.decode)
        if self.tasks.strip() == NO_TASKS and (not self.teacher_forcing or self.tf_tasks.strip() == NO_TASKS):
            raise ValueError("tasks 'none' plays no episode: it is a teacher-forcing-only run, so give "
                             "teacher_forcing_tasks (--teacher-forcing-tasks), e.g. 0:140:7, and leave teacher forcing on")
        for name in ("task_types", "backend_args", "triggers"):  # config.json stores them as lists
            object.__setattr__(self, name, tuple(getattr(self, name) or ()))
        self._validate_options()
        if self.memory_base is not None and not (Path(self.memory_base) / "entries.jsonl").exists():
            raise ValueError(f"--memory-base {self.memory_base}: no memory base there (no entries.jsonl); pass a "
                             "folder `workbench refine --base-out` wrote, or leave it out for the default base")

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

    @property
    def options(self) -> dict:
        """The memory policy's options as this run sets them (after its defaults)."""
        return {k: getattr(self, k) for k in policy_options(self.memory) if k != "retriever"}

    def policy_key(self) -> tuple:
        """What a policy built for this run depends on (a worker reuses one policy per key)."""
        return (self.memory, self.retriever, self.budget, self.ablation, self.backend, self.backend_args,
                self.interval, self.triggers, self.memory_base)

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


def select_tasks(cfg: RunConfig, spec: str | None = None) -> list[Task]:
    """The tasks of ``cfg`` (its ``tasks`` slice, or ``spec``), in the split's sorted order."""
    if cfg.env != "alfworld":
        raise ValueError(f"env '{cfg.env}' is not available (available: alfworld)")
    tasks = load_alfworld_tasks(cfg.split, list(cfg.task_types) or None)
    return [tasks[i] for i in parse_task_slice(spec or cfg.tasks, len(tasks))]


def model_adapter_hash(model: str) -> str | None:
    return _adapter_hash(model)


def identity_diff(old: dict, new: dict, ignore: tuple[str, ...] = ()) -> dict:
    """The run parameters that differ between two identities, ``{key: (old, new)}``. A memory base is compared by
    content, not by path (its digest is checked apart, see :func:`check_resume`): the same refined base read
    through a relative path by a sweep and through an absolute one by a notebook, or from another checkout, is
    the same run."""
    skip = {*ignore, *(("memory_base",) if old.get("memory_base") and new.get("memory_base") else ())}
    return {k: (old.get(k), v) for k, v in new.items() if k not in skip and old.get(k) != v}


def check_resume(cfg: RunConfig, resume: bool) -> set[str]:
    """The task ids ``cfg.out`` already holds episodes of; refuses (before anything is written) a folder holding
    a run without ``resume``, or a run of other parameters (a folder written before runs recorded their
    dtype was played in float32)."""
    out = Path(cfg.out)
    cfg_path, rows = out / "config.json", out / "trajectories.jsonl"
    if cfg_path.exists():
        try:
            # fields added since a folder was written take their defaults (e.g. dtype: float32)
            saved = json.loads(cfg_path.read_text())
            old = RunConfig(out="").identity() | saved.get("run", {})
        except (json.JSONDecodeError, AttributeError) as e:
            raise ValueError(f"{cfg_path}: not a run config ({e}); move it away or use a new --out") from None
        if not resume:
            if rows.exists() and rows.stat().st_size:
                raise FileExistsError(f"{out} already holds a run: pass --resume to continue it, or a new --out")
        elif diff := identity_diff(old, cfg.identity()):
            raise ValueError(f"{cfg_path}: --resume with different parameters {diff}; use a new --out")
        if resume and (then := saved.get("model_adapter")) and then != (now := model_adapter_hash(cfg.model)):
            raise ValueError(f"{cfg_path}: --resume, but the adapter of model {cfg.model} changed since this run "
                             f"began ({then} -> {now}: it was retrained); its episodes would mix two agents: "
                             "evaluate it in a new --out")
        if resume and cfg.memory_base and (then := saved.get("memory_base_digest")):
            now = memory_base_digest(cfg)
            if now != then:
                raise ValueError(f"{cfg_path}: --resume, but the memory base {cfg.memory_base} changed since this run "
                                 f"began (digest {then} -> {now}: a refinement committed or rolled back an entry); "
                                 "its episodes would mix two bases: evaluate the base in a new --out")
    return {d["task_id"] for d in iter_jsonl_dicts(rows)} if resume else set()


# what one task's episode does not depend on: which other tasks the run plays, and its teacher forcing
ADOPT_IGNORES = ("tasks", "teacher_forcing", "teacher_forcing_tasks")


def adopt_episodes(cfg: RunConfig, source: str | Path) -> list[str]:
    """Copy into ``cfg.out`` the episodes that the run folder ``source`` already played and ``cfg`` would play.

    An episode depends on the run's parameters except :data:`ADOPT_IGNORES` (teacher forcing is scored apart),
    so a notebook whose Traj row is the Traj run of notebook 01 on the same tasks, model, dtype and step limit
    reads those episodes instead of playing them again. Only the tasks of ``cfg``'s slice that ``cfg.out`` lacks
    are copied; ``run``/``drive`` with ``resume=True`` then plays the rest. ``config.json`` records where the
    episodes came from (``adopted``: the source folder relative to ``cfg.out``, the number of episodes, the
    versions they were played with), and the trajectories file is rewritten atomically, so a kill leaves the
    folder as it was or with every episode copied.

    Returns:
        The task ids adopted, in the source's order (empty: ``source`` holds none that ``cfg.out`` lacks).

    Raises:
        FileNotFoundError: ``source`` holds no run (no ``config.json``).
        ValueError: ``source`` was played with other parameters (the keys named), another adapter under the
            model's name, or another state of the memory base; or ``cfg.out`` holds a run of other parameters.
            Nothing is written then.
    """
    src = Path(source)
    saved, theirs = _source_run(src)
    if diff := identity_diff(theirs, cfg.identity(), ADOPT_IGNORES):
        raise ValueError(f"{src}: played with other parameters than {cfg.out} {diff}; its episodes are not this "
                         "run's")
    _check_same_agent(cfg, src, saved)
    if cfg.memory_base and saved.get("memory_base_digest") != memory_base_digest(cfg):
        raise ValueError(f"{src}: played over another state of the memory base {cfg.memory_base}")
    done = check_resume(cfg, resume=True)  # refuses a folder of other parameters before anything is written
    wanted = {t.task_id for t in select_tasks(cfg)} - done
    adopted = [(tid, line) for tid, line in _episode_lines(src / "trajectories.jsonl") if tid in wanted]
    _write_adopted(cfg, src, saved, adopted)
    return [tid for tid, _ in adopted]


def adopt_same_memory(cfg: RunConfig, source: str | Path) -> list[str]:
    """Copy into ``cfg.out`` the episodes of ``source``, a run of the same parameters but for the memory policy's
    (:data:`SAME_MEMORY_MAY_DIFFER`: another memory base, another budget, a proactive memory agent beside ReAct's
    none...), on which ``cfg``'s policy shows the agent exactly the same memory: replayed along the episode's own
    history, its memory block (pieces, P_t, reminder, entry) equals the source policy's at every step. Each step's
    policy record is ours (a MemArbiter block records the budget it was assembled under; the decision's record
    depends on the prompt alone).

    The agent decides from its prompt alone and the environment answers an action deterministically, so such an
    episode *is* ``cfg``'s episode of that task: played again on the same machine it would be the same, bit for
    bit. A refined base changes a few entries (AGMR: 9 of 200), so most test tasks retrieve an unchanged one; their
    Traj episodes are the refined base's, and the comparison of the two rows is the refinement's effect alone,
    not bfloat16 kernels differing between the machines the rows were played on. Tasks whose memory differs at
    some step are left for ``run``/``drive`` (``resume=True``) to play. ``config.json`` records it (``adopted``,
    ``rule: same memory``).

    Returns:
        The task ids adopted.

    Raises:
        FileNotFoundError: ``source`` holds no run.
        ValueError: ``source`` differs in more than the memory base (and :data:`ADOPT_IGNORES`), was played by
            another adapter or over a base that changed since, or ``cfg.out`` holds a run of other parameters.
            Nothing is written then.
    """
    from dataclasses import replace

    src = Path(source)
    saved, theirs = _source_run(src)
    if diff := identity_diff(theirs, cfg.identity(), (*ADOPT_IGNORES, *SAME_MEMORY_MAY_DIFFER)):
        raise ValueError(f"{src}: played with other parameters than {cfg.out} {diff} (only the memory policy "
                         "and its parameters may differ)")
    _check_same_agent(cfg, src, saved)
    theirs_cfg = replace(cfg, **{k: theirs.get(k) for k in SAME_MEMORY_MAY_DIFFER})
    if theirs_cfg.memory_base and saved.get("memory_base_digest") != memory_base_digest(theirs_cfg):
        raise ValueError(f"{src}: its memory base {theirs_cfg.memory_base} changed since it was played; its "
                         "episodes cannot be compared with today's base")
    done = check_resume(cfg, resume=True)
    tasks = {t.task_id: t for t in select_tasks(cfg) if t.task_id not in done}
    ours, other = policy_for(cfg), policy_for(theirs_cfg)
    adopted = []
    for tid, line in _episode_lines(src / "trajectories.jsonl"):
        if tid in tasks:
            traj = Trajectory.model_validate_json(line)
            records = _same_memory(ours, other, tasks[tid], traj)
            if records is not None:
                adopted.append((tid, _with_records(line, traj, records, ours.name)))
    _write_adopted(cfg, src, saved, adopted, rule="same memory")
    return [tid for tid, _ in adopted]


def adopt(cfg: RunConfig, source: str | Path) -> tuple[list[str], bool]:
    """:func:`adopt_episodes` from a run of the same memory base and budget as ``cfg``, else
    :func:`adopt_same_memory`; returns (the task ids adopted, whether by the same-memory rule) -- what
    ``workbench run --adopt-from`` does."""
    _, theirs = _source_run(Path(source))
    same = not set(identity_diff(theirs, cfg.identity())) & set(SAME_MEMORY_MAY_DIFFER)
    return (adopt_episodes if same else adopt_same_memory)(cfg, source), not same


# what may differ between a run and the one it adopts same-memory episodes from: the memory policy and its own
# parameters (an episode depends on them only through the memory the policy puts in the prompts)
SAME_MEMORY_MAY_DIFFER = ("memory", "memory_base", "budget", "ablation", "retriever", "backend", "backend_args",
                          "interval", "triggers")


def _block_key(block) -> tuple:
    """What of a memory block reaches the prompt (``workbench.agents.loop.build_prompt``)."""
    return (block.layout, block.pieces, block.working_memory, block.reminder, block.reminder_label,
            block.entry.entry_id if block.entry else None)


def _same_memory(ours, other, task: Task, traj: Trajectory) -> list[tuple[dict, dict]] | None:
    """If two policies put the same memory in the prompt at every step of ``traj`` (its own history, as the loop
    feeds it), each step's (our record, their record) -- what each policy logs beside the prompt, e.g. the
    budget a MemArbiter block was assembled under; else None."""
    records = []
    for (*_, a), (*_, b) in zip(replay(ours, task, traj), replay(other, task, traj)):
        if _block_key(a) != _block_key(b):
            return None
        records.append((a.record, b.record))
    return records


def _with_records(line: str, traj: Trajectory, records: list[tuple[dict, dict]], policy: str) -> str:
    """The episode ``line`` with each step's policy record replaced by ours and the policy's name ours (the line
    itself when both are the same): the decision part of a step's record depends on the prompt alone, the policy
    part is what our policy logs."""
    if all(a == b for a, b in records) and traj.meta.get("memory_policy") == policy:
        return line
    steps = [{**{k: v for k, v in step.items() if k not in theirs}, **ours}
             for step, (ours, theirs) in zip(traj.meta["steps"], records)]
    return traj.model_copy(update={"meta": {**traj.meta, "memory_policy": policy, "steps": steps}}).model_dump_json()


def _source_run(src: Path) -> tuple[dict, dict]:
    """(config.json, its run identity with today's defaults) of a run folder to adopt from."""
    try:
        saved = json.loads((src / "config.json").read_text())
        return saved, RunConfig(out="").identity() | saved.get("run", {})
    except FileNotFoundError:
        raise FileNotFoundError(f"{src}: no run folder (no config.json) to adopt episodes from") from None
    except (json.JSONDecodeError, AttributeError) as e:
        raise ValueError(f"{src / 'config.json'}: not a run config ({e})") from None


def _check_same_agent(cfg: RunConfig, src: Path, saved: dict) -> None:
    if (then := saved.get("model_adapter")) != (now := model_adapter_hash(cfg.model)):
        raise ValueError(f"{src}: played by adapter {then} of model {cfg.model}, which is now {now} (retrained)")


def _write_adopted(cfg: RunConfig, src: Path, saved: dict, adopted: list[tuple[str, str]],
                   rule: str | None = None) -> None:
    """Append ``adopted`` (task id, line) to ``cfg.out`` with the provenance in ``config.json`` (atomically)."""
    if not adopted:
        return
    out = Path(cfg.out)
    write_run_config(cfg)
    record = json.loads((out / "config.json").read_text())
    rows = out / "trajectories.jsonl"
    present = _episode_lines(rows)  # the lines as they are (a torn last one dropped)
    kept = [line for _, line in present]
    source_rel = os.path.relpath(src.resolve(), out.resolve())  # relative to this folder: the pair moves together
    # config.json is written before the trajectories: a kill between the two leaves a record whose episodes are
    # not in the file; it is dropped here, so a rerun records that adoption once. (Records written before the
    # task ids were kept are taken as they are.)
    have = {tid for tid, _ in present}
    earlier = [r for r in record.get("adopted", []) if "tasks" not in r or set(r["tasks"]) <= have]
    record["adopted"] = [*earlier, {"source": source_rel, "episodes": len(adopted),
                                    **({"rule": rule} if rule else {}),
                                    "tasks": [tid for tid, _ in adopted],
                                    "versions": saved.get("versions"),
                                    # where the source's own episodes came from, if adopted
                                    **({"via": [{k: v for k, v in r.items() if k != "tasks"} for r in saved["adopted"]]}
                                       if saved.get("adopted") else {})}]
    atomic_write_text(out / "config.json", json.dumps(record, indent=1))
    atomic_write_text(rows, "".join(line + "\n" for line in kept + [line for _, line in adopted]))


def _episode_lines(path: Path) -> list[tuple[str, str]]:
    """(task id, the line as written) of each episode in a ``trajectories.jsonl``; a torn last line (a kill
    mid-append) is skipped, as readers skip it."""
    if not path.exists():
        return []
    lines = [ln for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()]
    out = []
    for i, line in enumerate(lines):
        try:
            out.append((json.loads(line)["task_id"], line))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}: line {i + 1}: not an episode record ({e}); the file is damaged") from None
    return out


def adopt_runs(cfgs: list[RunConfig], root: str | Path) -> dict[str, str]:
    """:func:`adopt_episodes` for each configuration from ``root/<model>/<condition>`` (the last two parts of its
    ``out``), where that folder holds a run: e.g. notebook 04's ``none``, ``icl`` and ``traj`` rows from notebook
    01's runs. A source of other parameters is not an error here (it is simply not this run's episodes).

    Returns:
        ``cfg.out`` -> what happened (``"12 episodes adopted from ..."``, ``"nothing to adopt ..."`` or why not),
        for the configurations that had a folder under ``root``.
    """
    from workbench.eval.sweep_status import refuse_live_folders

    refuse_live_folders(c.out for c in cfgs)
    done = {}
    for cfg in cfgs:
        src = Path(root) / Path(cfg.out).parent.name / Path(cfg.out).name
        if not (src / "config.json").exists():
            continue
        try:
            ids = adopt_episodes(cfg, src)
            done[cfg.out] = (f"{len(ids)} episode{'s' * (len(ids) != 1)} adopted from {src}" if ids
                             else f"nothing to adopt from {src} (it holds none this run lacks)")
        except ValueError as e:
            done[cfg.out] = f"not adopted: {e}"
    return done


def memory_base_digest(cfg: RunConfig) -> str | None:
    """The content hash of the memory base ``cfg`` reads (None: the default base, which no run edits)."""
    return MemoryBase(cfg.memory_base).digest() if cfg.memory_base else None


def write_run_config(cfg: RunConfig) -> None:
    """``cfg.out/config.json``: the run's identity (what ``--resume`` must match) and the package versions."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"run": cfg.identity(), "versions": versions()}
    # a run resumed under other versions (a later commit, a package upgrade) keeps those it was played with before
    try:
        old = json.loads((out / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        old = {}
    earlier = [v for v in [*old.get("earlier_versions", []), old.get("versions")] if v]
    earlier = [v for i, v in enumerate(earlier) if v != record["versions"] and v not in earlier[:i]]
    if earlier:
        record["earlier_versions"] = earlier
    if old.get("adopted"):  # episodes copied from another run folder (adopt_episodes) keep their provenance
        record["adopted"] = old["adopted"]
    if (adapter := model_adapter_hash(cfg.model)) is not None:  # which weights under the model's name (ditto)
        record["model_adapter"] = adapter
    if cfg.memory_base:  # which state of an editable base the episodes read (resume refuses another)
        record["memory_base_digest"] = memory_base_digest(cfg)
    atomic_write_text(out / "config.json", json.dumps(record, indent=1))


def batch_metrics(trajs: list[Trajectory]) -> dict:
    """What ``metrics.json`` holds about a batch of episodes: the metrics overall and per task type."""
    return episode_metrics(trajs) | {"by_task_type": by_task_type(trajs)}


def policy_for(cfg: "RunConfig"):
    """The memory policy of run ``cfg``."""
    return build_policy(cfg.memory, cfg.retriever, **cfg.options)


def run(cfg: RunConfig, resume: bool = False, progress: bool = True, lm=None, workers: int | None = None,
        ray_address: str | None = None) -> dict:
    """Run (or resume) a batch and write config.json, trajectories.jsonl, teacher_forced.json and metrics.json.

    Args:
        cfg: the run.
        resume: continue the run in ``cfg.out`` (its parameters must match).
        lm: a model already loaded in this process (it must be ``cfg.model`` in ``cfg.dtype``); serial only.
        workers: play the episodes in this many worker processes (a local Ray instance, started and stopped
            here, unless ``ray_address`` names a cluster).
        ray_address: an existing Ray cluster to run the workers on.

    Returns:
        The metrics dict written to metrics.json.
    """
    from workbench.eval.driver import drive

    return drive([cfg], resume=resume, progress=progress, lm=lm, workers=workers,
                 ray_address=ray_address).metrics[cfg.out]


def expert_for(split: str, task_id: str) -> Trajectory:
    """The planner's expert trajectory of ``task_id`` (what teacher forcing replays)."""
    for e in expert_trajectories_for(split):
        if e.task_id == task_id:
            return e
    raise ValueError(f"no expert trajectory for {task_id} in {split}")


def teacher_forced_part(agent, expert: Trajectory, task: Task, policy) -> dict:
    """One task's teacher-forced steps (a job's result; ``combine_teacher_forced`` adds tasks up)."""
    res = teacher_forced_accuracy(agent, [expert], {task.task_id: task}, policy, progress=False)
    return {"task_id": task.task_id, "n_correct": res.n_correct, "n_steps": res.n_steps,
            "p_sum": res.mean_p_expert * res.n_steps, "per_task": res.per_task[task.task_id],
            "per_step": list(res.per_step)}


def combine_teacher_forced(key: dict, parts: list[dict]) -> dict:
    """The ``teacher_forced.json`` record of ``parts`` (one per task, in the split's expert order)."""
    n = sum(p["n_steps"] for p in parts)
    correct = sum(p["n_correct"] for p in parts)
    p_sum = sum(p["p_sum"] for p in parts)
    result = {"accuracy": correct / n if n else 0.0, "n_steps": n, "n_tasks": len(parts),
              "mean_p_expert": p_sum / n if n else 0.0}
    return {"key": key, "result": result, "per_task": {p["task_id"]: list(p["per_task"]) for p in parts},
            "per_step": [s for p in parts for s in p["per_step"]]}


def teacher_forced_key(model: str, dtype: str, memory: str, split: str, tasks: str) -> dict:
    """What a ``teacher_forced.json`` was computed for (recomputed when any of it differs)."""
    return {"model": model, "dtype": dtype, "memory": memory, "split": split, "tasks": tasks}


def teacher_forced_for(lm, memory: str, split: str, tasks: str, out: str | Path, progress: bool = True,
                       policy=None) -> dict:
    """Teacher-forced accuracy of ``lm`` under memory ``memory`` on the expert plans of ``tasks``.

    ``policy``: a memory policy object to use instead of ``build_policy(memory)`` (``memory`` then names it
    in the cache key). Cached in ``out/teacher_forced.json`` (recomputed when the parameters differ). The
    same per-task parts and sums as the driver's teacher-forcing jobs, so both write the same file.
    """
    path = Path(out) / "teacher_forced.json"
    key = teacher_forced_key(lm.name, lm.dtype, memory, split, tasks)
    if path.exists():
        cached = json.loads(path.read_text())
        if cached.get("key") == key:
            return cached["result"]
    by_id = {t.task_id: t for t in select_tasks(RunConfig(out=str(out), split=split, tasks=tasks))}
    agent, policy = Agent.from_model(lm), policy or build_policy(memory)
    experts = [e for e in expert_trajectories_for(split) if e.task_id in by_id]
    parts = [teacher_forced_part(agent, e, by_id[e.task_id], policy)
             for e in tqdm(experts, desc=f"teacher forcing [{memory}]", disable=not progress)]
    record = combine_teacher_forced(key, parts)
    atomic_write_text(path, json.dumps(record, indent=1))
    return record["result"]


def load_run(out: str | Path) -> tuple[list[Trajectory], dict, dict]:
    """(trajectories, metrics, config) of a finished run folder."""
    out = Path(out)
    trajs = [Trajectory.model_validate(d) for d in iter_jsonl_dicts(out / "trajectories.jsonl")]
    metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else {}
    config = json.loads((out / "config.json").read_text()) if (out / "config.json").exists() else {}
    return trajs, metrics, config
