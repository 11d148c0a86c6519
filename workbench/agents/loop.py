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

__all__ = ["DECODES", "check_decode", "StepInstrument", "Agent", "EpisodeResult", "build_prompt"]

# How the action model acts. ``score``: pick the admissible command of highest length-normalised likelihood (the
# SmolLM2 default; the agent cannot write an invalid command). ``generate``: write ``Thought:/Action:``, parse the
# action and map it to an admissible command (closest by words when no exact match). ``generate-verbatim``: write
# it and execute the action as written, as a ReAct agent in the papers does, so ALFWorld answers an invalid
# command "Nothing happens." (what MemArbiter's failure-response metrics, Table 5 (a), count).
DECODES = ("score", "generate", "generate-verbatim")


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

    def __post_init__(self) -> None:
        check_decode(self.decode)
        if self.generator is None:
            self.generator = PrefixGenerator(self.scorer.lm, reuse_cache=self.scorer.reuse_cache)

    @classmethod
    def from_model(cls, lm: Any, reuse_cache: bool = True, **kw) -> "Agent":
        return cls(ActionScorer(lm, reuse_cache=reuse_cache), PromptBuilder(lm.tokenizer, lm.n_ctx), **kw)

    def build_prompt(self, block: MemoryBlock, room: str, goal: str, history: list[Step],
                     observation: str) -> BuiltPrompt:
        """The action prompt for ``block``'s layout at the state after ``history`` (see :func:`build_prompt`)."""
        return build_prompt(self.builder, block, room, goal, history, observation)

    def decide(self, prompt: BuiltPrompt, admissible: list[str], instruments: list[StepInstrument] = ()) -> ScoreResult:
        hooks: list[tuple[str, Callable]] = []
        for inst in instruments:
            hooks.extend(inst.hooks(prompt))

        def on_layout(layout: ForwardLayout) -> None:
            for inst in instruments:
                inst.on_layout(layout)

        result = self.scorer.score(list(prompt.prefix), list(prompt.suffix), admissible, hooks=hooks, on_layout=on_layout)
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
        """Play one episode of ``task`` with ``policy`` deciding the memory at each step."""
        t0 = time.perf_counter()
        self.scorer.reset()
        self.generator.reset()
        res = env.reset(task)
        room, goal = split_initial_observation(res.observation)
        policy.begin(task, goal, room)
        limit = min(max_steps or env.max_steps, env.max_steps)
        history: list[Step] = []
        records: list[dict] = []
        prompts: list[BuiltPrompt] = []
        obs = res.observation
        won = False
        memory_entry = None
        for t in range(limit):
            block = policy.memory(t, history)
            memory_entry = memory_entry or (block.entry.entry_id if block.entry else None)
            prompt = self.build_prompt(block, room, goal, history, obs)
            admissible = list(res.admissible_commands)
            record = {
                "prompt_tokens": prompt.n_tokens,
                "memory_tokens": prompt.memory_tokens,
                "n_candidates": len(admissible),
                "truncated_history": prompt.truncated_history,
                **({"admissible": admissible} if self.record_admissible else {}),
                **({"reminder": block.reminder, "reminder_tokens": _span_len(prompt, "reminder")}
                   if block.reminder else {}),
                **block.record,
            }
            thought = None
            if self.decode != "score":
                gen = self.generator.generate(prompt.prefix, prompt.suffix, admissible)
                verbatim = self.decode == "generate-verbatim"
                action, thought = (gen.parsed if verbatim else gen.action), gen.thought
                record.update(generated=gen.text, parsed_action=gen.parsed, exact_parse=gen.exact,
                              reused_tokens=self.generator.reused_tokens)
                if block.reminder:  # what the reminder did: the same prompt without it, written again
                    bare = self.build_prompt(replace(block, reminder=None), room, goal, history, obs)
                    again = self.generator.generate(bare.prefix, bare.suffix, admissible)
                    record["reminder_effect"] = written_reminder_effect(
                        block.reminder, admissible, action, again.parsed if verbatim else again.action)
            else:
                scored = self.decide(prompt, admissible, instruments)
                action = admissible[scored.best]
                probs = ActionScorer.normalise(scored.scores)
                top = sorted(range(len(probs)), key=lambda i: -probs[i])[:3]
                record.update(reused_tokens=scored.reused_tokens, p_action=probs[scored.best],
                              top=[[admissible[i], round(probs[i], 4)] for i in top])
                if block.reminder:  # what the reminder did: the same state scored without it
                    bare = self.build_prompt(replace(block, reminder=None), room, goal, history, obs)
                    without = ActionScorer.normalise(self.decide(bare, admissible).scores)
                    record["reminder_effect"] = reminder_effect(block.reminder, admissible, probs, without)
            records.append(record)
            if self.keep_prompts:
                prompts.append(prompt)
            step = Step(observation=obs, action=action, thought=thought)
            res = env.step(action)
            step = step.model_copy(update={"reward": res.reward, "done": res.done})
            history.append(step)
            policy.observe(step, res.observation)
            obs, won = res.observation, res.won
            if res.done:
                break
        traj = Trajectory(
            task_id=task.task_id, task_type=task.task_type, goal=goal, initial_observation=room,
            steps=tuple(history), success=won, source=f"agent:{self.scorer.lm.name}", split=task.split,
            meta={"final_observation": obs, "memory_policy": policy.name, "memory_entry": memory_entry,
                  "steps": records},
        )
        return EpisodeResult(trajectory=traj, prompts=prompts, wall_s=time.perf_counter() - t0)
