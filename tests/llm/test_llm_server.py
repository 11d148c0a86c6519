"""Against a real llama.cpp OpenAI-compatible server serving the packaged SmolLM2-135M GGUF (127.0.0.1).

llama.cpp accepts a GBNF ``grammar`` as an extra request field; the text-form tool-call test uses it to
make the real model print exactly that shape, so it checks our client and parser on a genuine server
response rather than on a 135M model's luck. The malformed-output test simply cuts the reply short.
"""

from __future__ import annotations

import pytest
from llm_cases import GOAL, failed_run

from workbench.llm import (
    CachedBackend,
    LLMOutputError,
    Message,
    OpenAIBackend,
    OpenAIConfig,
    ToolCall,
    chat_json,
    chat_tools,
    run_stage,
)
from workbench.methods.proactive.stage_types import (
    PROACTIVE_TOOLS,
    Intervention,
    ProactiveInput,
)

pytestmark = pytest.mark.integration

HI = [Message(role="user", content="What is the capital of France? Answer in one word.")]
TOOL_GRAMMAR = (r'root ::= "<tool_call><function=memory_save_knowledge><parameter=id>loc:" [a-z]{3,8} '
                r'"</parameter><parameter=content>" [a-z ]{3,20} "</parameter></function></tool_call>"')


def client(server, **kw) -> OpenAIBackend:
    cfg = dict(base_url=server.url, model=server.model, timeout_s=120.0, max_retries=1, backoff_s=0.1,
               api_key_env=None)
    cfg.update(kw)
    return OpenAIBackend(OpenAIConfig(**cfg))


def test_chat_returns_text_usage_and_is_deterministic_at_temperature_zero(llama_server) -> None:
    b = client(llama_server)
    a = b.chat(HI, max_tokens=16, seed=0)
    again = b.chat(HI, max_tokens=16, seed=0)
    assert "paris" in a.text.lower()
    assert a.text == again.text and a.finish_reason in ("stop", "length")
    assert a.usage["prompt_tokens"] > 5 and 0 < a.usage["completion_tokens"] <= 16
    assert b.stats == {"requests": 2, "retries": 0, "failures": 0}


def test_schema_output_falls_back_to_json_object_and_validates(llama_server) -> None:
    b = client(llama_server)  # response_format="auto": llama.cpp rejects json_schema, accepts json_object
    out = chat_json(b, [Message(role="user", content="Should the agent get a reminder? Reply as JSON.")],
                    Intervention, max_tokens=96, seed=0)
    assert isinstance(out.value, Intervention) and b._format == "json_object"


def test_text_form_tool_call_from_the_real_model_is_parsed(llama_server) -> None:
    b = client(llama_server, tool_mode="text", extra_body={"grammar": TOOL_GRAMMAR})
    out = chat_tools(b, [Message(role="user", content="Remember where the apple is.")], PROACTIVE_TOOLS,
                     max_tokens=128, seed=0)
    (call,) = out.value
    assert call.name == "memory_save_knowledge" and call.arguments["id"].startswith("loc:")
    assert out.results[0].text.startswith("<tool_call><function=memory_save_knowledge>")
    assert out.results[0].tool_calls == ()  # it came back as text and was parsed by the fallback


def test_native_tools_on_a_template_without_tools_degrade_to_no_call(llama_server) -> None:
    b = client(llama_server, tool_mode="native")
    out = chat_tools(b, [Message(role="user", content="Say hello.")], PROACTIVE_TOOLS, max_tokens=24, seed=0)
    assert out.value == [] or all(isinstance(c, ToolCall) for c in out.value)


def test_truncated_output_gets_one_repair_then_a_typed_error(llama_server) -> None:
    b = client(llama_server, response_format="none")  # unconstrained, and cut after 3 tokens: never valid JSON
    with pytest.raises(LLMOutputError) as info:
        chat_json(b, [Message(role="user", content="Reply with JSON: should the agent be reminded?")],
                  Intervention, max_tokens=3, seed=0)
    assert len(info.value.raw) == 2 and b.stats["requests"] == 2
    assert info.value.reason  # says what was wrong, for the log


def test_a_stage_runs_end_to_end_on_the_real_server(llama_server) -> None:
    fail = failed_run()
    payload = ProactiveInput(goal=GOAL, step=2, window=fail.steps[:3], current_observation=fail.steps[3].observation)
    out = run_stage(client(llama_server), "proactive_intervene", payload, max_tokens=96)
    assert isinstance(out.value, Intervention)


def test_cached_rerun_sends_zero_requests_and_reproduces_outputs(llama_server, tmp_path) -> None:
    def session():
        inner = client(llama_server)
        cached = CachedBackend(inner, tmp_path / "cache")
        texts = [cached.chat(HI, max_tokens=12, seed=0).text,
                 cached.chat([Message(role="user", content="Name a fruit.")], max_tokens=8, seed=0).text,
                 chat_json(cached, [Message(role="user", content="Remind? JSON.")], Intervention,
                           max_tokens=64, seed=0).value]
        return inner, cached, texts

    first_inner, first_cache, first = session()
    assert first_inner.stats["requests"] >= 3 and first_cache.stats()["hits"] == 0
    second_inner, second_cache, second = session()
    assert second_inner.stats["requests"] == 0
    assert second == first
    assert second_cache.stats() == {"hits": 3, "misses": 0, "writes": 0, "corrupt": 0}


def test_agmr_refinement_with_a_real_model_as_reflector_and_refiner(llama_server, tmp_path) -> None:
    """AGMR's stages on the real server (SmolLM2-135M: a weak reflector): whatever it answers, each attempt is a
    validated edit that was verified, or a typed error with nothing applied; the base changes only by a commit."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods" / "agmr"))
    from agmr_builders import RIGHT, TASK, WRONG, ScriptedRefiner, entry, make_base

    base = make_base(tmp_path)
    r = ScriptedRefiner(base, [(False, WRONG, None), (True, RIGHT, None)], backend=client(llama_server), max_attempts=1)
    rec = r.refine_task(TASK, "put a apple in fridge.")
    (attempt,) = rec.attempts
    assert (attempt.error is None) == (attempt.execution is not None)
    if rec.outcome == "committed":
        assert base.get(entry().entry_id).version == 1 and attempt.diff
    else:
        assert rec.outcome == "error" and base.get(entry().entry_id) == entry()
