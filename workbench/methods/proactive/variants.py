"""The proactive memory agent and the paper's four ablations as entries of one registry.

====================  =====================  ===================================================================
variant               phase 1 (the bank)     what the action agent gets
====================  =====================  ===================================================================
proactive             tool calls             phase 2: a memory-grounded reminder, or silence (selective)
proactive-passive     tool calls             the bank itself in every action prompt; no phase 2
proactive-always      tool calls             phase 2 at every trigger, never silent: when the memory agent
                                             would stay silent, the bank's BM25-best entries for the current
                                             state become the reminder
proactive-advisor     none (no bank)         phase 2 over the window alone (an empty bank): advice, no memory
proactive-retrieval   none (no bank)         general retrieval: the BM25-best past steps of the trajectory
                                             (action and outcome) for goal + current observation, as the reminder
====================  =====================  ===================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.llm.errors import LLMOutputError
from workbench.memory.retrieval import bm25_tokens
from workbench.methods.proactive.stage_types import BankView
from workbench.registry import Registry

__all__ = ["ProactiveVariant", "get_variant", "list_variants", "register_variant", "VARIANTS_TOP_K",
           "Selective", "Always", "Passive", "Advisor", "Retrieval"]

VARIANTS_TOP_K = 3  # entries / past steps a fallback or retrieval reminder quotes


def _phase2(policy, step: int, rec: dict, bank: BankView, stage: str = "proactive_intervene") -> str | None:
    try:
        return policy.timed_stage(stage, policy.payload(step, bank), rec).reminder
    except LLMOutputError as e:
        rec["errors"].append({"phase": 2, "error": type(e).__name__, "reason": e.reason})
        rec["phase2_error"] = True  # no reminder is injected, but it is no decision to stay silent
        return None


class Selective:
    """Phase 2 as the paper runs it: a reminder or an explicit null."""

    every_step = False

    def speak(self, policy, step: int, rec: dict) -> tuple[str | None, str]:
        view, _ = policy.bank.view(policy.query())
        return _phase2(policy, step, rec, view), "Reminder"


class Always:
    """Always-on injection: phase 2, and the bank's best entries whenever it would stay silent."""

    every_step = False

    def speak(self, policy, step: int, rec: dict) -> tuple[str | None, str]:
        view, _ = policy.bank.view(policy.query())
        text = _phase2(policy, step, rec, view)
        if text:
            return text, "Reminder"
        shown = policy.bank.visible(policy.query(), limit=VARIANTS_TOP_K)
        if not shown:
            return None, "Reminder"  # an empty bank has nothing to inject
        rec["fallback"] = True
        return " ".join(e.content.rstrip(".") + "." for e in shown), "Reminder"


class Passive:
    """Passive bank exposure: the bank (never the status) in every action prompt, no phase 2."""

    every_step = True

    def speak(self, policy, step: int, rec: dict) -> tuple[str | None, str]:
        text = policy.bank.render_for_actor(policy.query())
        return (f"\n{text}" if text else None), "Memory bank"


class Advisor:
    """Advisor-only: phase 2 without a bank, through its own prompt (``proactive_advise``: advice from the task and
    the recent steps; the memory agent's prompt would ask for reminders "drawn from the memory bank")."""

    every_step = False

    def speak(self, policy, step: int, rec: dict) -> tuple[str | None, str]:
        return _phase2(policy, step, rec, BankView(), stage="proactive_advise"), "Reminder"


class Retrieval:
    """General retrieval: BM25 over the trajectory's past steps as the reminder (no memory agent)."""

    every_step = False

    def speak(self, policy, step: int, rec: dict) -> tuple[str | None, str]:
        from rank_bm25 import BM25Okapi

        steps = policy._steps
        if not steps:
            return None, "Reminder"
        after = [s.observation for s in steps[1:]] + [policy._obs]
        docs = [f"{s.action} -> {o.strip()}" for s, o in zip(steps, after)]
        scores = BM25Okapi([bm25_tokens(d) or ["<empty>"] for d in docs]).get_scores(
            bm25_tokens(f"{policy._goal} {policy._obs}"))
        top = sorted(range(len(docs)), key=lambda k: (-scores[k], -k))[:VARIANTS_TOP_K]
        return "Earlier: " + " | ".join(f"step {k}: {docs[k]}" for k in sorted(top)), "Reminder"


@dataclass(frozen=True)
class ProactiveVariant:
    name: str
    manages: bool  # phase 1 runs and keeps a bank
    speaker: object
    description: str = ""


_VARIANTS: Registry[ProactiveVariant] = Registry("proactive variant")


def register_variant(v: ProactiveVariant) -> ProactiveVariant:
    return _VARIANTS.register(v.name, v)


def get_variant(name: str) -> ProactiveVariant:
    return _VARIANTS.get(name)


def list_variants() -> list[str]:
    return _VARIANTS.names()


register_variant(ProactiveVariant("proactive", True, Selective(), "bank through four tools; reminder or silence"))
register_variant(ProactiveVariant("proactive-passive", True, Passive(), "passive bank exposure"))
register_variant(ProactiveVariant("proactive-always", True, Always(), "always-on injection"))
register_variant(ProactiveVariant("proactive-advisor", False, Advisor(), "advisor-only (no bank)"))
register_variant(ProactiveVariant("proactive-retrieval", False, Retrieval(), "general retrieval (BM25 over the trajectory)"))
