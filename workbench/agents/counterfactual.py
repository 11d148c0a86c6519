"""What a reminder did: the same state re-scored without it (a counterfactual only a white-box agent allows).

At a step whose prompt carries a reminder (the proactive memory agent's, or the passive bank line), the loop
scores the identical prompt with the reminder line removed — same history, same candidates, same model — and
records:

    p_action            p(chosen action) with the reminder (softmax over the admissible commands)
    p_action_without    p(the same action) without it
    action_without      what the agent would have chosen without it
    p_alt_with          p(action_without) with the reminder; p_alt_without: without it
    tv                  total-variation distance between the two distributions (0: the reminder moved nothing)
    changed             the reminder changed the choice

    mentions            admissible commands the reminder contains verbatim (all of them: the raw evidence)
    followed            the choice did what the reminder said (:func:`follows`): of the commands it names
                        (:func:`named_commands`: a one-word command such as look or inventory is named only when
                        quoted), a warning (the reminder says stop / avoid / already / failed / do not / don't /
                        never) is followed when the chosen action is none of them; any other reminder ("go to
                        fridge 1 instead") when it is one of them; None when it names no command. For reminders
                        that quote the past (general retrieval, the passive bank) "followed" only means repeating a
                        quoted command: read it for the memory agent's own reminders

The summaries (``workbench.eval.interventions``, the notebook's tables, the explorer) recompute ``followed`` from
the stored ``mentions``, the reminder and the action with :func:`follows`, so records written under an older rule
are judged by the current one.

An agent that writes its action (``decode`` generate / generate-verbatim) has no distribution over the commands:
at its reminder steps the loop writes the action again from the prompt without the reminder
(:func:`written_reminder_effect`: ``written``, ``action_without``, ``changed``, ``mentions``, ``followed``; the
same rule, the written commands compared case- and space-insensitively).

p_action - p_action_without is biased upward: the action is the argmax *with* the reminder, so even an
irrelevant sentence shows a positive mean; p_alt_without - p_alt_with is biased the same way for the other
choice. ``tv`` is symmetric and selection-free: the summary reports all three.

Retrieval heads' attention to the reminder span needs the attention instruments (``workbench.attention``) and
the prompt's ``reminder`` span; this module only re-scores.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from workbench.envs.alfworld_text import normalize

__all__ = ["reminder_effect", "written_reminder_effect", "choice_shift", "argmax", "mentioned_commands",
           "named_commands", "follows", "is_warning"]

_WARN = re.compile(r"\b(stop|avoid|already|failed|fails|do not|don't|never)\b", re.I)


def mentioned_commands(reminder: str, admissible: Sequence[str]) -> list[str]:
    text = " ".join(reminder.lower().split())
    return [c for c in admissible if re.search(rf"(?<![a-z0-9]){re.escape(c.lower())}(?![a-z0-9])", text)]


def named_commands(reminder: str, mentions: Sequence[str]) -> list[str]:
    """The commands of ``mentions`` (:func:`mentioned_commands`) that the reminder names: a one-word command (look,
    inventory) counts only when quoted, since "turn on a desklamp to look at it" does not name the command look."""
    text = reminder.lower()
    return [m for m in mentions if " " in m.strip() or f"'{m.lower()}'" in text or f'"{m.lower()}"' in text]


def is_warning(reminder: str) -> bool:
    return bool(_WARN.search(reminder))


def follows(reminder: str, action: str, mentions: Sequence[str]) -> bool | None:
    """Did ``action`` do what the reminder said (the module docstring's rule)? None when it names no command."""
    named = {normalize(c) for c in named_commands(reminder, mentions)}
    if not named:
        return None
    return (normalize(action) not in named) if is_warning(reminder) else (normalize(action) in named)


def written_reminder_effect(reminder: str, admissible: Sequence[str], action: str, action_without: str) -> dict:
    """The record of one reminder for an agent that writes its action: ``action`` written with the reminder,
    ``action_without`` written from the same prompt without it (greedy both times)."""
    mentions = mentioned_commands(reminder, admissible)
    return {"written": True, "action_without": action_without,
            "changed": normalize(action) != normalize(action_without),
            "mentions": mentions, "followed": follows(reminder, action, mentions)}


def argmax(xs: Sequence[float]) -> int:
    """The index of the largest value, the first of tied maxima (as the scorer picks)."""
    return max(range(len(xs)), key=xs.__getitem__)


def choice_shift(probs_with: Sequence[float], probs_without: Sequence[float]) -> tuple[int, int, float]:
    """``(best, alt, tv)`` of two distributions over the same commands: the choice with and without (the first
    of tied maxima, as the scorer picks), and their total-variation distance."""
    best, alt = argmax(probs_with), argmax(probs_without)
    return best, alt, 0.5 * sum(abs(a - b) for a, b in zip(probs_with, probs_without))


def reminder_effect(reminder: str, admissible: Sequence[str], probs_with: Sequence[float],
                    probs_without: Sequence[float]) -> dict:
    """The record of one reminder (module docstring) from both score vectors over ``admissible``."""
    best, alt, tv = choice_shift(probs_with, probs_without)
    mentions = mentioned_commands(reminder, admissible)
    return {"p_action": round(probs_with[best], 5), "p_action_without": round(probs_without[best], 5),
            "action_without": admissible[alt], "p_alt_with": round(probs_with[alt], 5),
            "p_alt_without": round(probs_without[alt], 5), "tv": round(tv, 5), "changed": best != alt,
            "mentions": mentions, "followed": follows(reminder, admissible[best], mentions)}
