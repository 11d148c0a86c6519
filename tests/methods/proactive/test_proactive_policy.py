"""The proactive memory agent on real ALFWorld trajectories (offline memory agent, no model): triggers, transient
reminders, the four ablations, and a fuzz of phase-1 / phase-2 replies (zero crashes, bank never half-edited)."""

from __future__ import annotations

import copy
import json
import random

import pytest

from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, policy_for, select_tasks
from workbench.llm.protocol import ChatResult, ToolCall
from workbench.llm.tools import format_text_tool_call
from workbench.memory.trajectory import Step, Trajectory
from workbench.methods.proactive import ProactivePolicy, list_variants


@pytest.fixture(scope="module")
def episode():
    """An expert trajectory turned into a looping, failing one (what the memory agent is for)."""
    e = next(x for x in expert_trajectories_for("valid_unseen") if x.task_type == "clean")
    task = {t.task_id: t for t in select_tasks(RunConfig(out="x", tasks="all"))}[e.task_id]
    steps = list(e.steps[:3])
    loop = [Step(observation=steps[-1].observation, action="go to drawer 1"),
            Step(observation="The drawer 1 is closed.", action="open drawer 9"),
            Step(observation="Nothing happens.", action="open drawer 9"),
            Step(observation="Nothing happens.", action="go to drawer 1"),
            Step(observation="The drawer 1 is closed.", action="go to drawer 1")]
    return e.model_copy(update={"steps": tuple(steps + loop)}), task


def play(policy, traj: Trajectory, task):
    policy.begin(task, traj.goal, traj.initial_observation)
    blocks = []
    for k, st in enumerate(traj.steps):
        blocks.append(policy.memory(k, list(traj.steps[:k])))
        policy.observe(st, traj.steps[k + 1].observation if k + 1 < traj.n_steps else "Nothing happens.")
    return blocks


def test_reminders_are_transient_and_grounded(episode):
    traj, task = episode
    pol = ProactivePolicy()
    blocks = play(pol, traj, task)
    recs = [b.record["proactive"] for b in blocks]
    assert all(r["trigger"] == "interval" for r in recs)  # k = 1: every step
    spoke = [k for k, b in enumerate(blocks) if b.reminder]
    assert spoke and any(not b.reminder for b in blocks)  # it speaks sometimes and stays silent otherwise
    for k, (b, r) in enumerate(zip(blocks, recs)):
        assert r["silent"] == (b.reminder is None) and r["reminder"] == b.reminder
        assert r["n_calls"] == 2 and r["latency_ms"] >= 0
    assert any("failed before" in (b.reminder or "") or "repeating" in (b.reminder or "") for b in blocks)
    assert "fail:open_drawer_9" in pol.bank.entries  # the failure went through a tool call into the bank
    json.dumps([b.record for b in blocks])


def test_a_first_failure_is_no_known_dead_end(episode):
    """Phase 1 saves the failure it is answering before phase 2 reads the bank: that entry alone must not make
    phase 2 say the action "has failed before" (it had not); the second failure of the same action does."""
    traj, task = episode
    pol = ProactivePolicy()
    blocks = play(pol, traj, task)
    assert traj.steps[4].action == traj.steps[5].action == "open drawer 9"
    assert traj.steps[5].observation == traj.steps[6].observation == "Nothing happens."
    first, second = blocks[5].reminder or "", blocks[6].reminder or ""
    assert "failed before" not in first
    assert second.startswith("'open drawer 9' has failed before")
    assert pol.bank.entries["fail:open_drawer_9"].created == 5  # saved by step 5's phase 1, kept since


def test_interval_and_event_triggers(episode):
    traj, task = episode
    blocks = play(ProactivePolicy(interval=4, events=("failed",)), traj, task)
    why = [b.record["proactive"]["trigger"] for b in blocks]
    assert why[0] == "interval" and why[4] == "interval"
    assert why[6] == "failed"  # step 6 follows the first "Nothing happens."
    assert all(b.reminder is None for b, w in zip(blocks, why) if w is None)
    assert all(b.record["proactive"]["n_calls"] == 0 for b, w in zip(blocks, why) if w is None)


def test_ablations(episode):
    traj, task = episode
    runs = {v: play(ProactivePolicy(v), traj, task) for v in list_variants()}
    passive = runs["proactive-passive"]
    assert all(b.reminder_label == "Memory bank" for b in passive if b.reminder)
    assert all("step " not in (b.reminder or "").split("\n")[0] for b in passive)  # never the private status
    assert all(b.record["proactive"]["n_calls"] == 1 for b in passive)  # phase 1 only
    always = runs["proactive-always"]
    assert all(b.reminder for b in always[1:])  # never silent once the bank holds something
    advisor = runs["proactive-advisor"]
    assert all(b.record["proactive"]["bank"] == 0 and b.record["proactive"]["n_calls"] == 1 for b in advisor)
    retrieval = runs["proactive-retrieval"]
    assert all(b.record["proactive"]["n_calls"] == 0 for b in retrieval)  # no memory agent at all
    assert retrieval[3].reminder.startswith("Earlier: step ")


def test_run_config_options():
    cfg = RunConfig(out="x", memory="proactive-always", interval=3, triggers=("failed",))
    assert cfg.method == "proactive-always/k=3+failed" and policy_for(cfg).trigger.interval == 3
    assert RunConfig(out="x", memory="proactive").interval == 1
    with pytest.raises(ValueError, match="--interval does not apply to --memory arbiter"):
        RunConfig(out="x", memory="arbiter", interval=2)
    with pytest.raises(ValueError, match="trigger 'bored'"):
        RunConfig(out="x", memory="proactive", triggers=("bored",))


# -- fuzz -----------------------------------------------------------------------------------------------------
def _calls(rng: random.Random) -> list[ToolCall]:
    ids = ["loc:apple_1", "fail:x", "k", "bad id with spaces", "x" * 80, "", "loc:mug_2"]
    out = []
    for _ in range(rng.randint(0, 5)):
        name = rng.choice(["memory_update_status", "memory_save_knowledge", "memory_save_procedural", "memory_delete",
                           "memory_wipe", "save"])
        args = {"memory_update_status": {"status": rng.choice(["ok", "", "s" * 700, "at desk 1"])},
                "memory_delete": {"id": rng.choice(ids)}}.get(name, {"id": rng.choice(ids),
                                                                     "content": rng.choice(["a fact", "", "c" * 500])})
        if rng.random() < 0.1:
            args["extra"] = 1
        if rng.random() < 0.1:
            args.pop(next(iter(args)))
        out.append(ToolCall(name=name, arguments=args))
    return out


class FuzzBackend:
    name, model, uses_context = "fuzz", "fuzz", True

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.cases = 0

    def chat(self, messages, **kw):
        self.cases += 1
        stage = (kw.get("context") or {}).get("stage")
        r = self.rng.random()
        if stage == "proactive_update":
            calls = _calls(self.rng)
            if r < 0.4:
                return ChatResult(tool_calls=tuple(calls), finish_reason="tool_calls", backend="fuzz")
            if r < 0.7:
                return ChatResult(text="".join(format_text_tool_call(c.name, c.arguments) for c in calls), backend="fuzz")
            return ChatResult(text=self.rng.choice(["", "I will update the bank.", "<tool_call><function=memory_delete>",
                                                    '{"name": "memory_delete"}']), backend="fuzz")
        return ChatResult(text=self.rng.choice(['{"reminder": null}', '{"reminder": "check the fridge"}',
                                                '{"reminder": ""}', "{}", "silence", "", '{"reminder": 3}',
                                                '{"reminder": "x", "why": 1}', "null"]), backend="fuzz")


def _content(bank):
    """The bank without access counts (reading it counts as access)."""
    return bank.status, [(e.id, e.kind, e.content, e.created, e.updated, e.tags) for e in bank.entries.values()]


def test_fuzzed_replies_never_crash_and_never_half_edit_the_bank(episode):
    traj, task = episode
    cases = errors = 0
    for seed in range(30):
        backend = FuzzBackend(seed)
        pol = ProactivePolicy(backend=backend)
        pol.begin(task, traj.goal, traj.initial_observation)
        for k, st in enumerate(traj.steps):
            before = copy.deepcopy(pol.bank)
            block = pol.memory(k, list(traj.steps[:k]))
            rec = block.record["proactive"]
            replay = copy.deepcopy(before)
            applied, errs = replay.apply([ToolCall(**c) for c in rec["calls"]], step=k)
            assert not errs and _content(replay) == _content(pol.bank)  # exactly before + the applied calls
            assert all(e["error"] in ("ToolCallError", "LLMOutputError", "BankCallError") for e in rec["errors"])
            assert block.reminder is None or block.reminder.strip()
            # an unusable phase-2 reply is flagged, and is no decision to stay silent
            assert rec.get("phase2_error", False) == any(e["phase"] == 2 for e in rec["errors"])
            assert not (rec.get("phase2_error") and rec["silent"])
            errors += len(rec["errors"])
            pol.observe(st, traj.steps[k + 1].observation if k + 1 < traj.n_steps else "")
        cases += backend.cases
    print(f"proactive fuzz: {cases} memory-agent replies, {errors} typed errors logged, 0 crashes, "
          "the bank never half-edited")
    assert cases > 500 and errors > 100  # many replies, many of them bad, zero crashes


def test_a_model_backed_memory_agent_records_each_replys_fate(episode):
    """With a model (here scripted) each step's record keeps its stage calls: a bank reply whose every call is refused
    counts as rejected (nothing applied), a prose reply that repairs to valid JSON as repaired."""
    from workbench.llm import ScriptedBackend

    traj, task = episode
    bad_call = format_text_tool_call("memory_delete", {"id": "loc:nothing_there"})
    pol = ProactivePolicy(backend=ScriptedBackend([bad_call, "hmm", '{"reminder": null}']))
    pol.begin(task, traj.goal, traj.initial_observation)
    rec = pol.memory(0, []).record["proactive"]
    assert [(c["stage"], c["fate"], c["requests"]) for c in rec["stage_calls"]] == [
        ("proactive_update", "rejected", 1), ("proactive_intervene", "repaired", 2)]
    assert rec["stage_calls"][0]["reason"].startswith("all 1 tool call(s) refused") and len(pol.bank) == 0
    assert rec["silent"] is True
