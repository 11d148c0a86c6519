"""Schema-constrained replies: the JSON tool-call envelope, llguidance in-process, response_format on the wire, the
strict JSON tool mode, a context overflow as a per-call error, and the stage ledger's fates."""

from __future__ import annotations

import json

import pytest
from llm_stub import Reply, completion

from workbench.llm import (
    LLMConfigError,
    LLMContextError,
    LLMOutputError,
    LLMTransportError,
    Message,
    OpenAIBackend,
    OpenAIConfig,
    ScriptedBackend,
    ToolCallError,
    chat_tools,
    run_stage,
)
from workbench.llm.ledger import ledger_records, reject_last
from workbench.llm.tools import MAX_TOOL_CALLS, tool_calls_from_json, tool_calls_schema
from workbench.methods.proactive.stage_types import PROACTIVE_TOOLS, Intervention, ProactiveInput

ASK = [Message(role="user", content="Remember where the apple is.")]
PAYLOAD = ProactiveInput(goal="put a clean apple in fridge.", step=0, current_observation="You see a fridge 1.")


def test_the_envelope_schema_names_each_tool_once_and_bounds_the_calls() -> None:
    s = tool_calls_schema(PROACTIVE_TOOLS)
    items = s["properties"]["tool_calls"]["items"]["anyOf"]
    assert [i["properties"]["name"]["const"] for i in items] == [t.name for t in PROACTIVE_TOOLS]
    assert s["properties"]["tool_calls"]["maxItems"] == MAX_TOOL_CALLS and s["additionalProperties"] is False
    ok = '{"tool_calls": [{"name": "memory_delete", "arguments": {"id": "loc:apple"}}]}'
    (call,) = tool_calls_from_json(ok)
    assert (call.name, call.arguments) == ("memory_delete", {"id": "loc:apple"})
    assert tool_calls_from_json('{"tool_calls": [{"name": 3}]}') is None and tool_calls_from_json("prose") is None


class _JsonTools(ScriptedBackend):
    tool_reply = "json"


@pytest.mark.parametrize("reply, reason", [
    ("I will remember it.", "got text"),
    ('{"tool_calls": [{"name": "memory_delete", "arguments": {"id": "loc:ap', "incomplete or malformed"),
    ('{"tool_calls": [{"name": "memory_fly", "arguments": {}}]}', "memory_fly"),
])
def test_a_backend_asked_for_json_calls_never_reads_prose_or_a_cut_reply_as_no_call(reply, reason) -> None:
    b = _JsonTools([reply, reply])
    with pytest.raises(ToolCallError, match=reason):
        chat_tools(b, ASK, PROACTIVE_TOOLS)
    assert "tool_calls" in b.calls[1][0][-1].content  # the repair turn asks for the JSON shape


def test_an_empty_call_list_is_an_explicit_no_call() -> None:
    out = chat_tools(_JsonTools(['{"tool_calls": []}']), ASK, PROACTIVE_TOOLS)
    assert out.value == [] and not out.repaired


def _client(stub, **kw) -> OpenAIBackend:
    return OpenAIBackend(OpenAIConfig(base_url=stub.url, model="m", max_retries=0, backoff_s=0.01, timeout_s=5.0,
                                      api_key_env=None, **kw))


def test_json_tool_mode_sends_the_envelope_as_response_format_and_parses_the_reply(stub) -> None:
    reply = '{"tool_calls": [{"name": "memory_save_knowledge", "arguments": {"id": "loc:apple", "content": "fridge"}}]}'
    stub.script = [Reply(body=completion(reply))]
    b = _client(stub, tool_mode="json", response_format="json_object")
    out = chat_tools(b, ASK, PROACTIVE_TOOLS)
    body = stub.requests[0]["body"]
    assert "tools" not in body and body["response_format"]["type"] == "json_object"
    assert body["response_format"]["schema"] == tool_calls_schema(PROACTIVE_TOOLS)
    assert '"tool_calls"' in body["messages"][0]["content"] and b.mode == "json_object+tools:json"
    assert [c.name for c in out.value] == ["memory_save_knowledge"]


def test_unconstrained_json_tool_mode_describes_the_envelope_without_a_response_format(stub) -> None:
    stub.script = [Reply(body=completion('{"tool_calls": []}'))]
    b = _client(stub, tool_mode="json", response_format="none")
    assert chat_tools(b, ASK, PROACTIVE_TOOLS).value == []
    body = stub.requests[0]["body"]
    assert "response_format" not in body and '"tool_calls"' in body["messages"][0]["content"]


def test_a_context_overflow_is_one_rejected_call_not_a_dead_run(stub) -> None:
    stub.script = [Reply(status=400, body={"error": {"message": "This model's maximum context length is 256 tokens"}})]
    ledger: list = []
    with pytest.raises(LLMContextError) as info:
        run_stage(_client(stub), "proactive_intervene", PAYLOAD, ledger=ledger)
    assert isinstance(info.value, LLMOutputError) and isinstance(info.value, LLMConfigError)
    assert len(stub.requests) == 1 and ledger[0].fate == "rejected" and "context" in ledger[0].reason


def test_the_ledger_counts_each_fate() -> None:
    good, bad = '{"reminder": null}', "no idea"
    ledger: list = []
    run_stage(ScriptedBackend([good]), "proactive_intervene", PAYLOAD, ledger=ledger)
    run_stage(ScriptedBackend([bad, good]), "proactive_intervene", PAYLOAD, ledger=ledger)
    with pytest.raises(LLMOutputError):
        run_stage(ScriptedBackend([bad, bad]), "proactive_intervene", PAYLOAD, ledger=ledger)

    class Down(ScriptedBackend):
        def chat(self, *a, **k):
            raise LLMTransportError("gone", attempts=2)

    with pytest.raises(LLMTransportError):
        run_stage(Down([]), "proactive_intervene", PAYLOAD, ledger=ledger)
    assert [(c.fate, c.requests) for c in ledger] == [("valid", 1), ("repaired", 2), ("rejected", 2), ("failed", 2)]
    assert all(c.stage == "proactive_intervene" and c.mode == "prompt" and c.ms >= 0 for c in ledger)
    head = ledger[:2]
    reject_last(head, "proactive_intervene", "refused by the method")
    assert head[1].fate == "rejected" and head[1].reason == "refused by the method" and head[0].fate == "valid"
    assert json.dumps(ledger_records(ledger))  # JSON-ready


def test_a_reply_cut_by_max_tokens_says_so() -> None:
    from workbench.llm import ChatResult

    cut = ChatResult(text='{"reminder": "the apple is in', finish_reason="length", usage={"completion_tokens": 9})
    ledger: list = []
    with pytest.raises(LLMOutputError, match=r"cut at max_tokens \(9 tokens\)"):
        run_stage(ScriptedBackend([cut, cut]), "proactive_intervene", PAYLOAD, ledger=ledger)
    assert ledger[0].reason.startswith("the reply was cut at max_tokens")


def test_offline_calls_leave_no_records() -> None:
    from workbench.llm import get_backend

    ledger: list = []
    run_stage(get_backend("offline-alfworld"), "proactive_intervene", PAYLOAD, ledger=ledger)
    assert ledger[0].mode == "algorithm" and ledger_records(ledger) == []


# -- llguidance in-process ---------------------------------------------------------------------------------------
torch = pytest.importorskip("torch")
pytest.importorskip("llguidance")


@pytest.fixture(scope="module")
def tiny_smollm_tokenizer():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
    from architectures import build  # a tiny random Llama with SmolLM2's tokenizer

    model, _, tok = build("llama")
    from workbench.llm import LocalBackend

    return LocalBackend(hf_model=model, tokenizer=tok, model_name="tiny-llama")


def test_a_random_model_under_the_grammar_writes_only_valid_json(tiny_smollm_tokenizer) -> None:
    b = tiny_smollm_tokenizer
    assert b.mode == "grammar:llguidance" and b.tool_reply == "json"
    for seed in range(3):
        out = run_stage(b, "proactive_intervene", PAYLOAD, temperature=1.0, seed=seed, max_tokens=160)
        assert isinstance(out.value, Intervention)


def test_a_random_model_under_the_grammar_calls_only_known_tools(tiny_smollm_tokenizer) -> None:
    b = tiny_smollm_tokenizer
    names = {t.name for t in PROACTIVE_TOOLS}
    for seed in range(2):
        res = b.chat(ASK, tools=PROACTIVE_TOOLS, temperature=1.0, seed=seed, max_tokens=400)
        if res.finish_reason == "stop":  # a closed object: every call is a known tool's
            assert all(c.name in names for c in res.tool_calls)
        else:  # cut by max_tokens: the text is the partial JSON, which chat_tools refuses
            assert res.text.startswith('{"tool_calls"')


# -- fuzz: whatever a server sends to a backend asked for JSON tool calls --------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_OK = '{"tool_calls": [{"name": "memory_save_knowledge", "arguments": {"id": "loc:apple_1", "content": "in fridge 1"}}]}'
_reply = st.one_of(
    st.text(max_size=200),  # prose, empty, anything
    st.integers(0, len(_OK)).map(lambda k: _OK[:k]),  # the valid reply cut anywhere (max_tokens)
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
                 max_leaves=10).map(lambda v: json.dumps({"tool_calls": v})),  # the envelope with anything inside
    st.sampled_from(["memory_delete", "memory_fly", "", "memory_save_knowledge"]).flatmap(
        lambda name: st.dictionaries(st.sampled_from(["id", "content", "status", "x"]),
                                     st.one_of(st.text(max_size=500), st.integers()), max_size=3).map(
            lambda args: json.dumps({"tool_calls": [{"name": name, "arguments": args}]}))),
)


@settings(max_examples=300, deadline=None)
@given(first=_reply, second=_reply)
def test_any_reply_to_a_json_tool_stage_is_valid_calls_or_a_typed_error(first, second) -> None:
    """Never a crash, never prose or a cut reply read as "no call": a valid list of known tools' calls with
    arguments that fit their schemas, or a ToolCallError after the one repair; the ledger counts it either way."""
    names = {t.name for t in PROACTIVE_TOOLS}
    ledger: list = []
    try:
        calls = run_stage(_JsonTools([first, second]), "proactive_update", PAYLOAD, ledger=ledger).value
    except ToolCallError:
        assert ledger[-1].fate == "rejected" and ledger[-1].requests == 2
        return
    assert all(c.name in names for c in calls)
    body = (first if ledger[-1].fate == "valid" else second).strip()
    assert body.startswith("{") and json.loads(body)["tool_calls"] == [
        {"name": c.name, "arguments": c.arguments} for c in calls]
