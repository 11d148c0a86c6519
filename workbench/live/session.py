"""A live session: an agent played one decision at a time in the kernel, the state it decides in, and that state
re-scored under memory edits -- the same re-score primitive the causal studies use (``workbench.agents.rescore``).

    s = Session("smollm2-135m-alfworld-v2", "valid_unseen/pick_and_place_simple-...", memory="arbiter",
                options={"budget": 500}, dtype="bfloat16")
    s = Session("smollm2-135m-alfworld-v2", "test/find-animal/225", memory="arbiter",   # a ScienceWorld task
                options={"backend": "llama-server"})      # MemArbiter's stages by an LLM (offline: ALFWorld's)
    s.state                      # the pending decision: prompt, memory block, candidates (a rescore.State)
    s.distribution()             # p over the candidates, as the agent will score them
    s.rescore([DropItem("goal"), MaskHeads([(13, 6)])])   # both distributions, TV, the new argmax
    s.step()                     # play it: the agent decides, the game answers, the policy observes
    s.run(until=lambda rec: rec["p_action"] < 0.3)

Any benchmark of ``workbench.envs.benchmarks`` plays: the task id says which (``valid_unseen/<game>/trial_...`` is
ALFWorld, ``test/boil/21`` ScienceWorld), or ``env=`` names it with its options (``scienceworld:none``). The agent
is built as that benchmark's runs build it (its instructions, prompt budget and decode: ScienceWorld writes its
action along the valid actions' trie), and the memory policies read that benchmark's memory base unless told
otherwise. A re-score scores every candidate it is given in one forward (``candidates=`` narrows a ScienceWorld
state's hundreds of valid actions to the ones in question).

The episode is an :class:`~workbench.agents.loop.Episode`, the stepper :meth:`Agent.run` loops over, so a session
stepped to its end is the episode a batch run plays (``tests/live``). Re-scoring goes through a second agent on the
same loaded model: its forwards start from an empty cache and never touch the cache the episode's own agent reuses
from one decision to the next, so looking at a state does not move the decisions that follow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.agents.edits import Edit
from workbench.agents.loop import Agent, Episode
from workbench.agents.policy import POLICIES, MemoryPolicy, build_policy, policy_options
from workbench.agents.rescore import Rescore, State, rescore
from workbench.attention.heads import default_retrieval_heads
from workbench.attention.instrument import CaptureInstrument
from workbench.envs.base import Task
from workbench.envs.benchmarks import benchmark, load_tasks, make_env
from workbench.memory.trajectory import Trajectory
from workbench.models import load_model
from workbench.models.registry import DEFAULT_AGENT, list_models

__all__ = ["Played", "Session", "SessionError", "benchmark_of", "find_task", "memory_mass", "replay_parity"]

SPLITS = ("valid_unseen", "valid_seen", "valid_train")  # ALFWorld's, where a task id is looked up by default
SPLITS_BY_BENCHMARK = {"alfworld": SPLITS, "scienceworld": ("test", "dev", "train")}


class SessionError(ValueError):
    """A live session was asked for what it cannot do (an unknown task, a finished episode); it is unchanged."""


def benchmark_of(task_id: str) -> str:
    """The benchmark a task id belongs to, by its form: ScienceWorld's ids are ``<train|dev|test>/<type>/<n>``,
    ALFWorld's ``<valid_...>/<game>/<trial>``."""
    parts = task_id.split("/")
    if len(parts) == 3 and parts[0] in SPLITS_BY_BENCHMARK["scienceworld"] and parts[2].isdigit():
        return "scienceworld"
    return "alfworld"


def find_task(task_id: str, splits: Sequence[str] | None = None, env: str | None = None) -> Task:
    """The task of this id, in any of ``splits`` of benchmark ``env`` (None: the one the id's form names,
    :func:`benchmark_of`; splits None: all of that benchmark's).

    Raises:
        SessionError: no such task (the message gives the closest ids).
    """
    env = env or benchmark_of(task_id)
    name = env.partition(":")[0]
    splits = tuple(splits) if splits else SPLITS_BY_BENCHMARK.get(name, (benchmark(env).default_split,))
    ids = []
    for split in splits:
        try:
            tasks = load_tasks(env, split)
        except ValueError as e:
            raise SessionError(f"task {task_id!r}: {e}") from None
        for t in tasks:
            if t.task_id == task_id:
                return t
            ids.append(t.task_id)
    import difflib

    near = difflib.get_close_matches(task_id, ids, n=3, cutoff=0.5)
    forms = "ALFWorld's look like valid_unseen/<game>/trial_..., ScienceWorld's like test/<task type>/<variation>"
    raise SessionError(f"no {name} task {task_id!r} in {', '.join(splits)}" +
                       (f"; closest: {', '.join(near)}" if near else f"; {forms}"))


@dataclass(frozen=True)
class Played:
    """One played decision: its step, the action, what the game answered, the run's record of it, and (for the
    live view) the memory block and prompt it was decided on and p over all its candidates."""

    step: int
    action: str
    observation: str
    record: dict
    done: bool
    won: bool
    block: Any = None
    prompt: Any = None
    distribution: dict | None = None


class Session:
    """One episode of one task, played live.

    Args:
        model: a model name or path (loaded here, in ``dtype``), or a model already loaded (``load_model``).
        task: a task id (any split of its benchmark) or a :class:`~workbench.envs.base.Task`.
        memory: the memory policy (``workbench list memory``); ``options`` its options (budget, ablation, ...);
            a policy that reads a memory base and is given none reads the benchmark's
            (``Benchmark.default_memory_base``: ALFWorld's valid_train experts, ScienceWorld's train gold paths).
        retriever: for the policies that retrieve.
        max_steps: the step limit (None: the benchmark's own, ALFWorld's 50, ScienceWorld's per task type).
        policy: a policy object instead of ``memory``/``options`` (it is begun here).
        heads: the retrieval heads whose attention every step captures (``[(layer, head), ...]``); None: the
            model's committed retrieval heads when it has them (``workbench/assets/heads``), else none captured.
        env: the benchmark with its options (``alfworld``, ``scienceworld``, ``scienceworld:none``); None: the
            task's own (a Task's ``benchmark``, or what the id's form names).
        decode: how the agent acts (``workbench.agents.loop.DECODES``); None: the benchmark's default (ALFWorld
            scores every admissible command; ScienceWorld writes one along their trie).

    Raises:
        SessionError: an unknown task.
        ValueError: an unknown policy, option, benchmark or decode (the message names it).
    """

    def __init__(self, model: Any = DEFAULT_AGENT, task: str | Task = "", memory: str = "traj", *,
                 options: dict | None = None, dtype: str = "float32", retriever: str = "minilm",
                 max_steps: int | None = None, policy: MemoryPolicy | None = None,
                 heads: Sequence[tuple[int, int]] | None = None, env: str | None = None,
                 decode: str | None = None) -> None:
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps {max_steps!r}: a whole number of steps, at least 1 (None: the benchmark's)")
        from workbench.models.scoring import default_forward

        if default_forward() == "compiled":
            raise SessionError("this process's forward is 'compiled' (batch play only): a session's steps are captured "
                               "(eager) and its re-scores compare eager arithmetic; "
                               "workbench.models.scoring.set_default_forward('auto') first")
        if isinstance(task, Task):
            env = env or task.benchmark
            if env.partition(":")[0] != task.benchmark:
                raise SessionError(f"task {task.task_id} is a {task.benchmark} task; env {env!r} is another benchmark")
        else:
            env = env or benchmark_of(task)
            task = find_task(task, env=env)
        self.task, self.env_name = task, env
        bench = benchmark(env)
        options = dict(options or {})
        if (policy is None and bench.default_memory_base is not None and "memory_base" in policy_options(memory)
                and options.get("memory_base") is None):
            options["memory_base"] = str(bench.default_memory_base(env))
        if policy is None:
            from workbench.eval.config import check_policy_on_benchmark

            valid = POLICIES.validate(memory, {k: v for k, v in options.items() if v not in (None, ())})
            try:
                check_policy_on_benchmark(env, memory, valid.get("backend"))
            except ValueError as e:
                hint = " (a Session takes it as options={'backend': 'llama-server'}, ...)" if "LLM" in str(e) else ""
                raise ValueError(f"{e}{hint}") from None
        self._config = dict(memory=memory, options=options, retriever=retriever, max_steps=max_steps, env=env,
                            decode=decode)
        self._owns_policy = policy is None  # close() stops the LLM server of a policy built here only
        self._closed = False
        self.policy = policy or build_policy(memory, retriever, **options)
        self.edits: tuple[Edit, ...] = ()  # a fork's edits, applied to every decision from its fork point on
        self.lm = load_model(model, dtype=dtype) if isinstance(model, str) else model
        self.agent = Agent.for_benchmark(self.lm, env, **({"decode": decode} if decode else {}))
        # re-scores: its own cache, never the episode's; it scores every candidate it is given (the score decode)
        self._scorer_agent = Agent.for_benchmark(self.lm, env, decode="score")
        # step -> (the scorer's cached prefix of that state, {candidates: their factual p}) (Session.rescore)
        self._prefix: dict[int, tuple] = {}
        self.env = make_env(env, max_steps)
        if heads is None and self.lm.name in list_models():
            heads = default_retrieval_heads(self.lm.name, shape=(self.lm.n_layers, self.lm.n_heads))
        # a read-only capture: it watches the episode's forwards and changes no score
        self.capture = CaptureInstrument(self.agent, heads) if heads else None
        self._heads = heads
        self.episode = Episode(self.agent, self.env, self.task, self.policy,
                               instruments=[self.capture] if self.capture else [], max_steps=max_steps)
        self.played: list[Played] = []
        self.recorded: Trajectory | None = None  # the run's episode, for a session made by from_run

    # -- looking ------------------------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.episode.done

    @property
    def step_index(self) -> int:
        """The index of the pending decision (the number of steps played)."""
        return self.episode.t

    @property
    def state(self) -> State:
        """The pending decision as a re-score state: room, goal, history, observation, the memory block, the
        candidates, and the live policy paused there (what ``SetBand`` re-assembles).

        Raises:
            SessionError: the episode is over.
        """
        self._check_open()
        if self.done:
            raise SessionError(f"the episode is over after {self.step_index} steps (won: {self.episode.won}); "
                               "start a new Session to play again")
        d = self.episode.pending()
        return State(task=self.task, step=d.step, room=self.episode.room, goal=self.episode.goal,
                     history=tuple(self.episode.history), observation=self.episode.observation, block=d.block,
                     candidates=d.admissible, policy=self.policy)

    def distribution(self, candidates: Sequence[str] | None = None) -> dict[str, float]:
        """p over the pending decision's candidates (or over ``candidates``, some of them), scored as
        :meth:`rescore` scores the factual prompt."""
        r = self.rescore([], candidates=candidates)
        return dict(zip(r.candidates, r.p))

    def rescore(self, edits: Sequence[Edit], instruments: Sequence = (), *, exact: bool = False,
                candidates: Sequence[str] | None = None) -> Rescore:
        """The pending decision scored as it stands and under ``edits`` (typed memory edits:
        ``workbench.agents.edits``): both distributions, the total-variation distance, the new argmax.

        By default the state is scored once, its prompt prefix cached (extending the previous state's), and each
        re-score runs the edited prompt alone, reusing that cache up to the first edited token (a live re-score
        costs the edited tail, not two whole prompts): every re-score of one state starts from the same cached
        prefix and the same factual distribution, so asking twice gives the same numbers, which agree with an
        empty-cache forward to the dtype's rounding. ``exact=True`` scores both prompts from an empty cache, as the
        causal studies do (their numbers bit for bit); a head mask (its effect would sit in the cached prefix) and
        any ``instruments`` (they watch both forwards whole) always take that path. Not thread-safe: one call at
        a time per session (the widgets take turns).

        Every candidate is scored in one forward, as the ``score`` decode scores them, whatever the session's
        decode: a ScienceWorld state's hundreds of valid actions cost one long forward (seconds), and
        ``candidates`` (some of the admissible commands, e.g. the top of :attr:`Played.distribution`) scores
        those only, p renormalised over them.

        Raises:
            EditError: an edit names an item, bank, segment or head the state does not hold; nothing was scored and
                the session is unchanged.
            SessionError: ``candidates`` names a command that is not admissible here, or none.
        """
        from dataclasses import replace as _replace

        from workbench.agents.rescore import apply_edits

        state, edits = self.state, list(edits)
        if candidates is not None:
            if isinstance(candidates, str):
                raise SessionError("candidates: a list of commands, not one string")
            given = tuple(dict.fromkeys(candidates))
            bad = [c for c in given if c not in state.candidates]
            if bad or not given:
                raise SessionError(f"step {state.step}: candidates {bad or '(none)'} are not admissible here "
                                   f"({len(state.candidates)} are: Session.state.candidates)")
            state = _replace(state, candidates=given)
        if exact or instruments or any(e.stage == "forward" for e in edits if isinstance(e, Edit)):
            return rescore(self._scorer_agent, state, edits, instruments)
        apply_edits(self._scorer_agent, state, edits)  # refuse a bad edit before any forward or cache change
        scorer = self._scorer_agent.scorer
        snap = self._prefix.get(self.step_index)
        if snap is not None:
            scorer.restore(snap[0])  # the state's prefix, whatever an edited re-score left in the cache since
        factual = snap[1].get(state.candidates) if snap is not None else None
        if factual is None:  # this state's prefix (extending the last state's cached one) and p over these candidates
            from workbench.models.scoring import ActionScorer

            got = self._scorer_agent.decide(state.prompt(self._scorer_agent), list(state.candidates))
            factual = tuple(ActionScorer.normalise(got.scores))
            if snap is None:
                snap = (scorer.snapshot(), {})
                self._prefix = {self.step_index: snap}
            snap[1][state.candidates] = factual
            scorer.restore(snap[0])
        return rescore(self._scorer_agent, state, edits, instruments, reuse_prefix=True, factual=factual)

    def attention(self, step: int = -1) -> list[dict]:
        """The captured heads' attention of a played decision (default: the last), per prompt span: one row per
        span (kind, start, end, segment / item / bank / band where it has one) with the mass the query token put
        on it, averaged over the heads, and each head's share.

        Raises:
            SessionError: no heads are captured, or no step is played yet.
        """
        if self.capture is None:
            raise SessionError("no heads captured: pass heads=[(layer, head), ...] (the model has no committed "
                               "retrieval heads)")
        steps = self.capture.capture.steps
        if not steps:
            raise SessionError("no step played yet: attention is captured as the agent decides (step())")
        captured, prompt = steps[step], self.capture.prompts[step]
        rows = captured.rows  # [n_heads, keys], each row sums to 1
        out = []
        for sp in prompt.spans:
            mass = rows[:, sp.start:sp.end].sum(dim=1)
            out.append({"kind": sp.kind, "start": sp.start, "end": sp.end, "segment": sp.segment, "item": sp.item,
                        "bank": sp.bank, "band": sp.band, "mass": float(mass.mean()),
                        "by_head": {f"L{h[0]}.H{h[1]}": float(m) for h, m in zip(self.capture.capture.heads.heads,
                                                                                  mass.tolist())}})
        return out

    def memory_attention(self) -> tuple[Any, list[str], list[int]]:
        """The captured heads' attention mass on each memory piece (rows) at each decision played so far
        (columns), as the player draws it (:func:`memory_mass`), for any policy: a trajectory's segments or a
        working memory's items. This is the raw mass (each head's attention row sums to 1), not AGMR's C, which
        rescales by the prompt length n_t and needs a fixed memory block: ``session.capture.utilization()``.

        Returns:
            ``(mass, pieces, steps)``: a ``[pieces, steps]`` float array (a piece absent from a step's prompt is 0),
            the pieces' labels (``s<l>`` for a trajectory segment, the item id of a working-memory item) in the
            order they first appear, and the steps.

        Raises:
            SessionError: no heads are captured, or no step is played yet.
        """
        import numpy as np

        if self.capture is None or not self.capture.capture.steps:
            self.attention()  # raises the SessionError that says why
        columns = [memory_mass(self.attention(k)) for k in range(len(self.capture.capture.steps))]
        pieces = list(dict.fromkeys(key for col in columns for key in col))
        mass = np.array([[col.get(p, 0.0) for col in columns] for p in pieces], dtype=float).reshape(
            len(pieces), len(columns))
        return mass, pieces, list(range(len(columns)))

    def trajectory(self) -> Trajectory:
        """The episode so far, as a batch run records it."""
        return self.episode.trajectory()

    # -- playing --------------------------------------------------------------------------------------------------

    def step(self, action: str | None = None) -> Played:
        """Play the pending decision (``action``: play this admissible command instead of the agent's choice).

        Raises:
            SessionError: the episode is over. ValueError: ``action`` is not admissible (nothing was played).
        """
        self._check_open()
        if self.done:
            raise SessionError(f"the episode is over after {self.step_index} steps (won: {self.episode.won})")
        k = self.step_index
        if action is not None and action not in self.episode.pending().admissible:
            raise ValueError(f"step {k}: {action!r} is not admissible here")
        d = self.episode.pending()
        record = self.episode.step(action)
        last = self.episode.history[-1]
        played = Played(step=k, action=last.action, observation=self.episode.observation, record=record,
                        done=self.done, won=self.episode.won, block=d.block, prompt=d.prompt,
                        distribution=self.episode.last_distribution)
        self.played.append(played)
        return played

    def fork(self, edits: Sequence[Edit]) -> Session:
        """A new session that replays this one's actions to here, then plays on with ``edits`` applied to every
        decision's memory (the block, and the prompt for a placebo) -- what the agent does if this piece of memory
        is changed from now on. This session is left as it is.

        Raises:
            EditError: an edit cannot apply here (nothing was made), or is a forward edit (a head mask: re-score it
                with :meth:`rescore`; a fork changes memory). Later decisions raise it where it stops applying.
        """
        from workbench.agents.edits import EditError
        from workbench.agents.rescore import apply_edits

        self._check_open()
        edits = self.edits + tuple(edits)  # a fork of a fork keeps the first fork's edits
        if any(e.stage == "forward" for e in edits):
            raise EditError("a fork changes the memory the agent reads; a head mask is a re-score (Session.rescore)")
        if not self.done:
            apply_edits(self._scorer_agent, self.state, edits)  # refuse now what cannot apply at the fork point
        cfg = self._config
        f = Session(self.lm, self.task, cfg["memory"], options=cfg["options"], retriever=cfg["retriever"],
                    max_steps=cfg["max_steps"], heads=self._heads, env=cfg["env"], decode=cfg["decode"])
        for p in self.played:
            f.step(p.action)
        f.edits = edits

        def under_edits(d):
            from workbench.agents.loop import Decision

            state = State(task=f.task, step=d.step, room=f.episode.room, goal=f.episode.goal,
                          history=tuple(f.episode.history), observation=f.episode.observation, block=d.block,
                          candidates=d.admissible, policy=f.policy)
            ed = apply_edits(f.agent, state, edits)
            return Decision(d.step, ed.block, ed.prompt, d.admissible)

        f.episode.transform = under_edits
        return f

    def close(self) -> None:
        """Stop what the session started: the benchmark's simulator (ScienceWorld's JVM, by its pid) and the
        policy's LLM server (a ``backend: llama-server`` policy serves its model from a process of its own, ~1 GB,
        which would otherwise live as long as the kernel). The session cannot play on; a fork is a session of its
        own (close it too). Also at the end of a ``with Session(...) as s:`` block."""
        self._closed = True
        try:
            close = getattr(self.env, "close", None)
            if close is not None:
                close()
        finally:
            backend = getattr(self.policy, "backend", None)
            # a served backend owns its server; a policy the caller passed in is the caller's to close
            if self._owns_policy and getattr(backend, "server", None) is not None:
                backend.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SessionError("the session is closed (close() stopped its game and its LLM server): start a new "
                               "Session, or Session.from_run to walk a recorded episode again")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- replaying a recorded run ------------------------------------------------------------------------------

    @classmethod
    def from_run(cls, folder: str, task_id: str, model: Any = None) -> Session:
        """A session of ``task_id`` with the agent, memory policy, options and step limit a run folder recorded
        (its ``config.json``, read strictly); :meth:`replay` then walks it along the recorded episode.

        Args:
            model: the model already loaded (it must be the run's model in its dtype), or None to load it.

        Raises:
            FileNotFoundError / FormatError: not a run folder. SessionError: the run holds no episode of the task.
            ValueError: ``model`` is another model or dtype than the run's.
        """
        from workbench.eval.config import RunConfig
        from workbench.eval.run_folder import read_config, read_episodes

        cfg = RunConfig.from_identity(folder, read_config(folder).run)
        recorded = {t.task_id: t for t in read_episodes(folder)}
        if task_id not in recorded:
            raise SessionError(f"{folder}: no episode of {task_id!r} ({len(recorded)} episodes there)")
        if model is not None and (model.name != cfg.model or model.dtype != cfg.dtype):
            raise ValueError(f"{folder} was played by {cfg.model} in {cfg.dtype}; the model given is {model.name} in "
                             f"{model.dtype}: load the run's model (a run folder from another model is not a replay)")
        session = cls(model or cfg.model, find_task(task_id, (cfg.split,), env=cfg.env), cfg.memory,
                      options=cfg.options, dtype=cfg.dtype, retriever=cfg.retriever, max_steps=cfg.max_steps,
                      env=cfg.env, decode=cfg.decode)
        session.recorded = recorded[task_id]
        return session

    def replay(self, to_step: int | None = None) -> list[dict]:
        """Play the recorded episode's actions up to decision ``to_step`` (default: all of them), the agent scoring
        each state as it goes; returns, per step, what it chose and with what p against what the run recorded
        (``same_choice`` False: this replay does not reproduce the recorded choice -- another model, dtype, code).

        Raises:
            SessionError: the session was not made by :meth:`from_run`, or ``to_step`` is past the episode.
        """
        rec = getattr(self, "recorded", None)
        if rec is None:
            raise SessionError("replay needs a session made by Session.from_run(folder, task_id)")
        end = rec.n_steps if to_step is None else to_step
        if not 0 <= end <= rec.n_steps:
            raise SessionError(f"to_step {to_step}: the recorded episode has steps 0..{rec.n_steps - 1}")
        records = (rec.meta or {}).get("steps") or []
        out = []
        while self.step_index < end:
            k = self.step_index
            played = self.step(rec.steps[k].action)
            then = records[k] if k < len(records) else {}
            chose = played.record["top"][0][0] if "top" in played.record else None
            out.append({"step": k, "recorded": rec.steps[k].action, "chosen": chose,
                        "same_choice": chose == rec.steps[k].action, "p_action": played.record.get("p_action"),
                        "recorded_p_action": then.get("p_action")})
        return out

    def run(self, until: Callable[[Played], bool] | None = None, max_steps: int | None = None) -> list[Played]:
        """Play until the episode ends, ``until(played)`` is true, or ``max_steps`` more steps were played."""
        self._check_open()
        out: list[Played] = []
        while not self.done and (max_steps is None or len(out) < max_steps):
            out.append(self.step())
            if until is not None and until(out[-1]):
                break
        return out


def memory_mass(spans: Sequence[dict]) -> dict[str, float]:
    """One column of C from a step's span rows (:meth:`Session.attention`): the mass on each memory segment (its
    thought and action tokens, observations excluded, as AGMR's C) or working-memory item; history steps are not
    memory."""
    col: dict[str, float] = {}
    for r in spans:
        if r["segment"] is not None and r["kind"] in ("thought", "action"):
            key = f"s{r['segment']}"
        elif r["item"] is not None:
            key = r["item"]
        else:
            continue
        col[key] = col.get(key, 0.0) + r["mass"]
    return col


def replay_parity(folder: str, states: int = 50, model: Any = None) -> dict:
    """Does a live session reproduce a recorded run? ``Session.from_run(folder, task).replay()`` over the folder's
    episodes in file order until ``states`` decisions: the recorded actions are played, the agent scores each state
    as it goes (as the run did, its cache reused from step to step). ``model``: a loaded model, used when it is
    the run's model in the run's dtype (else the run's is loaded).

    Returns:
        folder, model, dtype, the CPU that played the run (when recorded) and this one, ``states``,
        ``same_choice`` (states whose recorded choice the agent makes again), ``p_exact`` (p(action) bit for bit),
        ``p_within_1e-3`` and ``max_abs_dp``, ``wall_s``.
    """
    import time

    from workbench.eval.run_folder import read_config, read_episodes
    from workbench.files import read_json
    from workbench.provenance import versions

    cfg = read_config(folder).run
    same = model is not None and (model.name, model.dtype) == (cfg.model, cfg.dtype)
    lm = model if same else load_model(cfg.model, dtype=cfg.dtype)  # the run's model, whatever was given
    rows: list[dict] = []
    t0 = time.time()
    for ep in read_episodes(folder):
        if len(rows) >= states:
            break
        with Session.from_run(folder, ep.task_id, model=lm) as s:
            rows += s.replay(to_step=min(ep.n_steps, states - len(rows)))
    dp = [abs(r["p_action"] - r["recorded_p_action"]) for r in rows if r["recorded_p_action"] is not None]
    played_on = read_json(f"{folder}/config.json").get("versions", {}).get("cpu")
    return {"folder": str(folder), "model": cfg.model, "dtype": cfg.dtype, "played_on": played_on,
            "replayed_on": versions().get("cpu"), "states": len(rows),
            "same_choice": sum(r["same_choice"] for r in rows),
            "p_exact": sum(r["p_action"] == r["recorded_p_action"] for r in rows),
            "p_within_1e-3": sum(d < 1e-3 for d in dp), "max_abs_dp": max(dp, default=0.0),
            "wall_s": round(time.time() - t0, 1)}
