"""The MemArbiter policy on real ALFWorld expert trajectories (offline state parser and writer, no model):
records, budgets, variants, and bad LLM replies that leave the banks as they were."""

from __future__ import annotations

import json

import pytest

from workbench.envs.memory_base import expert_trajectories_for
from workbench.eval.config import RunConfig, policy_for, select_tasks
from workbench.llm.offline import OfflineALFWorldBackend
from workbench.llm.protocol import ChatResult
from workbench.memory.tokens import count_o200k
from workbench.methods.arbiter import ROW_FIELDS, ArbiterPolicy, list_variants
from workbench.methods.arbiter.assembly import block_text


@pytest.fixture(scope="module")
def experts():
    exps = expert_trajectories_for("valid_unseen")
    tasks = {t.task_id: t for t in select_tasks(RunConfig(out="x", tasks="all"))}
    by_type = {}
    for e in exps:
        by_type.setdefault(e.task_type, e)
    return [(e, tasks[e.task_id]) for e in by_type.values()]


def play(policy, expert, task):
    policy.begin(task, expert.goal, expert.initial_observation)
    blocks = []
    for k, st in enumerate(expert.steps):
        blocks.append(policy.memory(k, list(expert.steps[:k])))
        policy.observe(st, expert.steps[k + 1].observation if k + 1 < expert.n_steps else "")
    return blocks


@pytest.mark.parametrize("variant", list_variants())
@pytest.mark.parametrize("budget", [120, 500])
def test_every_variant_stays_within_budget_and_records_each_step(experts, variant, budget):
    pol = ArbiterPolicy(budget=budget, variant=variant)
    for expert, task in experts:
        blocks = play(pol, expert, task)
        created = set()
        for k, b in enumerate(blocks):
            assert b.layout == "working_memory"
            text = block_text(b.working_memory)
            assert count_o200k(text) == b.record["wm"]["o200k"] <= budget
            rec = b.record["arbiter"]
            assert not rec["errors"]
            created |= {d["id"] for d in rec["new_items"]}
            for row in rec["items"]:
                assert len(row) == len(ROW_FIELDS) and row[0] in created  # every row's item was described once
                assert row[2] in "FAH" and row[3] in "FAH" and 0.0 <= row[4] <= 1.0
            shown = {p.item: p.band for p in b.working_memory if p.kind == "wm_item"}
            assert {r[0]: r[3] for r in rec["items"] if r[3] != "H"} == shown
        json.dumps([b.record for b in blocks])  # records are plain JSON


def test_goal_is_focal_from_the_first_step_and_the_task_state_follows_the_agent(experts):
    expert, task = experts[0]
    blocks = play(ArbiterPolicy(budget=500), expert, task)
    first = block_text(blocks[0].working_memory)
    assert f"Task goal: {expert.goal}" in first
    locations = [b.record["arbiter"]["state"]["location"] for b in blocks]
    snapshots = [p.text for b in blocks for p in b.working_memory if p.kind == "wm_item" and p.bank == "task_state"]
    assert len(snapshots) == len(blocks)  # exactly one live snapshot shown per step
    assert any(loc and loc in snapshots[i] for i, loc in enumerate(locations))


def test_no_banks_renders_one_pool(experts):
    expert, task = experts[0]
    blocks = play(ArbiterPolicy(budget=500, variant="no-banks"), expert, task)
    heads = {p.text for b in blocks for p in b.working_memory if p.kind == "wm_bank"}
    assert heads == {"Memory:\n"}


class _Faulty:
    """The offline backend, except that the writer answers ``reply`` at the given steps (and to its repair)."""

    name, model, uses_context = "faulty", "test", True

    def __init__(self, reply: str, steps: set[int]) -> None:
        self.inner, self.reply, self.steps = OfflineALFWorldBackend(), reply, steps

    def chat(self, messages, **kw):
        ctx = kw.get("context") or {}
        if ctx.get("stage") == "arbiter_writer" and ctx["input"]["step"] in self.steps:
            return ChatResult(text=self.reply, finish_reason="stop", backend=self.name, model=self.model)
        return self.inner.chat(messages, **kw)


LONG = "apple " * 400
BAD_REPLIES = {
    "unknown bank": ('{"items": [{"bank": "wishes", "focal": "x", "ambient": "x"}]}', "LLMOutputError"),
    "missing focal": ('{"items": [{"bank": "reference", "entities": ["apple 1"]}]}', "LLMOutputError"),
    "missing bank": ('{"items": [{"focal": "apple 1 is on desk 1."}]}', "LLMOutputError"),
    "no items": ('{}', "LLMOutputError"),
    "not json": ("I think the apple is somewhere.", "LLMOutputError"),
    "over-long item": ('{"items": [{"bank": "reference", "focal": "%s", "ambient": "a"}]}' % LONG, "InvalidWriteError"),
}


@pytest.mark.parametrize("case", list(BAD_REPLIES))
def test_bad_writer_reply_is_a_typed_error_and_the_step_goes_on_with_the_previous_banks(experts, case):
    reply, error = BAD_REPLIES[case]
    expert, task = experts[1]
    bad = {2}
    pol = ArbiterPolicy(budget=500, backend=_Faulty(reply, bad))
    pol.begin(task, expert.goal, expert.initial_observation)
    snapshots = []
    for k, st in enumerate(expert.steps):
        before = pol.store.items()
        b = pol.memory(k, list(expert.steps[:k]))
        snapshots.append((before, pol.store.items(), b))
        pol.observe(st, expert.steps[k + 1].observation if k + 1 < expert.n_steps else "")
    for k, (before, after, b) in enumerate(snapshots):
        errors = b.record["arbiter"]["errors"]
        if k in bad:
            assert [e["error"] for e in errors] == [error] and errors[0]["stage"] == "arbiter_writer"
            assert after == before  # nothing of the bad write was applied
            assert b.working_memory  # the step still has its memory block
        else:
            assert not errors
    assert len(snapshots[-1][1]) > len(snapshots[1][1])  # later steps write again


def test_state_parser_failure_keeps_the_previous_state(experts):
    expert, task = experts[1]

    class BadParser(_Faulty):
        def chat(self, messages, **kw):
            ctx = kw.get("context") or {}
            if ctx.get("stage") == "arbiter_state_parser" and ctx["input"]["history"] and len(ctx["input"]["history"]) == 2:
                return ChatResult(text="{}", finish_reason="stop", backend=self.name, model=self.model)
            return self.inner.chat(messages, **kw)

    blocks = play(ArbiterPolicy(backend=BadParser("", set())), expert, task)
    assert blocks[2].record["arbiter"]["errors"][0]["stage"] == "arbiter_state_parser"
    assert blocks[2].record["arbiter"]["state"]["subgoal"] == blocks[1].record["arbiter"]["state"]["subgoal"]


def test_run_config_resolves_options_and_refuses_options_a_policy_does_not_take():
    cfg = RunConfig(out="x", memory="arbiter", ablation="no-gate")
    assert (cfg.budget, cfg.backend, cfg.method) == (500, "offline-alfworld", "arbiter/no-gate@500")
    assert policy_for(cfg).name == "arbiter/no-gate"
    assert RunConfig(out="x", memory="flat-recency", budget=750).method == "flat-recency@750"
    with pytest.raises(ValueError, match="--ablation does not apply to --memory flat-recency"):
        RunConfig(out="x", memory="flat-recency", ablation="no-gate")
    with pytest.raises(ValueError, match="--budget does not apply to --memory traj"):
        RunConfig(out="x", memory="traj", budget=500)
    with pytest.raises(ValueError, match="ablation 'no-memory': expected one of no-banks, no-signals, no-gate"):
        RunConfig(out="x", memory="arbiter", ablation="no-memory")
    with pytest.raises(ValueError, match="unknown memory policy 'arbitrer'"):
        RunConfig(out="x", memory="arbitrer")
