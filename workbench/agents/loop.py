"""The episode loop: env x action model x memory policy -> Trajectory (+ optional instruments).

task -> policy builds the memory -> PromptBuilder returns (tokens, spans) -> ActionScorer scores the
admissible actions (KV prefix reused) with the instruments' hooks active -> env.step -> Step appended.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

from workbench.agents.counterfactual import reminder_effect, written_reminder_effect
from workbench.agents.policy import MemoryBlock, MemoryPolicy
from workbench.envs.base import Environment, Task
from workbench.envs.normalize import split_initial_observation
from workbench.memory.trajectory import Step, Trajectory
from workbench.models.generation import PrefixGenerator
from workbench.models.scoring import ActionScorer, ForwardLayout, ScoreResult
from workbench.prompts.layout import BuiltPrompt, PromptBuilder
from workbench.prompts.working_memory import build_working_memory_prompt

__all__ = ["BEAM", "DECODES", "check_decode", "StepInstrument", "Agent", "Decision", "Episode", "EpisodeResult", "build_prompt"]

# How the action model acts. ``score``: pick the admissible command of highest length-normalised likelihood (the
# SmolLM2 default; the agent cannot write an invalid command). ``generate``: write ``Thought:/Action:``, parse the
# action and map it to an admissible command (closest by words when no exact match). ``generate-verbatim``: write
# it and execute the action as written, as a ReAct agent in the papers does, so ALFWorld answers an invalid
# command "Nothing happens." (what MemArbiter's failure-response metrics, Table 5 (a), count). ``constrained``:
# write the action token by token, only ever along an admissible command (a beam of :data:`BEAM` over their token
# trie, ranked as ``score`` ranks): for ScienceWorld's thousand valid actions a step, too many for one forward.
DECODES = ("score", "generate", "generate-verbatim", "constrained")
#: the beam of the ``constrained`` decode (ours, by measurement: on 50 ScienceWorld states of 267 valid actions at the
#: median, a beam of 16 wrote the action ``score`` chooses among all of them at every state, 8x faster (1.7 s against
#: 13.7 s a step, bf16, one core); 4 at 92 % of them, 1 at 50 %: benchmarks/notes/scienceworld_decode.json)
BEAM = 16


def check_decode(decode: str) -> None:
    """A clear error for a decode that is not one of :data:`DECODES` (the Agent and RunConfig both check)."""
    if decode not in DECODES:
        raise ValueError(f"decode '{decode}': expected one of {', '.join(DECODES)}")


class StepInstrument(Protocol):
    """Something that watches each scoring forward (attention capture, head masking...)."""

    def hooks(self, prompt: BuiltPrompt) -> list[tuple[str, Callable]]: ...

    def on_layout(self, layout: ForwardLayout) -> None: ...

    def after_step(self, prompt: BuiltPrompt, result: ScoreResult) -> None: ...


def build_prompt(builder: PromptBuilder, block: MemoryBlock, room: str, goal: str, history: list[Step],
                 observation: str) -> BuiltPrompt:
    """The action prompt for ``block``'s layout at the state after ``history`` (the loop, teacher forcing and the
    training data all build prompts here, so a layout is the same everywhere by construction).

    ``observation`` is what the agent sees now (ignored at step 0, where it is the room description): the ReAct
    layout prints it after the last action, the working-memory layout as the current observation.
    """
    if block.layout == "working_memory":
        return build_working_memory_prompt(builder, goal, observation if history else room,
                                           block.working_memory, block.reminder, block.reminder_label)
    return builder.build(room, goal, history, memory=block.pieces, reminder=block.reminder,
                         final_observation=observation if history else None, reminder_label=block.reminder_label)


def _span_len(prompt: BuiltPrompt, kind: str) -> int:
    span = prompt.kind_span(kind)
    return 0 if span is None else span[1] - span[0]


@dataclass
class EpisodeResult:
    trajectory: Trajectory
    prompts: list[BuiltPrompt] = field(default_factory=list)
    wall_s: float = 0.0


@dataclass
class Agent:
    """A white-box action model that picks admissible actions by length-normalised log-likelihood.

    Attributes:
        scorer: the :class:`ActionScorer` (its model, its KV cache).
        builder: the :class:`PromptBuilder` for that model's tokenizer.
        keep_prompts: keep every step's BuiltPrompt in the result (the instruments need spans).
        decode: one of :data:`DECODES`: ``score`` (likelihood over admissible commands), ``generate`` (write
            ``Thought:/Action:`` and map the action to an admissible command) or ``generate-verbatim`` (write it
            and execute it as written).
        record_admissible: keep each step's admissible commands in its record (on-policy data needs them to
            label the state and to draw negatives).
        generator: writes the actions when ``decode`` is not ``score`` (default: a :class:`PrefixGenerator` on
            the scorer's model that reuses the prefix's KV cache exactly when the scorer does).
    """

    scorer: ActionScorer
    builder: PromptBuilder
    keep_prompts: bool = False
    decode: str = "score"
    record_admissible: bool = False
    generator: PrefixGenerator | None = None
    beam: int = BEAM

    def __post_init__(self) -> None:
        check_decode(self.decode)
        if self.generator is None:
            self.generator = PrefixGenerator(self.scorer.lm, reuse_cache=self.scorer.reuse_cache)

    @classmethod
    def from_model(cls, lm: Any, reuse_cache: bool = True, instructions: str | None = None,
                   max_prompt_tokens: int | None = None, history_chunk: int = 1, **kw) -> "Agent":
        """An agent over ``lm``; ``instructions``: the action prompt's system text (None: ALFWorld's, the
        prompts' default); ``max_prompt_tokens``: the prompt's budget (None: the model's context);
        ``history_chunk``: how many of the oldest history steps an overflowing prompt drops at a time."""
        budget = lm.n_ctx if max_prompt_tokens is None else min(lm.n_ctx, max_prompt_tokens)
        builder = PromptBuilder(lm.tokenizer, budget, history_chunk=history_chunk,
                                **({"instructions": instructions} if instructions else {}))
        return cls(ActionScorer(lm, reuse_cache=reuse_cache), builder, **kw)

    @classmethod
    def for_benchmark(cls, lm: Any, env: str, **kw) -> "Agent":
        """An agent over ``lm`` as benchmark ``env``'s runs build it: its instructions, its prompt budget and (unless
        ``decode`` is given) its default decode (``workbench.envs.benchmarks``)."""
        from workbench.envs.benchmarks import benchmark

        bench = benchmark(env)
        kw.setdefault("decode", bench.default_decode)
        return cls.from_model(lm, instructions=bench.instructions, max_prompt_tokens=bench.max_prompt_tokens,
                              history_chunk=bench.history_chunk, **kw)

    def build_prompt(self, block: MemoryBlock, room: str, goal: str, history: list[Step],
                     observation: str) -> BuiltPrompt:
        """The action prompt for ``block``'s layout at the state after ``history`` (see :func:`build_prompt`)."""
        return build_prompt(self.builder, block, room, goal, history, observation)

    def decide(self, prompt: BuiltPrompt, admissible: list[str], instruments: list[StepInstrument] = ()) -> ScoreResult:
        """Score every one of ``admissible`` in one forward (the ``score`` decode), the instruments watching it."""
        return self._instrumented(prompt, instruments, lambda hooks, on_layout: self.scorer.score(
            list(prompt.prefix), list(prompt.suffix), admissible, hooks=hooks, on_layout=on_layout))

    def write(self, prompt: BuiltPrompt, admissible: list[str], instruments: list[StepInstrument] = ()):
        """Write one of ``admissible`` (the ``constrained`` decode: :meth:`ActionScorer.write` with :data:`BEAM`);
        the instruments watch the first forward, where q_t is, and receive a WriteResult where ``decide`` hands
        them a ScoreResult."""
        return self._instrumented(prompt, instruments, lambda hooks, on_layout: self.scorer.write(
            list(prompt.prefix), list(prompt.suffix), admissible, beam=self.beam, hooks=hooks,
            on_layout=on_layout if instruments else None))

    @staticmethod
    def _instrumented(prompt: BuiltPrompt, instruments: list[StepInstrument], forward: Callable):
        """``forward(hooks, on_layout)`` with every instrument's hooks active and its layout call, then each
        instrument's ``after_step``."""
        hooks: list[tuple[str, Callable]] = []
        for inst in instruments:
            hooks.extend(inst.hooks(prompt))

        def on_layout(layout: ForwardLayout) -> None:
            for inst in instruments:
                inst.on_layout(layout)

        result = forward(hooks, on_layout)
        for inst in instruments:
            inst.after_step(prompt, result)
        return result

    def run(
        self,
        env: Environment,
        task: Task,
        policy: MemoryPolicy,
        instruments: list[StepInstrument] = (),
        max_steps: int | None = None,
    ) -> EpisodeResult:
        """Play one episode of ``task`` with ``policy`` deciding the memory at each step (an :class:`Episode`
        stepped to its end)."""
        episode = Episode(self, env, task, policy, instruments, max_steps)
        while not episode.done:
            episode.step()
        return episode.result()


@dataclass(frozen=True)
class Decision:
    """The decision an episode faces next: its step, the memory block the policy shows, the action prompt and the
    admissible commands (computed once, before anything is scored)."""

    step: int
    block: MemoryBlock
    prompt: BuiltPrompt
    admissible: tuple[str, ...]


class Episode:
    """One episode played a decision at a time: what :meth:`Agent.run` loops over, and what a live session steps.

    Creating it resets the agent's caches and the environment and begins the policy; :meth:`pending` is the next
    decision (the policy is asked for its block once, when it is first needed); :meth:`step` plays it (the agent
    decides, the environment answers, the policy observes) and returns what the run records for the step;
    :meth:`result` is the episode so far as :meth:`Agent.run` returns it. The operations and their order are those
    of the loop ``Agent.run`` always ran, so an episode stepped to its end is the same episode.
    """

    def __init__(self, agent: Agent, env: Environment, task: Task, policy: MemoryPolicy,
                 instruments: list[StepInstrument] = (), max_steps: int | None = None) -> None:
        self._t0 = time.perf_counter()
        self.agent, self.env, self.task, self.policy = agent, env, task, policy
        self.instruments = list(instruments)
        agent.scorer.reset()
        agent.generator.reset()
        self._res = env.reset(task)
        self.room, self.goal = split_initial_observation(self._res.observation)
        policy.begin(task, self.goal, self.room)
        self.limit = min(max_steps or env.max_steps, env.max_steps)
        self.history: list[Step] = []
        self.records: list[dict] = []
        self.last_distribution: dict[str, float] | None = None  # p over the last scored decision's candidates
        self.prompts: list[BuiltPrompt] = []
        self.observation = self._res.observation
        self.won = False
        self.memory_entry = None
        self._pending: Decision | None = None
        self.done = self.limit <= 0
        # a live fork's edits: the next decision as the agent will face it -> as it faces it under the edits
        self.transform: Callable[[Decision], Decision] | None = None

    @property
    def t(self) -> int:
        """The index of the next decision (the number of steps played)."""
        return len(self.history)

    def pending(self) -> Decision:
        """The next decision, as the agent will face it.

        Raises:
            RuntimeError: the episode is over.
        """
        if self.done:
            raise RuntimeError(f"episode of {self.task.task_id} is over ({self.t} steps, won: {self.won})")
        if self._pending is None:
            block = self.policy.memory(self.t, self.history)
            self.memory_entry = self.memory_entry or (block.entry.entry_id if block.entry else None)
            prompt = self.agent.build_prompt(block, self.room, self.goal, self.history, self.observation)
            decision = Decision(self.t, block, prompt, tuple(self._res.admissible_commands))
            self._pending = self.transform(decision) if self.transform is not None else decision
        return self._pending

    def step(self, action: str | None = None) -> dict:
        """Play the next decision and return what the run records for it.

        Args:
            action: play this admissible command instead of the agent's choice (the record still says what the
                agent scored; ``forced_action`` says what was played). None: the agent's choice.
        """
        agent, d = self.agent, self.pending()
        block, prompt, admissible = d.block, d.prompt, list(d.admissible)
        room, goal, history, obs = self.room, self.goal, self.history, self.observation
        record = {
            "prompt_tokens": prompt.n_tokens,
            "memory_tokens": prompt.memory_tokens,
            "n_candidates": len(admissible),
            "truncated_history": prompt.truncated_history,
            **({"admissible": admissible} if agent.record_admissible else {}),
            **({"reminder": block.reminder, "reminder_tokens": _span_len(prompt, "reminder")}
               if block.reminder else {}),
            **block.record,
        }
        thought = None
        if agent.decode == "constrained":
            w = agent.write(prompt, admissible, self.instruments)
            chosen = admissible[w.best]
            probs = dict(zip(w.scores, ActionScorer.normalise(tuple(w.scores.values()))))
            # p over the candidates the beam finished (the others were pruned: none of their mass is known)
            self.last_distribution = {admissible[i]: p for i, p in probs.items()}
            top = sorted(probs, key=lambda i: -probs[i])[:3]
            record.update(reused_tokens=w.reused_tokens, p_action=probs[w.best], n_finished=len(w.scores),
                          forwards=w.forwards, top=[[admissible[i], round(probs[i], 4)] for i in top])
            if block.reminder:  # what the reminder did: the same state written again without it
                bare = agent.build_prompt(replace(block, reminder=None), room, goal, history, obs)
                again = agent.write(bare, admissible)
                record["reminder_effect"] = written_reminder_effect(block.reminder, admissible, chosen,
                                                                    admissible[again.best])
        elif agent.decode != "score":
            gen = agent.generator.generate(prompt.prefix, prompt.suffix, admissible)
            verbatim = agent.decode == "generate-verbatim"
            chosen, thought = (gen.parsed if verbatim else gen.action), gen.thought
            record.update(generated=gen.text, parsed_action=gen.parsed, exact_parse=gen.exact,
                          reused_tokens=agent.generator.reused_tokens)
            if block.reminder:  # what the reminder did: the same prompt without it, written again
                bare = agent.build_prompt(replace(block, reminder=None), room, goal, history, obs)
                again = agent.generator.generate(bare.prefix, bare.suffix, admissible)
                record["reminder_effect"] = written_reminder_effect(
                    block.reminder, admissible, chosen, again.parsed if verbatim else again.action)
        else:
            scored = agent.decide(prompt, admissible, self.instruments)
            chosen = admissible[scored.best]
            probs = ActionScorer.normalise(scored.scores)
            self.last_distribution = dict(zip(admissible, probs))  # the whole of it, for a live view (not recorded)
            top = sorted(range(len(probs)), key=lambda i: -probs[i])[:3]
            record.update(reused_tokens=scored.reused_tokens, p_action=probs[scored.best],
                          top=[[admissible[i], round(probs[i], 4)] for i in top])
            if block.reminder:  # what the reminder did: the same state scored without it
                bare = agent.build_prompt(replace(block, reminder=None), room, goal, history, obs)
                without = ActionScorer.normalise(agent.decide(bare, admissible).scores)
                record["reminder_effect"] = reminder_effect(block.reminder, admissible, probs, without)
        if action is not None:
            if action not in admissible:
                raise ValueError(f"step {d.step}: {action!r} is not admissible here (admissible: {admissible})")
            record["forced_action"] = action
            chosen = action
        self.records.append(record)
        if agent.keep_prompts:
            self.prompts.append(prompt)
        step = Step(observation=obs, action=chosen, thought=thought)
        res = self.env.step(chosen)
        step = step.model_copy(update={"reward": res.reward, "done": res.done})
        history.append(step)
        self.policy.observe(step, res.observation)
        self._res, self._pending = res, None
        self.observation, self.won = res.observation, res.won
        self.done = res.done or self.t >= self.limit
        return record

    def trajectory(self) -> Trajectory:
        """The episode so far as a Trajectory (the whole episode once :attr:`done`)."""
        return Trajectory(
            task_id=self.task.task_id, task_type=self.task.task_type, goal=self.goal, initial_observation=self.room,
            steps=tuple(self.history), success=self.won, source=f"agent:{self.agent.scorer.lm.name}",
            split=self.task.split,
            meta={"final_observation": self.observation, "memory_policy": self.policy.name,
                  "memory_entry": self.memory_entry, "steps": self.records,
                  # a graded benchmark's score (ScienceWorld: 0-100); ALFWorld's is success itself
                  **({"score": self.env.score} if getattr(self.env, "score", None) is not None else {})},
        )

    def result(self) -> EpisodeResult:
        """What :meth:`Agent.run` returns: the trajectory, the prompts (when the agent keeps them), the wall time."""
        return EpisodeResult(trajectory=self.trajectory(), prompts=self.prompts, wall_s=time.perf_counter() - self._t0)
