"""The retrieval supervision set: transitions, the template analyzer, exact key spans, the LLM path, file I/O."""

from __future__ import annotations

import json
import random

import pytest
from agent_tiny import ENTRY, PLAN, TASK, FixedEntry, build_agent_lm, expert
from attention_tiny import MARKERS, PLANTED, plain_tokens

from workbench.attention import (
    SupervisionRecord,
    load_supervision,
    save_supervision,
    score_heads,
    supervision_pairs,
    supervision_summary,
    template_segment,
)
from workbench.llm import ScriptedBackend
from workbench.memory.trajectory import Step, Trajectory, TrajectoryFormatError
from workbench.prompts.layout import PromptBuilder
from workbench.studies.supervision import (
    StepTransition,
    build_step_level,
    build_task_level,
    step_transitions,
    task_transitions,
)


@pytest.fixture(scope="module")
def agent_lm():
    return build_agent_lm()


@pytest.fixture(scope="module")
def builder(agent_lm):
    return PromptBuilder(agent_lm.tokenizer, 4096)


def test_template_analyzer_matches_template_then_object_type_then_earliest():
    segs = ["go to countertop 1", "take knife 1 from countertop 1", "go to fridge 1",
            "take apple 2 from diningtable 1", "take apple 1 from countertop 2", "open fridge 1"]
    assert template_segment(segs, "take apple 3 from countertop 1") == 4  # object and receptacle types
    assert template_segment(segs, "take apple 3 from shelf 1") == 3  # object type, earliest
    assert template_segment(segs, "take mug 1 from shelf 1") == 1  # template only: earliest
    assert template_segment(segs, "go to fridge 2") == 2
    assert template_segment(segs, "go to shelf 1") == 0
    assert template_segment(segs, "put apple 1 in/on fridge 1") is None  # no segment shares the template
    assert template_segment(segs, "jump around") is None


def test_step_transitions_keep_only_steps_memory_corrected():
    none = [{"task_id": "a", "step": 0, "expert": "x", "chosen": "y"},
            {"task_id": "a", "step": 1, "expert": "z", "chosen": "z"},
            {"task_id": "b", "step": 0, "expert": "x", "chosen": "w"}]
    traj = [{"task_id": "a", "step": 0, "expert": "x", "chosen": "x", "memory_entry": "m"},
            {"task_id": "a", "step": 1, "expert": "z", "chosen": "z", "memory_entry": "m"},  # right both times
            {"task_id": "b", "step": 0, "expert": "x", "chosen": "v", "memory_entry": "m"},  # wrong both times
            {"task_id": "c", "step": 0, "expert": "x", "chosen": "x", "memory_entry": "m"}]  # no baseline
    assert step_transitions(none, traj) == [StepTransition("a", 0, "x", "y", "m")]


def test_task_transitions_pair_failures_without_memory_with_successes():
    def run(tid, ok):
        return Trajectory(task_id=tid, goal="g", success=ok)

    pairs = task_transitions([run("a", False), run("b", False), run("c", True)],
                             [run("a", True), run("b", False), run("c", True), run("d", True)])
    assert [(f.task_id, s.task_id) for f, s in pairs] == [("a", "a")]


def test_step_level_key_spans_are_the_supporting_segment_tokens(builder, agent_lm):
    transitions = [StepTransition(TASK.task_id, k, PLAN[k], "look", ENTRY.entry_id) for k in range(len(PLAN))]
    records = build_step_level(builder, [expert()], {TASK.task_id: TASK}, FixedEntry(), transitions,
                               model_name=agent_lm.name, split="valid_unseen", progress=False)
    assert [r.key_segment for r in records] == [0, 1, 2, 3, 4]
    tok = agent_lm.tokenizer
    for r in records:
        decoded = "".join(tok.decode(r.token_ids[a:b]) for a, b in r.key_spans)
        assert decoded == r.key_context
        assert ENTRY.segments[r.key_segment].action in decoded
        assert ENTRY.segments[r.key_segment].observation not in decoded or not ENTRY.segments[r.key_segment].observation
        assert r.formatted_prompt == tok.decode(r.token_ids)
        assert r.source == "step-level" and r.analyzer == "template" and r.wrong_action == "look"
    # segment 0 has a thought: its key span holds thought and action tokens
    assert len(records[0].key_spans) == 2 and "think:" in records[0].key_context
    # the prompt is the teacher-forced one at that step: the expert's history up to it
    assert "> go to countertop 1" in records[2].formatted_prompt.split("Now it is your turn")[1]
    assert supervision_summary(records)["step-level"] == 5


def test_step_level_refuses_a_memory_other_than_the_scored_one(builder):
    with pytest.raises(ValueError, match="used 'other-entry'"):
        build_step_level(builder, [expert()], {TASK.task_id: TASK}, FixedEntry(),
                         [StepTransition(TASK.task_id, 1, PLAN[1], "look", "other-entry")], progress=False)


def test_llm_analyzer_path_uses_the_backends_segment(builder):
    reply = json.dumps({"failure_reason": "r", "key_step": 1, "key_action": PLAN[1], "key_segment": 3,
                        "key_context": "open fridge 1"})
    backend = ScriptedBackend([reply])
    records = build_step_level(builder, [expert()], {TASK.task_id: TASK}, FixedEntry(),
                               [StepTransition(TASK.task_id, 1, PLAN[1], "look")], analyzer=backend, progress=False)
    assert records[0].key_segment == 3 and records[0].analyzer == "llm:scripted"
    sent = backend.calls[0][0][-1].content
    assert "take apple 1 from countertop 1" in sent and "look" in sent


def test_task_level_with_the_offline_analyzer(builder):
    ok = expert()
    failed = ok.model_copy(update={"steps": tuple(Step(observation=s.observation, action="look") for s in ok.steps),
                                   "success": False})
    records = build_task_level(builder, [(failed, ok)], {TASK.task_id: TASK}, FixedEntry())
    rec = records[0]
    # the first interaction the failed run never did is "take apple 1 from countertop 1" (step 1)
    assert rec.step == 1 and rec.target_action == PLAN[1] and rec.key_segment == 1
    assert rec.source == "task-level" and "> go to countertop 1" in rec.formatted_prompt.split("your turn")[1]


def test_records_round_trip_and_bad_files_name_file_record_field(tmp_path, builder):
    records = build_step_level(builder, [expert()], {TASK.task_id: TASK}, FixedEntry(),
                               [StepTransition(TASK.task_id, 1, PLAN[1], "look")], progress=False)
    path = save_supervision(tmp_path / "sup.jsonl", records)
    assert load_supervision(path) == records
    good = json.loads(path.read_text().splitlines()[0])
    bad = dict(good, key_spans=[[0, len(good["token_ids"]) + 5]])
    missing = {k: v for k, v in good.items() if k != "target_action"}
    path.write_text("\n".join(json.dumps(x) for x in (good, bad)) + "\n")
    with pytest.raises(TrajectoryFormatError, match=r"sup\.jsonl: line 2: .*key_spans"):
        load_supervision(path)
    path.write_text(json.dumps(missing) + "\n")
    with pytest.raises(TrajectoryFormatError, match=r"line 1: field 'target_action'"):
        load_supervision(path)
    with pytest.raises(ValueError, match="q_t"):
        SupervisionRecord(**dict(good, key_spans=[[0, len(good["token_ids"])]]))


def test_supervision_on_planted_markers_ranks_the_planted_head_first(tiny_lm):
    rng = random.Random(3)
    records = []
    for i in range(4):
        tokens = plain_tokens(30, rng)
        spans = [(5 + i, 6 + i), (12, 13), (20 - i, 21 - i)]
        for (a, _), m in zip(spans, MARKERS):
            tokens[a] = m
        records.append(SupervisionRecord(task_id=f"t{i}", step=0, key_context="markers", formatted_prompt="",
                                         token_ids=tokens, key_spans=spans, target_action="x", source="user",
                                         analyzer="constructed"))
    scores = score_heads(tiny_lm, supervision_pairs(records, tiny_lm), progress=False)
    assert scores.top_k(1) == [PLANTED]
