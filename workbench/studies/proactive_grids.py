"""The proactive memory agent's evaluation (notebook 06): the method, its four ablations and the unchanged action
agent alone, as run folders ``ROOT/<model>/<condition>`` on the same tasks, model and dtype; what the reminders did
(the counterfactual re-score every run records) and whether the retrieval heads read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from workbench.eval.config import RunConfig
from workbench.methods.proactive.variants import list_variants

__all__ = ["SILENT_UNTIL_SPOKEN", "proactive_configs", "VERBATIM", "verbatim_configs", "silent_pairs"]


#: Variants that show the action agent nothing until the memory agent speaks: where it stays silent for a whole
#: episode, the prompts are the action agent's alone at every step and the episode is ``none``'s.
SILENT_UNTIL_SPOKEN = ("proactive", "proactive-advisor")


def proactive_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                      variants: Sequence[str] | None = None, baselines: Sequence[str] = ("none",), interval: int = 1,
                      triggers: Sequence[str] = (), dtype: str = "float32", backend: str | None = None,
                      window: int | None = None) -> list:
    """One run per baseline (``none``: the action agent alone) and per variant (default: all five); ``window``:
    the memory agent's (None: the method's default, 8)."""
    out = Path(root) / model
    common = dict(split=split, tasks=tasks, model=model, max_steps=max_steps, dtype=dtype, teacher_forcing=False)
    cfgs = [RunConfig(out=str(out / b), memory=b, **common) for b in baselines]
    for v in variants or list_variants():
        cfgs.append(RunConfig(out=str(out / v), memory=v, interval=interval, triggers=tuple(triggers), window=window,
                              **({"backend": backend} if backend else {}), **common))
    return cfgs


#: The folder suffix of the written-action runs (:func:`verbatim_configs`).
VERBATIM = "verbatim"


def verbatim_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                     variants: Sequence[str] = ("proactive",), interval: int = 1, triggers: Sequence[str] = (),
                     dtype: str = "float32", backend: str | None = None, window: int | None = None) -> list:
    """The action agent alone and the method with the actions written by the model and executed as written
    (``decode="generate-verbatim"``), in folders ``<condition>-verbatim``.

    A scoring agent picks admissible commands, which ALFWorld always executes: it never fails a command, so the
    memory agent's rule for a known dead end (a command that failed before) never fires. An agent that writes its
    action fails commands ("Nothing happens.") and repeats them; there the memory agent's warnings can matter. At
    every reminder step the loop also writes the action again without the reminder
    (:func:`workbench.agents.counterfactual.written_reminder_effect`)."""
    from dataclasses import replace

    return [replace(c, out=f"{c.out}-{VERBATIM}", decode="generate-verbatim")
            for c in proactive_configs(model, split, tasks, max_steps, root, variants=variants, interval=interval,
                                       triggers=triggers, dtype=dtype, backend=backend, window=window)]


def silent_pairs(cfgs: Sequence) -> list[tuple]:
    """``(configuration, none)`` pairs for :func:`workbench.eval.driver.drive`'s ``same_memory``: the
    :data:`SILENT_UNTIL_SPOKEN` variants adopt the action agent's episodes on which the memory agent never speaks
    (the pairs of ``grids/proactive_valid_unseen.yaml``)."""
    none = next((c for c in cfgs if c.memory == "none"), None)
    return [] if none is None else [(c, none) for c in cfgs if c.memory in SILENT_UNTIL_SPOKEN]
