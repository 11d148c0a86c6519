"""The OpenAI-compatible client against a local stub: retries, backoff, timeouts, keys, tools, fallbacks."""

from __future__ import annotations

import json
import time

import pytest
from llm_stub import Reply, StubServer, completion

from workbench.llm import (
    CachedBackend,
    LLMConfigError,
    LLMTimeoutError,
    LLMTransportError,
    Message,
    OpenAIBackend,
    OpenAIConfig,
    ToolCall,
    chat_json,
    chat_tools,
    get_backend,
)
from workbench.methods.proactive.stage_types import PROACTIVE_TOOLS, Intervention

HI = [Message(role="user", content="hi")]


def backend(stub: StubServer, sleeps: list[float] | None = None, **kw) -> OpenAIBackend:
    cfg = dict(base_url=stub.url, model="m", max_retries=3, backoff_s=0.01, timeout_s=5.0, api_key_env=None)
    cfg.update(kw)
    return OpenAIBackend(OpenAIConfig(**cfg), sleep=(sleeps.append if sleeps is not None else lambda s: None))


def test_request_body_carries_model_messages_and_sampling(stub: StubServer) -> None:
    stub.script = [Reply(body=completion("Paris"))]
    res = backend(stub).chat(HI, temperature=0.3, max_tokens=7, seed=11)
    assert res.text == "Paris" and res.backend == "openai" and res.usage["prompt_tokens"] == 3
    body = stub.requests[0]["body"]
    assert stub.requests[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "m" and body["temperature"] == 0.3 and body["max_tokens"] == 7 and body["seed"] == 11
    assert body["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_retryable_statuses_are_retried_with_exponential_backoff(stub: StubServer, status: int) -> None:
    stub.script = [Reply(status=status, body={"error": "busy"})] * 2 + [Reply(body=completion("done"))]
    sleeps: list[float] = []
    b = backend(stub, sleeps, backoff_s=0.1, backoff_max_s=10)
    assert b.chat(HI).text == "done"
    assert len(stub.requests) == 3 and sleeps == [0.1, 0.2]
    assert b.stats == {"requests": 3, "retries": 2, "failures": 0}


def test_retry_after_header_is_honoured_but_capped(stub: StubServer) -> None:
    stub.script = [Reply(status=429, headers={"Retry-After": "3"}), Reply(status=429, headers={"Retry-After": "999"}),
                   Reply(body=completion("ok"))]
    sleeps: list[float] = []
    backend(stub, sleeps, backoff_s=0.01, backoff_max_s=5).chat(HI)
    assert sleeps == [3.0, 5.0]


def test_persistent_5xx_gives_up_with_status_and_attempts(stub: StubServer) -> None:
    stub.script = [Reply(status=503, body={"error": "down"})]
    b = backend(stub, max_retries=2)
    with pytest.raises(LLMTransportError) as info:
        b.chat(HI)
    assert info.value.status == 503 and info.value.attempts == 3 and len(stub.requests) == 3
    assert b.stats["failures"] == 1


def test_client_errors_are_not_retried(stub: StubServer) -> None:
    stub.script = [Reply(status=401, body={"error": "bad key"})]
    with pytest.raises(LLMTransportError, match="401") as info:
        backend(stub).chat(HI)
    assert info.value.attempts == 1 and len(stub.requests) == 1


def test_stalled_request_hits_the_timeout_on_every_attempt(stub: StubServer) -> None:
    stub.script = [Reply(delay_s=3.0)]
    b = backend(stub, timeout_s=0.3, max_retries=1)
    t0 = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match="timed out after 0.3s") as info:
        b.chat(HI)
    assert time.perf_counter() - t0 < 2.0
    assert info.value.attempts == 2 and len(stub.requests) == 2


def test_unreachable_server_is_a_transport_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    b = OpenAIBackend(OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_s=0.0,
                                   api_key_env=None))
    with pytest.raises(LLMTransportError) as info:
        b.chat(HI)
    assert info.value.status is None and info.value.attempts == 2


def test_non_json_body_is_a_transport_error(stub: StubServer) -> None:
    stub.script = [Reply(body="<html>proxy error</html>")]
    with pytest.raises(LLMTransportError, match="not JSON"):
        backend(stub).chat(HI)


def test_api_key_comes_from_env_only_and_never_leaks(stub: StubServer, monkeypatch, tmp_path) -> None:
    secret = "sk-test-DO-NOT-LEAK-123"
    monkeypatch.setenv("WB_TEST_KEY", secret)
    b = backend(stub, api_key_env="WB_TEST_KEY")
    cached = CachedBackend(b, tmp_path / "cache")
    cached.chat(HI)
    assert stub.requests[0]["headers"]["Authorization"] == f"Bearer {secret}"
    assert secret not in repr(b) and secret not in repr(b.config) and secret not in json.dumps(b.cache_identity())
    assert all(secret not in p.read_text() for p in (tmp_path / "cache").rglob("*.json"))
    monkeypatch.delenv("WB_TEST_KEY")
    backend(stub, api_key_env="WB_TEST_KEY").chat(HI)
    assert "Authorization" not in stub.requests[-1]["headers"]


def test_native_tools_are_sent_and_parsed(stub: StubServer) -> None:
    args = {"id": "loc:apple_1", "content": "on counter"}
    fn = {"name": "memory_save_knowledge", "arguments": json.dumps(args)}
    calls = [{"id": "c1", "type": "function", "function": fn}]
    stub.script = [Reply(body=completion("", tool_calls=calls, finish="tool_calls"))]
    out = chat_tools(backend(stub, tool_mode="native"), HI, PROACTIVE_TOOLS)
    assert out.value == [ToolCall(name="memory_save_knowledge", arguments=args, id="c1")]
    sent = stub.requests[0]["body"]["tools"]
    assert [t["function"]["name"] for t in sent] == [t.name for t in PROACTIVE_TOOLS]


def test_undecodable_native_arguments_trigger_the_repair(stub: StubServer) -> None:
    broken = [{"id": "c1", "type": "function", "function": {"name": "memory_delete", "arguments": '{"id": '}}]
    fixed = "<tool_call><function=memory_delete><parameter=id>loc:x</parameter></function></tool_call>"
    stub.script = [Reply(body=completion("", tool_calls=broken)), Reply(body=completion(fixed))]
    out = chat_tools(backend(stub), HI, PROACTIVE_TOOLS)
    assert out.repaired and out.value == [ToolCall(name="memory_delete", arguments={"id": "loc:x"})]


def test_text_tool_mode_describes_tools_in_the_system_prompt(stub: StubServer) -> None:
    stub.script = [Reply(body=completion("<tool_call><function=memory_delete><parameter=id>a</parameter></function>"
                                         "</tool_call>"))]
    msgs = [Message(role="system", content="You are the memory agent."), *HI]
    out = chat_tools(backend(stub, tool_mode="text"), msgs, PROACTIVE_TOOLS)
    body = stub.requests[0]["body"]
    assert "tools" not in body and out.value[0].name == "memory_delete"
    system = body["messages"][0]["content"]
    assert system.startswith("You are the memory agent.") and "<tool_call><function=TOOL_NAME>" in system


def test_auto_modes_fall_back_when_the_server_rejects_a_feature(stub: StubServer) -> None:
    stub.script = [Reply(status=400, body={"error": "tools not supported"}),
                   Reply(body=completion("<tool_call><function=memory_delete><parameter=id>a</parameter>"
                                         "</function></tool_call>")),
                   Reply(status=500, body={"error": "1 validation error: response_format.type json_schema"}),
                   Reply(body=completion('{"reminder": null}'))]
    b = backend(stub)
    assert chat_tools(b, HI, PROACTIVE_TOOLS).value[0].name == "memory_delete"
    assert "tools" in stub.requests[0]["body"] and "tools" not in stub.requests[1]["body"]
    assert chat_json(b, HI, Intervention).value.reminder is None
    assert stub.requests[2]["body"]["response_format"]["type"] == "json_schema"
    rf = stub.requests[3]["body"]["response_format"]
    assert rf["type"] == "json_object" and rf["schema"]["required"] == ["reminder"]
    assert len(stub.requests) == 4  # the validation-error 500 was not retried


def test_config_is_validated_and_registry_builds_it() -> None:
    with pytest.raises(LLMConfigError, match="base_url"):
        OpenAIConfig(base_url="127.0.0.1:8000")
    b = get_backend("openai", base_url="http://127.0.0.1:9/v1", model="qwen")
    assert isinstance(b, OpenAIBackend) and b.model == "qwen"
    with pytest.raises(LLMConfigError, match="unknown backend 'vllm'"):
        get_backend("vllm")
