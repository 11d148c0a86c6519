"""Every memory layout the workbench evaluates, as training data: one layout per training sequence, drawn
uniformly, so that no method's prompt gets more weight than another's (agent v2, issue 14 item 3).

A *layout* is a memory condition of an evaluation: the policy that writes the memory part of the action prompt,
with its options. The training sequence of one trajectory under one layout is built by replaying that policy
along the trajectory exactly as teacher forcing does (``policy.begin``, then ``memory`` / ``observe`` step by
step) and building each step's prompt with :func:`workbench.agents.loop.build_prompt`, the function the
episode loop uses: the prompt a model is trained on is the prompt it is evaluated on, by construction.

The layouts (``LAYOUTS``): ReAct (no memory), ICL, Traj; Flat Recency, Flat Retrieval, MemArbiter and its three
ablations at a budget drawn from {500, 750} o200k tokens; the proactive memory agent (its reminders, or
silence, on that state) and its four ablations (passive bank, always-on, advisor-only, general retrieval). The
stateful ones run their offline algorithms (the backends every table names).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.agents.policy import build_policy, predated_options
from workbench.envs.base import Task
from workbench.memory.trajectory import Trajectory
from workbench.training.data import _stable_seed

__all__ = ["Layout", "LAYOUTS", "BUDGETS", "LayoutSampler", "layout_policy", "layout_counts", "task_of"]

BUDGETS = (500, 750)


@dataclass(frozen=True)
class Layout:
    """A memory condition: ``memory`` policy name, its ablation and budget (None: not budgeted)."""

    memory: str
    ablation: str | None = None
    budgeted: bool = False
    budget: int | None = None

    @property
    def name(self) -> str:
        base = self.memory + (f"/{self.ablation}" if self.ablation else "")
        return base + (f"@{self.budget}" if self.budget else "")

    @property
    def family(self) -> str:
        """The layout without its budget (what the uniform draw is over)."""
        return self.memory + (f"/{self.ablation}" if self.ablation else "")


LAYOUTS: tuple[Layout, ...] = (
    Layout("none"), Layout("icl"), Layout("traj"),
    Layout("flat-recency", budgeted=True), Layout("flat-retrieval", budgeted=True),
    Layout("arbiter", budgeted=True), Layout("arbiter", "no-banks", budgeted=True),
    Layout("arbiter", "no-signals", budgeted=True), Layout("arbiter", "no-gate", budgeted=True),
    Layout("proactive"), Layout("proactive-passive"), Layout("proactive-always"), Layout("proactive-advisor"),
    Layout("proactive-retrieval"),
)


class LayoutSampler:
    """The layout of one (trajectory, epoch): uniform over ``layouts``, then a budget uniform over ``BUDGETS``.

    A pure function of (seed, task, source, epoch), so a resumed training run sees the same data.
    """

    def __init__(self, layouts: Sequence[Layout] = LAYOUTS, seed: int = 0, budgets: Sequence[int] = BUDGETS):
        if not layouts:
            raise ValueError("LayoutSampler needs at least one layout")
        self.layouts, self.seed, self.budgets = tuple(layouts), seed, tuple(budgets)

    def __call__(self, traj: Trajectory, epoch: int) -> Layout:
        rng = random.Random(_stable_seed(self.seed, traj.task_id, traj.source, traj.meta.get("rollout", ""), epoch))
        lay = rng.choice(self.layouts)
        if lay.budgeted:
            lay = Layout(lay.memory, lay.ablation, True, rng.choice(self.budgets))
        return lay


def layout_policy(layout: Layout):
    """A fresh memory policy for ``layout`` (the same construction as ``workbench run``), with the options agent
    v2 was trained under: an option added since (the proactive memory agent's window, 10 then, 8 now by default)
    at the value it predates (``PolicyOptions.PREDATES``), so training data and its fingerprint stay as trained."""
    return build_policy(layout.memory, budget=layout.budget, ablation=layout.ablation,
                        **predated_options(layout.memory))


def task_of(traj: Trajectory) -> Task:
    """The Task a policy's ``begin`` needs (its id excludes the own game from retrieval)."""
    return Task(task_id=traj.task_id, split=traj.split or "valid_train", task_type=traj.task_type, path="")


def layout_counts(chosen: Sequence[Layout]) -> dict:
    """The mixture, as the model card states it: sequences per layout family and per budget."""
    return {"by_layout": dict(sorted(Counter(l.family for l in chosen).items())),
            "by_budget": dict(sorted(Counter(str(l.budget) for l in chosen if l.budget).items()))}
