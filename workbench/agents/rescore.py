"""The re-score primitive: replay a recorded episode to a step, then score that same state again under typed memory
edits, and return both distributions over the admissible commands and the choice shift.

    Trajectory + the policy that played it
        |  replay_at: policy.begin, then memory(k) / observe(step k) along the episode's own history
        v
    State k: task, room, goal, history h_<k, o_k, the block B_k, the candidates, the policy paused at k
        |
        |-- factual   agent.build_prompt(B_k, room, goal, h_<k, o_k) -> P ------------- score --> p   (one forward,
        |                                                                                           shared by all sets)
        '-- edit set E (workbench.agents.edits, by stage, whatever E's order):
              policy    SetBand...         -> policy.reassemble(bands)                  -> B'
              block     DropItem, ShowOnly, DropBank, RewriteItem, MaskSegments,
                        ReplaceReminder, RemoveReminder, ClearMemory (in E's order)     -> B''
                        agent.build_prompt(B'', room, goal, h_<k, o_k)                  -> P'
              prompt    PlaceboReminder (the reminder span, token for token)            -> P''
              forward   MaskHeads (the head-mask instrument's hooks) ---------------- score --> p'
        v
    Rescore: candidates, p, p', chosen = argmax p, edited_choice = argmax p', p(chosen) before / after, tv, flipped

**Invariant.** The factual prompt is byte-identical to the one the agent saw when it played step k: the policy is
replayed exactly as the loop fed it (:func:`~workbench.agents.policy.replay`), and the prompt is built by the same
:func:`~workbench.agents.loop.build_prompt` from the same room, goal, history and observation. Every forward here
(unless ``reuse_prefix``, below) starts from an empty KV cache, so a distribution depends on its tokens, candidates
and hooks alone: an empty edit list reproduces the factual distribution exactly (bit for bit, not to a tolerance),
and a head mask never leaks into a cached prefix that a later forward reuses. (The loop itself reused the cache
across steps, so its recorded ``p_action`` may differ from ``p`` in the last float digits: check a replay by its
choice.) Every edited prompt is made before the first forward, so an edit that cannot apply raises before any model
time is spent.

**Reusing the agent's prefix (``reuse_prefix=True``), for bit-identical reproduction of recorded analyses.** The
causal studies' tables (band switches, loop switch, first-step ablation, warning pull, the reminder placebo) were
computed at paper scale in bfloat16 by scoring through the agent's scorer as it stood: its cached common prefix
reused by the factual forward and by each edited one in turn, never reset between them (band switches reset it once
per episode, the others never). A token's keys and values are computed in whichever forward first saw it, so a score
may depend, in its last bits, on how the prefix was chunked across the forwards before it: nothing promises a kernel
the same reductions for another number of rows (GPU GEMMs choose their tiling by shape). (On a CPU like the one that
made the tables, AMD EPYC with avx512_bf16, one or two threads, a sample showed no difference: 24 proactive states x
3 forwards and 36 band switches were bit-identical either way.) ``reuse_prefix=True`` therefore scores exactly as
the studies did, so their committed numbers are reproduced by construction, not by luck: through the agent's scorer
with nothing reset before, between or after; the factual forward first, then the edit sets in the order given
(``factual_first=False``: the edit sets first, the order of the reminder placebo); an edit set whose prompt is the
factual one token for token is not scored (``p_edited`` is ``p``: the studies recorded such a state as a noop, and a
second forward of the same tokens would only re-chunk the cache). It is not another measurement, only the order of
the same one's roundings. What could change a forward is refused in this mode
(:class:`~workbench.agents.edits.EditError` before any forward): a forward edit (``MaskHeads``), or an instrument
other than a read-only capture (:class:`~workbench.attention.instrument.CaptureInstrument`), would leave its effect
in the cached prefix that the next forward, this call's or the agent's next decision, reuses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from workbench.agents.counterfactual import argmax, choice_shift
from workbench.agents.edits import Edit, EditError, reassembled
from workbench.agents.loop import Agent, StepInstrument
from workbench.agents.policy import MemoryBlock, MemoryPolicy, replay_at
from workbench.attention.instrument import CaptureInstrument
from workbench.envs.base import Task
from workbench.memory.trajectory import Step, Trajectory
from workbench.models.scoring import ActionScorer
from workbench.prompts.layout import BuiltPrompt

__all__ = ["Edited", "Rescore", "State", "apply_edits", "rescore", "rescore_many", "state_at", "states_at"]

_STAGES = ("policy", "block", "prompt", "forward")


@dataclass(frozen=True, eq=False)
class State:
    """One decision state of a recorded episode, as the agent faced it.

    Attributes:
        task: the episode's task.
        step: k, the decision's index in the episode.
        room / goal: the episode's initial room description and goal sentence.
        history: the steps taken before k.
        observation: o_k, what the agent saw when it decided.
        block: B_k, the memory block the policy showed.
        candidates: the commands admissible at k (what is scored).
        action: the command the episode recorded at k (None for a state never played).
        record: what the run recorded for step k (``Trajectory.meta["steps"][k]``: its reminder, p_action...), or
            empty; what a study checks the replay against.
        policy: the policy, paused at k (it has shown B_k and not yet observed step k): what ``SetBand`` asks to
            re-assemble. It is the live object: replaying it further (the next state of :func:`states_at`, or
            another :func:`state_at` on it) moves it on, so re-score a state before asking for the next.
    """

    task: Task
    step: int
    room: str
    goal: str
    history: tuple[Step, ...]
    observation: str
    block: MemoryBlock
    candidates: tuple[str, ...]
    action: str | None = None
    record: Mapping = field(default_factory=dict)
    policy: MemoryPolicy | None = None

    @property
    def item_ids(self) -> tuple[str, ...]:
        """The working-memory items the block shows, in prompt order (what DropItem / ShowOnly may name)."""
        return tuple(p.item for p in self.block.working_memory if p.kind == "wm_item" and p.item is not None)

    @property
    def banks(self) -> tuple[str, ...]:
        """The banks the block shows, in prompt order (what DropBank may name)."""
        return tuple(dict.fromkeys(p.bank for p in self.block.working_memory if p.kind == "wm_item" and p.bank))

    def prompt(self, agent: Agent, block: MemoryBlock | None = None) -> BuiltPrompt:
        """The action prompt of this state with ``block`` as its memory (default: the factual B_k)."""
        return agent.build_prompt(self.block if block is None else block, self.room, self.goal, list(self.history),
                                  self.observation)


def states_at(policy: MemoryPolicy, task: Task, traj: Trajectory, steps: Sequence[int],
              admissible: Mapping[int, Sequence[str]] | Sequence[Sequence[str]]) -> Iterator[State]:
    """The states of ``traj`` at ``steps`` (in episode order), ``policy`` replayed once along the episode.

    Args:
        policy: a fresh instance of the policy that played ``traj`` (it is begun here).
        task: the episode's task (``policy.begin`` needs it).
        traj: the recorded episode.
        steps: which decisions.
        admissible: the commands admissible at each step, indexed by step (an expert's ``meta["admissible"]``, the
            lists an environment replayed along the episode gives, or ``{k: commands}``).

    Yields:
        One :class:`State` per step; its ``policy`` is paused there only until the next one is asked for.
    """
    wanted = sorted(set(steps))
    bad = [k for k in wanted if not 0 <= k < traj.n_steps]
    if bad:
        raise ValueError(f"step {bad[0]} is outside episode {traj.task_id} (steps 0..{traj.n_steps - 1})")
    records = (traj.meta or {}).get("steps") or []
    for k, step, history, block in replay_at(policy, task, traj, wanted):
        try:
            cands = tuple(admissible[k])
        except (KeyError, IndexError):
            raise ValueError(f"no admissible commands given for step {k} of {traj.task_id}") from None
        if not cands:
            raise ValueError(f"step {k} of {traj.task_id}: the admissible command list is empty")
        yield State(task=task, step=k, room=traj.initial_observation, goal=traj.goal, history=tuple(history),
                    observation=step.observation, block=block, candidates=cands, action=step.action,
                    record=records[k] if k < len(records) else {}, policy=policy)


def state_at(policy: MemoryPolicy, task: Task, traj: Trajectory, step: int, admissible: Sequence[str]) -> State:
    """The state of ``traj`` at decision ``step``: ``policy`` (fresh) replayed along the episode up to it.

    Args:
        admissible: the commands admissible at ``step`` (what is scored).
    """
    if isinstance(admissible, str):
        raise TypeError("admissible: expected the list of commands admissible at the step, got one string")
    # leaving the replay here keeps the policy paused at the step (it has not observed it)
    return next(states_at(policy, task, traj, [step], {step: admissible}))


@dataclass(frozen=True, eq=False)
class Edited:
    """One edit set applied to a state: the edited block, its prompt, and the instruments of its forward."""

    edits: tuple[Edit, ...]
    block: MemoryBlock
    prompt: BuiltPrompt
    instruments: tuple[StepInstrument, ...] = ()


def apply_edits(agent: Agent, state: State, edits: Sequence[Edit]) -> Edited:
    """The state's prompt under ``edits`` (stage by stage, see the module docstring), without scoring it: what
    :func:`rescore` scores, and what a study that writes its action (``decode="generate"``) writes from.

    Raises:
        EditError: an edit names what the state does not hold, or needs what the policy cannot do.
    """
    edits = tuple(edits)
    for e in edits:
        if not isinstance(e, Edit) or e.stage not in _STAGES:
            raise EditError(f"{e!r} is not a memory edit (workbench.agents.edits)")
    by = {s: [e for e in edits if e.stage == s] for s in _STAGES}
    block = reassembled(by["policy"], state.block, state.policy)  # type: ignore[arg-type]
    for e in by["block"]:
        block = e.edit_block(block, state.task)
    prompt = state.prompt(agent, block)
    for e in by["prompt"]:
        prompt = e.edit_prompt(prompt, block, agent.builder.tokenizer)
    return Edited(edits=edits, block=block, prompt=prompt,
                  instruments=tuple(e.instrument(agent.scorer.lm) for e in by["forward"]))


@dataclass(frozen=True)
class Rescore:
    """One state scored as played and under one edit set.

    Attributes:
        candidates: the admissible commands, in the order of both distributions.
        p: the factual distribution (softmax of the length-normalised log-likelihoods).
        p_edited: the distribution under the edits.
        chosen: the factual arg-max (the first of tied maxima, as the scorer picks).
        edited_choice: the arg-max under the edits.
        tv: total-variation distance between ``p`` and ``p_edited`` (0: the edits moved nothing).
        noop: the edited prompt is the factual one token for token and no forward edit applies (e.g. a band
            switch the budget would not fit): ``p_edited`` then equals ``p``.
        edits: the edit set.
        prompt / edited_prompt: the two prompts scored (with their spans).
    """

    candidates: tuple[str, ...]
    p: tuple[float, ...]
    p_edited: tuple[float, ...]
    chosen: int
    edited_choice: int
    tv: float
    noop: bool
    edits: tuple[Edit, ...] = ()
    prompt: BuiltPrompt | None = field(default=None, repr=False, compare=False)
    edited_prompt: BuiltPrompt | None = field(default=None, repr=False, compare=False)

    @property
    def p_chosen(self) -> float:
        """p(chosen) as played."""
        return self.p[self.chosen]

    @property
    def p_chosen_edited(self) -> float:
        """p(chosen) under the edits."""
        return self.p_edited[self.chosen]

    @property
    def delta_p(self) -> float:
        return self.p_chosen_edited - self.p_chosen

    @property
    def flipped(self) -> bool:
        """The edits change the agent's choice."""
        return self.edited_choice != self.chosen

    @property
    def choice(self) -> str:
        return self.candidates[self.chosen]

    @property
    def edited_command(self) -> str:
        return self.candidates[self.edited_choice]

    def p_of(self, command: str) -> tuple[float, float]:
        """(before, after) probability of one candidate."""
        i = self.candidates.index(command)
        return self.p[i], self.p_edited[i]

    def row(self, digits: int = 6) -> dict:
        """A flat, JSON-ready record (what a study keeps per state and edit set)."""
        return {"chosen": self.choice, "edited_choice": self.edited_command, "p": round(self.p_chosen, digits),
                "p_cf": round(self.p_chosen_edited, digits), "delta_p": round(self.delta_p, digits),
                "tv": round(self.tv, digits), "flipped": self.flipped, "noop": self.noop,
                "edits": [repr(e) for e in self.edits]}


def _distribution(agent: Agent, prompt: BuiltPrompt, cands: list[str], instruments,
                  reuse_prefix: bool = False) -> tuple[float, ...]:
    if not reuse_prefix:
        agent.scorer.reset()  # an empty cache: the distribution depends on this forward's inputs alone (invariant)
    return tuple(ActionScorer.normalise(agent.decide(prompt, cands, list(instruments)).scores))


def _check_prefix_reuse(edited: Mapping[str, Edited], instruments: Sequence[StepInstrument]) -> None:
    """With ``reuse_prefix`` nothing may change a forward: its effect would stay in the cached prefix."""
    for ed in edited.values():
        for e in ed.edits:
            if e.stage == "forward":
                raise EditError(f"{e!r} changes the scoring forward: with reuse_prefix=True its effect would stay in "
                                "the cached KV prefix that the next forward reuses; re-score it with "
                                "reuse_prefix=False (every forward from an empty cache)")
    for inst in instruments:
        if not isinstance(inst, CaptureInstrument):
            raise EditError(f"instrument {type(inst).__name__}: with reuse_prefix=True only a read-only capture "
                            "(CaptureInstrument) may watch the forwards (an instrument that changes one would leave "
                            "its effect in the cached KV prefix); re-score with reuse_prefix=False")


def rescore_many(agent: Agent, state: State, edit_sets: Mapping[str, Sequence[Edit]],
                 instruments: Sequence[StepInstrument] = (), *, reuse_prefix: bool = False,
                 factual_first: bool = True, factual: Sequence[float] | None = None) -> dict[str, Rescore]:
    """Score ``state`` as played once, then under each named edit set.

    Args:
        agent: the white-box agent that scores (its scorer's cache is left empty afterwards, unless
            ``reuse_prefix``).
        state: the state (:func:`state_at`, :func:`states_at`, or built directly).
        edit_sets: name -> a list of edits (an empty list re-scores the factual prompt).
        instruments: step instruments that watch every forward (e.g. an attention capture), in the order scored:
            the factual one first (last with ``factual_first=False``), then one per edit set in ``edit_sets``'
            order (with ``reuse_prefix``, none for an edit set that leaves the prompt as it was).
        reuse_prefix: score through the agent's scorer as it stands, its cached prefix reused and nothing reset,
            to reproduce a recorded analysis bit for bit (module docstring); forward edits and instruments other
            than a capture are refused.
        factual_first: False scores the edit sets first and the factual prompt last (with ``reuse_prefix`` the
            order is part of the numbers: the recorded reminder placebo was scored before the reminder).
        factual: the factual distribution, already scored through the agent's scorer as it stands (with
            ``reuse_prefix`` only: its cached prefix must be the factual prompt's, as a live session keeps it); it
            is not scored again.

    Returns:
        name -> :class:`Rescore`, in ``edit_sets``' order.

    Raises:
        EditError: an edit cannot apply to this state, or cannot with ``reuse_prefix`` (before any forward).
        ValueError: the agent's scorer runs compiled (``forward="compiled"``: batch play only), or ``factual`` does
            not fit.
    """
    factual_prompt = state.prompt(agent)
    edited = {name: apply_edits(agent, state, edits) for name, edits in edit_sets.items()}
    if reuse_prefix:
        _check_prefix_reuse(edited, instruments)
    elif factual is not None:
        raise ValueError("factual= needs reuse_prefix=True (the distribution of the cached factual prefix)")
    if getattr(agent.scorer, "forward", None) == "compiled":
        raise ValueError("this agent's scorer runs unhooked steps compiled (forward='compiled'), and a forward edit or "
                         "an instrument runs eager: a re-score must compare one arithmetic with itself; build the "
                         "agent's scorer with forward='auto' (workbench.models.scoring.set_default_forward('auto'))")
    if factual is not None and len(factual) != len(state.candidates):
        raise ValueError(f"factual: {len(factual)} probabilities for {len(state.candidates)} candidates")
    cands = list(state.candidates)
    noop = {name: not ed.instruments and ed.prompt.tokens == factual_prompt.tokens for name, ed in edited.items()}
    order: list[str | None] = [None, *edited] if factual_first else [*edited, None]  # None: the factual prompt
    dist: dict[str | None, tuple[float, ...]] = {}
    try:
        for name in order:
            if name is None:
                dist[None] = tuple(factual) if factual is not None else _distribution(agent, factual_prompt, cands,
                                                                                      instruments, reuse_prefix)
            elif not (reuse_prefix and noop[name]):
                ed = edited[name]
                dist[name] = _distribution(agent, ed.prompt, cands, [*instruments, *ed.instruments], reuse_prefix)
    finally:
        if not reuse_prefix:
            agent.scorer.reset()  # no edited (or masked) prefix stays for the agent's next decision to reuse
    p = dist[None]
    best = argmax(p)
    out = {}
    for name, ed in edited.items():
        q = dist.get(name, p)  # a noop not scored again (reuse_prefix): the factual distribution
        _, alt, tv = choice_shift(p, q)
        out[name] = Rescore(candidates=tuple(cands), p=p, p_edited=q, chosen=best, edited_choice=alt, tv=tv,
                            noop=noop[name], edits=ed.edits, prompt=factual_prompt, edited_prompt=ed.prompt)
    return out


def rescore(agent: Agent, state: State, edits: Sequence[Edit] = (),
            instruments: Sequence[StepInstrument] = (), *, reuse_prefix: bool = False,
            factual_first: bool = True, factual: Sequence[float] | None = None) -> Rescore:
    """Score ``state`` as played and under ``edits`` (one edit set of :func:`rescore_many`, whose arguments these
    are)."""
    return rescore_many(agent, state, {"edited": edits}, instruments, reuse_prefix=reuse_prefix,
                        factual_first=factual_first, factual=factual)["edited"]
