"""The bounded repair retry and the typed errors of chat_json / chat_tools."""

from __future__ import annotations

import pytest

from workbench.llm import (
    ChatResult,
    LLMOutputError,
    ScriptedBackend,
    ToolCall,
    ToolCallError,
    chat_json,
    chat_tools,
)
from workbench.methods.proactive.stage_types import PROACTIVE_TOOLS, Intervention

ASK = [{"role": "user", "content": "remind?"}]


def test_valid_first_reply_needs_one_call() -> None:
    b = ScriptedBackend(['{"reminder": null}'])
    out = chat_json(b, ASK, Intervention)
    assert out.value == Intervention(reminder=None) and not out.repaired and len(b.calls) == 1
    assert b.calls[0][1]["schema"] is Intervention


def test_repair_retry_shows_the_model_its_reply_and_the_error() -> None:
    b = ScriptedBackend(['{"reminder": 42', '{"reminder": "take the apple first"}'])
    out = chat_json(b, ASK, Intervention)
    assert out.repaired and out.value.reminder == "take the apple first"
    repair_msgs = b.calls[1][0]
    assert [m.role for m in repair_msgs] == ["user", "assistant", "user"]
    assert repair_msgs[1].content == '{"reminder": 42'
    assert "malformed or truncated" in repair_msgs[2].content and '"reminder"' in repair_msgs[2].content


def test_second_failure_raises_with_both_raw_replies() -> None:
    b = ScriptedBackend(["garbage", '{"reminder": 3}'])
    with pytest.raises(LLMOutputError) as info:
        chat_json(b, ASK, Intervention, stage="proactive_intervene")
    err = info.value
    assert err.stage == "proactive_intervene" and err.raw == ("garbage", '{"reminder": 3}')
    assert "reminder" in err.reason and len(b.calls) == 2


def test_repair_can_be_disabled() -> None:
    b = ScriptedBackend(["garbage", '{"reminder": null}'])
    with pytest.raises(LLMOutputError):
        chat_json(b, ASK, Intervention, repair=False)
    assert len(b.calls) == 1


def test_native_tool_calls_are_validated_and_normalised() -> None:
    native = ChatResult(tool_calls=(ToolCall(name="memory_delete", arguments={"id": "loc:apple_1"}, id="c1"),))
    out = chat_tools(ScriptedBackend([native]), ASK, PROACTIVE_TOOLS)
    assert out.value == [ToolCall(name="memory_delete", arguments={"id": "loc:apple_1"}, id="c1")]


def test_unknown_tool_is_repaired_through_the_text_form() -> None:
    bad = ChatResult(tool_calls=(ToolCall(name="memory_wipe", arguments={}),))
    good = "<tool_call><function=memory_update_status><parameter=status>at fridge 1</parameter></function></tool_call>"
    b = ScriptedBackend([bad, good])
    out = chat_tools(b, ASK, PROACTIVE_TOOLS)
    assert out.repaired and out.value == [ToolCall(name="memory_update_status", arguments={"status": "at fridge 1"})]
    shown = b.calls[1][0][1].content  # the failed native call is shown back in text form
    assert "<function=memory_wipe>" in shown
    assert "unknown tool 'memory_wipe'" in b.calls[1][0][2].content


def test_tool_stage_failure_is_a_tool_call_error() -> None:
    b = ScriptedBackend(["<tool_call><function=memory_delete>", "<tool_call>{}</tool_call>"])
    with pytest.raises(ToolCallError) as info:
        chat_tools(b, ASK, PROACTIVE_TOOLS, stage="proactive_update")
    assert info.value.stage == "proactive_update" and len(info.value.raw) == 2
