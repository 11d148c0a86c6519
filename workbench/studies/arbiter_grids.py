"""MemArbiter's evaluation (Tables 2, 4, 5, Figure 3 SR@k) and the two analyses beyond the paper, as functions
notebook 05 calls.

Run folders are ``ROOT/<model>/<condition>`` with conditions named ``<method>-<budget>`` (``arbiter-500``,
``flat-recency-750``, ``arbiter-no-gate-500``), all on the same tasks, model and dtype, read by the one table
renderer.

The paper's agent writes its actions, so an invalid command is a failed execution ("Nothing happens.") that the
Episodic and Constraint banks record and Table 5 (a) measures: ``decode="generate-verbatim"``. The grid's default
is ``decode="score"`` (the admissible command of highest likelihood), because the SmolLM2 agents cannot recover
from a failed execution: they were cloned on admissible actions and never saw one. Measured on the default
profile's two tasks (2026-12-04): agent v2 written verbatim failed every episode of all nine conditions, repeating
the failed action (adjacent repetition 0.91 for MemArbiter at 500; "go to desk 1" while at desk 1), where
scoring solved both with MemArbiter. A scoring agent never fails a command, so Table 5 (a) is empty for it; pass
``decode="generate-verbatim"`` with a model that writes commands (Qwen2.5-7B, Llama-3.1-8B) for the paper's
setting. The two analyses beyond the paper re-score admissible commands and always play in ``score`` mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from workbench.eval.config import RunConfig

__all__ = ["VERBATIM", "condition_name", "ADOPT_ACROSS_BUDGETS", "budget_pairs", "SENSITIVITY_BUDGETS", "sensitivity_configs", "arbiter_configs", "METHODS", "REFERENCE", "reference_configs", "verbatim_configs"]


VERBATIM = "verbatim"


def condition_name(memory: str, budget: int, ablation: str | None = None) -> str:
    return f"{memory}{'-' + ablation if ablation else ''}-{budget}"


#: Methods whose block does not grow with the budget unless the budget binds, so at a larger budget they adopt the
#: smallest budget's episodes where the memory is the same at every step (``drive(..., same_memory=...)``). Flat
#: Recency's window of history grows with the budget: it would only wait, so it plays both.
ADOPT_ACROSS_BUDGETS = ("arbiter", "flat-retrieval")


def budget_pairs(cfgs: Sequence, reference_budget: int = 500) -> list[tuple]:
    """``(configuration, reference)`` pairs for :func:`workbench.eval.driver.drive`'s ``same_memory``: each
    :data:`ADOPT_ACROSS_BUDGETS` method without ablation at another budget, with itself at ``reference_budget``
    (where there is none, at its smallest budget among ``cfgs``): 750 and the sensitivity budgets take 500's
    episodes where the block was never cut (the pairs of ``grids/arbiter_valid_unseen.yaml``)."""
    ref = {}
    for c in sorted(cfgs, key=lambda c: (c.budget != reference_budget, c.budget or 0)):
        if c.memory in ADOPT_ACROSS_BUDGETS and c.ablation is None:
            ref.setdefault(c.memory, c)
    return [(c, ref[c.memory]) for c in cfgs
            if c.memory in ref and c.ablation is None and c is not ref[c.memory]]


#: Beyond the paper: budgets under the paper's two, where MemArbiter's and Flat Retrieval's blocks are cut. At 500
#: and 750 they are not (Table 5's P_t columns), so 750 *is* 500 for them; these show what a binding budget does.
SENSITIVITY_BUDGETS = (150, 250)


def sensitivity_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                        budgets: Sequence[int] = SENSITIVITY_BUDGETS, dtype: str = "float32",
                        backend: str | None = None, decode: str = "score") -> list:
    """The budget-sensitivity runs (beyond the paper): each :data:`ADOPT_ACROSS_BUDGETS` method at ``budgets`` on
    ``tasks`` (a slice of Table 2's), in folders ``<method>-<budget>`` beside Table 2's. Paired with Table 2's
    500 by :func:`budget_pairs`, an episode whose block 500 never had to cut is adopted, not played."""
    return [c for c in arbiter_configs(model, split, tasks, max_steps, root, budgets=budgets, ablations=(),
                                       dtype=dtype, backend=backend, decode=decode)
            if c.memory in ADOPT_ACROSS_BUDGETS]


def arbiter_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                    budgets: Sequence[int] = (500, 750), ablations: Sequence[str] = ("no-banks", "no-signals", "no-gate"),
                    ablation_budget: int = 500, dtype: str = "float32", backend: str | None = None,
                    decode: str = "score") -> list:
    """MemArbiter, Flat Retrieval and Flat Recency at every budget, and the ablations at ``ablation_budget``
    (``decode``: how the action model acts; the paper's is ``generate-verbatim``, see the module docstring)."""
    out = Path(root) / model
    common = dict(split=split, tasks=tasks, model=model, max_steps=max_steps, dtype=dtype, teacher_forcing=False,
                  decode=decode)
    cfgs = []
    for b in budgets:
        for memory in ("arbiter", "flat-retrieval", "flat-recency"):
            extra = {"backend": backend} if memory == "arbiter" and backend else {}
            cfgs.append(RunConfig(out=str(out / condition_name(memory, b)), memory=memory, budget=b, **extra, **common))
    for a in ablations:
        extra = {"backend": backend} if backend else {}
        cfgs.append(RunConfig(out=str(out / condition_name("arbiter", ablation_budget, a)), memory="arbiter",
                              budget=ablation_budget, ablation=a, **extra, **common))
    return cfgs


METHODS = ("arbiter", "flat-retrieval", "flat-recency")


#: The folder of the reference run: the action agent alone with its raw history (the ReAct layout, no P_t).
REFERENCE = "none"


def reference_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path, dtype: str = "float32",
                      decode: str = "score") -> list:
    """The action agent alone, with the raw history in its prompt (ReAct, ``memory="none"``), on the same tasks,
    model, dtype and decode: not a row of the paper's tables, but what every working-memory method replaces. A
    flat block below it means that block is worse than no arbitration at all for this agent. Notebook 05 reads
    notebook 01's episodes of the same parameters (adopted) instead of playing them again."""
    return [RunConfig(out=str(Path(root) / model / REFERENCE), memory="none", split=split, tasks=tasks, model=model,
                      max_steps=max_steps, dtype=dtype, teacher_forcing=False, decode=decode)]


def verbatim_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path, budget: int = 500,
                     dtype: str = "float32", backend: str | None = None, reference: bool = True) -> list:
    """Table 5 (a) in the paper's setting: MemArbiter, Flat Retrieval and Flat Recency at ``budget`` with the
    actions written by the model and executed as written (``decode="generate-verbatim"``), so a command the game
    cannot execute is a failed execution ("Nothing happens.") that the next steps must recover from. A scoring
    agent (the grid's ``decode="score"``) only picks admissible commands, which ALFWorld always executes, so its
    Table 5 (a) has no failure to measure. Folders ``<memory>-<budget>-verbatim``: :func:`arbiter_configs` at
    ``budget`` without ablations, written; with ``reference``, also the action agent alone with its raw history,
    written (``none-verbatim``: :func:`reference_configs`; notebook 06 plays the same run, and notebook 05 reads it
    from there)."""
    from dataclasses import replace

    cfgs = arbiter_configs(model, split, tasks, max_steps, root, budgets=(budget,), ablations=(), dtype=dtype,
                           backend=backend, decode="generate-verbatim")
    if reference:
        cfgs += reference_configs(model, split, tasks, max_steps, root, dtype=dtype, decode="generate-verbatim")
    return [replace(c, out=f"{c.out}-{VERBATIM}") for c in cfgs]
