"""One agent for both benchmarks (issue 48): ScienceWorld's gold trajectories beside ALFWorld's data, each rendered
as its own benchmark's agent sees it.

A ScienceWorld trajectory is built with ScienceWorld's action-prompt instructions
(:data:`workbench.envs.scienceworld.INSTRUCTIONS`) and under the layouts that run on ScienceWorld: ReAct (no
memory), ICL and Traj over the ScienceWorld memory base (the gold trajectories of ``train@10``; a trajectory never
retrieves its own variation). The working-memory and proactive layouts run ALFWorld's offline algorithms and are
not drawn for it. Like an on-policy rollout (``--on-policy-states K``), a gold path trains on at most K of its steps a
visit, drawn anew each epoch (seeded): whole, a 200-step inclined-plane path under ReAct costs ~1.1M tokens a visit
(its prompts reach the context at every step), against ~4k for an ALFWorld expert trajectory. ALFWorld's
trajectories are rendered exactly as agent v2's recipe renders them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.memory.trajectory import Trajectory
from workbench.training.data import _stable_seed
from workbench.training.layouts import Layout

__all__ = ["SCIENCEWORLD_LAYOUTS", "JointData", "is_scienceworld", "scienceworld_trajectories"]

#: the layouts a ScienceWorld trajectory is drawn under (uniformly, as LayoutSampler draws ALFWorld's)
SCIENCEWORLD_LAYOUTS: tuple[Layout, ...] = (Layout("none"), Layout("icl"), Layout("traj"))


def is_scienceworld(traj: Trajectory) -> bool:
    """A ScienceWorld trajectory (its split is one of the wheel's: train, dev, test)."""
    from workbench.envs.scienceworld import SPLITS

    return traj.split in SPLITS


def scienceworld_trajectories(split: str) -> list[Trajectory]:
    """The successful gold trajectories of ScienceWorld's ``split`` (train variations only: ``train`` or
    ``train@N``), computed where the cache lacks them.

    Raises:
        ValueError: a split other than train (dev and test are what the agent is evaluated on).
    """
    from workbench.envs.scienceworld import parse_split
    from workbench.envs.scienceworld_experts import gold_trajectories

    if parse_split(split)[0] != "train":
        raise ValueError(f"--scienceworld {split}: the agent trains on ScienceWorld's train variations only "
                         "(train or train@N); dev and test are evaluated")
    return [t for t in gold_trajectories(split, progress=True) if t.success and t.steps]


@dataclass
class JointData:
    """How ScienceWorld's trajectories are rendered: their prompt builder, their layout draw, their policies."""

    builder: Any
    seed: int = 0
    layouts: Sequence[Layout] = SCIENCEWORLD_LAYOUTS
    memory_base: str = ""
    _policies: dict = field(default_factory=dict)

    @property
    def pack_tokens(self) -> int:
        """The bound of one packed ScienceWorld example: the prompt budget and 1,024 tokens of branches, so a
        visit's states share one forward as long as their prompts extend one another (they fit the budget, or share a
        :data:`~workbench.envs.scienceworld.HISTORY_CHUNK` window of the history drop). ALFWorld's bound
        (``--max-pack-tokens``, 3,072) gave every state past it a forward of its own. On the 289 train@10 gold paths
        (epoch 0, 10 states a visit; ``benchmarks/joint_packing.py``): 1.20 examples and 2.7k tokens a visit on
        average, against 2.32 and 6.9k with ALFWorld's bound and a one-step drop; the longest visits still take up
        to 6 forwards. The loss is the same either way (summed per target token over the update)."""
        return self.builder.max_tokens + 1024

    @classmethod
    def build(cls, tokenizer: Any, n_ctx: int, seed: int = 0) -> "JointData":
        from workbench.envs.scienceworld import HISTORY_CHUNK, INSTRUCTIONS, PROMPT_TOKENS
        from workbench.envs.scienceworld_experts import default_scienceworld_base
        from workbench.prompts.layout import PromptBuilder

        # the prompt budget ScienceWorld's runs use (an 8k-token sequence took 18 GB to train here)
        return cls(PromptBuilder(tokenizer, min(n_ctx, PROMPT_TOKENS), instructions=INSTRUCTIONS,
                                 history_chunk=HISTORY_CHUNK), seed,
                   memory_base=str(default_scienceworld_base().root))

    def layout(self, traj: Trajectory, epoch: int) -> Layout:
        """The layout of one (trajectory, epoch): uniform over :attr:`layouts`, a pure function of the seed, the
        task and the epoch (a resumed run sees the same data)."""
        rng = random.Random(_stable_seed(self.seed, "scienceworld", traj.task_id, traj.source, epoch))
        return rng.choice(tuple(self.layouts))

    def policy(self, layout: Layout):
        """A memory policy of ``layout`` over the ScienceWorld memory base (one per layout, reused: ``begin``
        resets it)."""
        from workbench.agents.policy import build_policy

        if layout.name not in self._policies:
            opts = {"memory_base": self.memory_base} if layout.memory in ("icl", "traj") else {}
            self._policies[layout.name] = build_policy(layout.memory, **opts)
        return self._policies[layout.name]

    def prompt_fingerprint(self, traj: Trajectory, max_pack_tokens: int) -> str:
        """A hash of how ScienceWorld's trajectories are rendered: ``traj`` under each of :attr:`layouts` (a resume
        never mixes two renderings)."""
        import hashlib

        from workbench.training.data import build_policy_examples

        h = hashlib.sha256()
        for lay in self.layouts:
            for ex in build_policy_examples(traj, self.builder, self.policy(lay), None, max_pack_tokens):
                h.update(repr((ex.prefix, ex.suffix, [(s.prefix_len, s.target) for s in ex.steps])).encode())
        return h.hexdigest()[:16]
