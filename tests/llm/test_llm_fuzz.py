"""Fuzz the structured-output path with seeded malformed model replies.

Every case must end in a validated object or a typed LLMOutputError; any other exception is a crash.
Mutations that keep the JSON's meaning (prose, fences, think blocks, trailing commas) must parse to exactly
the original object on the first try.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from llm_cases import EXPERT_PLAN, failed_run, memory_clean_tomato

from workbench.llm import (
    ChatResult,
    LLMOutputError,
    ScriptedBackend,
    ToolCall,
    chat_json,
    chat_tools,
    format_text_tool_call,
    get_backend,
    run_stage,
)
from workbench.methods.agmr.stage_types import (
    FailureReflection,
    RedundantSegment,
    Refinement,
    ReflectorInput,
    RetrievalAnalysis,
    SegmentEdit,
    SuccessReflection,
)
from workbench.methods.arbiter.stage_types import (
    CandidateItem,
    CandidateWrites,
    ParsedState,
)
from workbench.methods.proactive.stage_types import PROACTIVE_TOOLS, Intervention

N_JSON_CASES = 240
N_TOOL_CASES = 120

VALID = [
    Intervention(reminder="'open drawer 1' failed before; try the countertop."),
    Intervention(reminder=None),
    FailureReflection(critical_step=3, wrong_action="go to fridge 1", correct_action="go to sinkbasin 1",
                      supporting_segment=2, reason="skipped cleaning"),
    SuccessReflection(redundant_segments=(RedundantSegment(index=0, reason="wander"), RedundantSegment(index=3))),
    Refinement(pattern="distracted_by_irrelevant", target_segment=2, distractor_segments=(4,),
               edits=(SegmentEdit(index=2, op="replace", text="Thought: key\nAction: go to sinkbasin 1"),
                      SegmentEdit(index=5, op="delete")), rationale="r"),
    CandidateWrites(items=(CandidateItem(bank="reference", focal="apple 1 is on countertop 2.",
                                         ambient="apple 1 @ countertop 2", entities=("apple 1",)),)),
    ParsedState(subgoal="take the apple", completed=("find a apple",), location="countertop 2"),
    RetrievalAnalysis(failure_reason="never cleaned", key_step=3, key_action="clean apple 1 with sinkbasin 1",
                      key_segment=3, key_context="Action: clean tomato 1 with sinkbasin 1"),
]

KEEPS_MEANING = {"prose", "fence", "nested_fence", "think", "trailing_comma", "pretty"}


def _wrong_type(obj: dict, rng: random.Random) -> dict:
    k = rng.choice(list(obj))
    return {**obj, k: rng.choice([[1, 2], {"a": 1}, 3.5e300, -7, True, "", "x" * 50, None])}


def _drop_key(obj: dict, rng: random.Random) -> dict:
    out = dict(obj)
    out.pop(rng.choice(list(out)), None)
    return out


def mutate(model, rng: random.Random) -> tuple[str, str]:
    """A (kind, text) malformed or re-wrapped rendering of a valid object."""
    obj = json.loads(model.model_dump_json())
    text = json.dumps(obj)
    kind = rng.choice(["truncate", "wrong_type", "drop_key", "unknown_key", "prose", "fence", "nested_fence",
                       "think", "unclosed_think", "trailing_comma", "pretty", "empty", "garbage", "single_quotes",
                       "deep_nesting", "nan", "array", "null", "bad_enum", "python_repr", "duplicate_key",
                       "only_fence", "control_chars"])
    if kind == "truncate":
        return kind, text[: rng.randrange(0, max(len(text) - 1, 1))]
    if kind == "wrong_type":
        return kind, json.dumps(_wrong_type(obj, rng))
    if kind == "drop_key":
        return kind, json.dumps(_drop_key(obj, rng))
    if kind == "unknown_key":
        return kind, json.dumps({**obj, "confidence": 0.9})
    if kind == "prose":
        return kind, f"Let me think about this carefully.\n{text}\nThat is my answer."
    if kind == "fence":
        return kind, f"```json\n{text}\n```"
    if kind == "nested_fence":
        return kind, f"````\n```json\n{text}\n```\n````"
    if kind == "think":
        return kind, f"<think>maybe {{\"reminder\": 1}} or not</think>{text}"
    if kind == "unclosed_think":
        return kind, f"<think>I keep thinking {text}"
    if kind == "trailing_comma":
        return kind, text[:-1] + ",}" if text.endswith("}") else text
    if kind == "pretty":
        return kind, json.dumps(obj, indent=rng.choice([1, 2, 4]))
    if kind == "empty":
        return kind, rng.choice(["", " ", "\n\n", "\t"])
    if kind == "garbage":
        alphabet = "{}[]\":,abc 123\\nul\u00e9\u4e2d\U0001f600`<>/"
        return kind, "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 400)))
    if kind == "single_quotes":
        return kind, text.replace('"', "'")
    if kind == "deep_nesting":
        depth = rng.choice([50, 2000, 20000])
        return kind, "[" * depth + "]" * depth
    if kind == "nan":
        return kind, text.replace("3", "NaN", 1) if "3" in text else '{"reminder": NaN}'
    if kind == "array":
        return kind, json.dumps([obj])
    if kind == "null":
        return kind, "null"
    if kind == "bad_enum":
        return kind, text.replace("distracted_by_irrelevant", "confused").replace("reference", "gossip")
    if kind == "python_repr":
        return kind, repr(obj)
    if kind == "duplicate_key":
        k = next(iter(obj))
        return kind, text[:-1] + f', "{k}": {json.dumps(obj[k])}}}'
    if kind == "only_fence":
        return kind, "```json\n```"
    return kind, text.replace(" ", "\x00", 2)


def _run_json(model, first: str, second: str):
    backend = ScriptedBackend([first, second])
    try:
        out = chat_json(backend, [{"role": "user", "content": "answer"}], type(model))
    except LLMOutputError as e:
        assert len(e.raw) == 2 and e.reason
        return "error", None
    assert isinstance(out.value, type(model))
    return ("repaired" if out.repaired else "first"), out.value


def test_fuzz_json_outputs_never_crash() -> None:
    rng = random.Random(1234)
    outcomes: Counter[str] = Counter()
    for _ in range(N_JSON_CASES):
        model = rng.choice(VALID)
        kind, first = mutate(model, rng)
        # The repair reply is itself malformed half the time, and the valid object otherwise.
        second = mutate(model, rng)[1] if rng.random() < 0.5 else model.model_dump_json()
        outcome, value = _run_json(model, first, second)
        outcomes[outcome] += 1
        if kind in KEEPS_MEANING:
            assert outcome == "first" and value == model, (kind, first)
        if outcome == "repaired" and second == model.model_dump_json():
            assert value == model
    assert sum(outcomes.values()) == N_JSON_CASES
    assert outcomes["first"] and outcomes["repaired"] and outcomes["error"], outcomes


def mutate_tools(rng: random.Random) -> str | ChatResult:
    good = format_text_tool_call("memory_save_knowledge", {"id": "loc:apple_1", "content": "apple 1 @ counter"})
    kind = rng.randrange(12)
    if kind == 0:
        return format_text_tool_call(rng.choice(["memory_wipe", "rm", "", "memory save"]), {"id": "x"})
    if kind == 1:
        return good[: rng.randrange(1, len(good))]
    if kind == 2:
        return format_text_tool_call("memory_delete", {"id": rng.choice(["", "has space", "x" * 80, "ok:id"])})
    if kind == 3:
        args = rng.choice(['"{bad"', "[1]", "7", '{"id": 5}'])
        return '<tool_call>{"name": "memory_delete", "arguments": ' + args + "}</tool_call>"
    if kind == 4:
        return "<tool_call>" + "".join(rng.choice("<>/={}\"abc") for _ in range(rng.randrange(0, 80))) + "</tool_call>"
    if kind == 5:
        return ChatResult(tool_calls=(ToolCall(name=rng.choice(["memory_delete", "nope"]),
                                               arguments=rng.choice([{}, {"id": "a", "extra": 1}, {"id": "ok"}])),))
    if kind == 6:
        return format_text_tool_call("memory_update_status", {"status": rng.choice(["", "fine", 42])})
    if kind == 7:
        return "I will not call any tools today."
    if kind == 8:
        return f"```\n{good}\n```" + good.replace("</tool_call>", "")
    if kind == 9:
        return "<tool_call><function=memory_save_procedural><parameter=id>p</parameter></function></tool_call>"
    if kind == 10:
        return f"<think>{good}</think>"  # a call only "thought about" is not made
    return good + "\n" + good


def test_fuzz_tool_outputs_never_crash() -> None:
    rng = random.Random(99)
    outcomes: Counter[str] = Counter()
    for _ in range(N_TOOL_CASES):
        replies = [mutate_tools(rng), mutate_tools(rng)]
        try:
            out = chat_tools(ScriptedBackend(replies), [{"role": "user", "content": "update"}], PROACTIVE_TOOLS)
        except LLMOutputError as e:
            assert e.stage == "tool_calls" and len(e.raw) == 2
            outcomes["error"] += 1
            continue
        names = {t.name for t in PROACTIVE_TOOLS}
        assert all(c.name in names for c in out.value)
        outcomes["repaired" if out.repaired else "first"] += 1
    assert outcomes["first"] and outcomes["repaired"] and outcomes["error"], outcomes


@pytest.mark.parametrize("seed", range(5))
def test_offline_stage_output_survives_a_wrapping_round_trip(seed: int) -> None:
    """What the offline backend returns, wrapped the way chatty models wrap it, still parses identically."""
    rng = random.Random(seed)
    payload = ReflectorInput(memory=memory_clean_tomato(), trajectory=failed_run(), expert_plan=EXPERT_PLAN)
    truth = run_stage(get_backend("offline-alfworld"), "reflector_failure", payload).value
    kind = rng.choice(sorted(KEEPS_MEANING))
    while True:
        k, text = mutate(truth, rng)
        if k == kind:
            break
    assert chat_json(ScriptedBackend([text]), [{"role": "user", "content": "x"}], FailureReflection).value == truth
