"""Backend registry and protocol conformance."""

from __future__ import annotations

import pytest

from workbench.llm import (
    CachedBackend,
    ChatResult,
    LLMConfigError,
    Message,
    OfflineALFWorldBackend,
    OpenAIBackend,
    ScriptedBackend,
    as_messages,
    get_backend,
    list_backends,
    register_backend,
)
from workbench.llm.stages import run_stage
from workbench.methods.arbiter.stage_types import StateParserInput


def test_builtin_backends_are_registered() -> None:
    assert {"openai", "local", "offline-alfworld", "scripted"} <= set(list_backends())


def test_every_backend_answers_a_stage_through_the_one_path(tmp_path) -> None:
    """The offline algorithm, a scripted model and a cached one give the same validated output for the same stage
    (OpenAI's client is exercised against llama.cpp's server in test_llm_server)."""
    payload = StateParserInput(goal="put a clean mug in coffeemachine.", observation="You arrive at countertop 1. "
                               "On the countertop 1, you see a mug 1.")
    expected = run_stage(OfflineALFWorldBackend(), "arbiter_state_parser", payload).value
    reply = expected.model_dump_json()
    for b in (ScriptedBackend([reply]), CachedBackend(ScriptedBackend([reply]), tmp_path)):
        assert b.name and b.model
        assert run_stage(b, "arbiter_state_parser", payload).value == expected
    assert OpenAIBackend().name and OpenAIBackend().model


def test_custom_backends_register_once_and_can_be_replaced() -> None:
    class Echo:
        name, model = "echo", "echo-1"

        def chat(self, messages, **kw):
            return ChatResult(text=messages[-1].content, backend=self.name, model=self.model)

    register_backend("echo-test", Echo, replace=True)
    assert get_backend("echo-test").chat([Message(role="user", content="hi")]).text == "hi"
    with pytest.raises(LLMConfigError, match="already registered"):
        register_backend("echo-test", Echo)
    with pytest.raises(LLMConfigError, match="backend 'offline-alfworld'"):
        get_backend("offline-alfworld", temperature=3)  # a bad keyword is a config error, not a TypeError


def test_messages_accept_openai_dicts_and_reject_bad_roles() -> None:
    msgs = as_messages([{"role": "system", "content": "s"}, Message(role="user", content="u")])
    assert [m.role for m in msgs] == ["system", "user"]
    assert msgs[0].to_openai() == {"role": "system", "content": "s"}
    with pytest.raises(ValueError):
        as_messages([{"role": "wizard", "content": "x"}])
