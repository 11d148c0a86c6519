"""JSON extraction, schema validation and text-form tool calls."""

from __future__ import annotations

import time

import pytest

from workbench.llm import (
    LLMOutputError,
    ToolCall,
    ToolCallError,
    extract_json_candidates,
    format_text_tool_call,
    parse_json_as,
    parse_text_tool_calls,
    validate_tool_calls,
)
from workbench.methods.agmr.stage_types import FailureReflection
from workbench.methods.proactive.stage_types import PROACTIVE_TOOLS, Intervention

GOOD = '{"critical_step": 3, "wrong_action": "go to fridge 1", "correct_action": "go to sinkbasin 1", ' \
       '"supporting_segment": 2, "reason": "skipped cleaning"}'


@pytest.mark.parametrize("wrapped", [
    GOOD,
    f"Sure! Here is the analysis:\n{GOOD}\nLet me know if you need more.",
    f"```json\n{GOOD}\n```",
    f"```\n{GOOD}\n```",
    f"````markdown\n```json\n{GOOD}\n```\n````",
    f"<think>the step {{3}} looks wrong</think>\n{GOOD}",
    f"```json\n{{not json}}\n```\nAfter fixing: ```json\n{GOOD}\n```",
    GOOD.replace('"skipped cleaning"}', '"skipped cleaning",}'),  # trailing comma
    "Use {braces} like this. " + GOOD,  # a stray unclosed brace in prose before the object
])
def test_json_is_found_in_prose_fences_and_think_blocks(wrapped: str) -> None:
    out = parse_json_as(wrapped, FailureReflection)
    assert out.critical_step == 3 and out.supporting_segment == 2 and out.correct_action == "go to sinkbasin 1"


def test_first_validating_candidate_wins_over_earlier_invalid_json() -> None:
    text = '{"reminder": 5} then {"reminder": null}'
    assert parse_json_as(text, Intervention).reminder is None


@pytest.mark.parametrize("text,needle", [
    ("", "empty"),
    ("I think the agent is fine.", "no JSON"),
    ('{"critical_step": 3, "wrong_action": "go to', "malformed or truncated"),
    ('{"critical_step": "three", "wrong_action": "a", "correct_action": "b", "supporting_segment": 1}',
     "critical_step"),
    ('{"critical_step": 1, "wrong_action": "a", "correct_action": "b", "supporting_segment": 1, "extra": 1}',
     "extra"),
])
def test_invalid_replies_raise_typed_error_naming_the_problem(text: str, needle: str) -> None:
    with pytest.raises(LLMOutputError) as info:
        parse_json_as(text, FailureReflection)
    assert needle in info.value.reason
    assert info.value.stage == "FailureReflection"


def test_explicit_null_is_required_for_silence() -> None:
    assert parse_json_as('{"reminder": null}', Intervention).reminder is None
    with pytest.raises(LLMOutputError, match="reminder"):
        parse_json_as("{}", Intervention)
    with pytest.raises(LLMOutputError):
        parse_json_as('{"reminder": "   "}', Intervention)


def test_extraction_is_bounded_on_pathological_input() -> None:
    nasty = "{" * 50_000 + '"' * 1000 + "[" * 50_000
    t0 = time.perf_counter()
    assert extract_json_candidates(nasty) == []
    with pytest.raises(LLMOutputError):
        parse_json_as(nasty, Intervention)
    assert time.perf_counter() - t0 < 3.0


def test_text_tool_call_function_form_round_trips() -> None:
    save = {"id": "loc:apple_1", "content": "apple 1 is on countertop 2"}
    text = ("I will save it.\n" + format_text_tool_call("memory_save_knowledge", save)
            + format_text_tool_call("memory_delete", {"id": "loc:mug_1"}))
    calls = validate_tool_calls(parse_text_tool_calls(text, PROACTIVE_TOOLS), PROACTIVE_TOOLS, stage="t")
    assert calls == [ToolCall(name="memory_save_knowledge", arguments=save),
                     ToolCall(name="memory_delete", arguments={"id": "loc:mug_1"})]


def test_text_tool_call_json_form_and_string_arguments() -> None:
    text = ('<tool_call>{"name": "memory_update_status", "arguments": {"status": "at fridge 1"}}</tool_call>'
            '<tool_call>{"name": "memory_delete", "arguments": "{\\"id\\": \\"x\\"}"}</tool_call>')
    calls = parse_text_tool_calls(text, PROACTIVE_TOOLS)
    assert [c.name for c in calls] == ["memory_update_status", "memory_delete"]
    assert calls[1].arguments == {"id": "x"}


def test_multiline_parameter_values_keep_their_text() -> None:
    text = ("<tool_call><function=memory_update_status><parameter=status>\nline one\nline two\n</parameter>"
            "</function></tool_call>")
    (call,) = parse_text_tool_calls(text, PROACTIVE_TOOLS)
    assert call.arguments["status"] == "line one\nline two"


@pytest.mark.parametrize("text,needle", [
    ("<tool_call><function=memory_delete><parameter=id>x</parameter></function>", "not closed"),
    ("<tool_call>please delete x</tool_call>", "neither"),
    ('<tool_call>{"name": "memory_delete", "arguments": [1]}</tool_call>', "must be an object"),
])
def test_broken_tool_blocks_raise_tool_call_error(text: str, needle: str) -> None:
    with pytest.raises(ToolCallError, match=needle):
        parse_text_tool_calls(text, PROACTIVE_TOOLS)


def test_unknown_tool_and_bad_arguments_are_rejected() -> None:
    with pytest.raises(ToolCallError, match="unknown tool 'rm_rf'"):
        validate_tool_calls([ToolCall(name="rm_rf", arguments={})], PROACTIVE_TOOLS, stage="t")
    with pytest.raises(ToolCallError, match="id"):
        validate_tool_calls([ToolCall(name="memory_delete", arguments={"id": "has spaces!"})], PROACTIVE_TOOLS,
                            stage="t")
    with pytest.raises(ToolCallError, match="content"):
        validate_tool_calls([ToolCall(name="memory_save_knowledge", arguments={"id": "a"})], PROACTIVE_TOOLS,
                            stage="t")


def test_no_tool_call_is_a_valid_empty_answer() -> None:
    assert parse_text_tool_calls("Nothing changed, no update needed.", PROACTIVE_TOOLS) == []


def test_tool_schemas_are_json_schema_objects() -> None:
    for spec in PROACTIVE_TOOLS:
        fn = spec.to_openai()["function"]
        assert fn["parameters"]["type"] == "object"
        assert fn["parameters"]["additionalProperties"] is False
        assert set(fn["parameters"]["required"]) <= set(fn["parameters"]["properties"])
    assert {t.name for t in PROACTIVE_TOOLS} == {"memory_update_status", "memory_save_knowledge",
                                                 "memory_save_procedural", "memory_delete"}
