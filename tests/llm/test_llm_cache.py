"""Response cache: a rerun makes zero backend calls, reproduces outputs, and counts hits and misses."""

from __future__ import annotations

import json

from llm_cases import EXPERT_PLAN, failed_run, memory_clean_tomato

from workbench.llm import (
    CachedBackend,
    Message,
    OfflineALFWorldBackend,
    ResponseCache,
    ScriptedBackend,
    get_backend,
    run_stage,
)
from workbench.llm.cache import request_material
from workbench.methods.agmr.stage_types import ReflectorInput
from workbench.methods.proactive.stage_types import Intervention

HI = [Message(role="user", content="remind?")]


def test_second_run_is_served_from_disk_with_identical_outputs(tmp_path) -> None:
    payload = ReflectorInput(memory=memory_clean_tomato(), trajectory=failed_run(), expert_plan=EXPERT_PLAN)
    first_inner = OfflineALFWorldBackend()
    first = run_stage(CachedBackend(first_inner, tmp_path), "reflector_failure", payload)
    assert first_inner.stats["calls"] == 1 and not first.results[0].cached

    again_inner = OfflineALFWorldBackend()
    cached = CachedBackend(again_inner, tmp_path)
    second = run_stage(cached, "reflector_failure", payload)
    assert again_inner.stats["calls"] == 0  # zero calls on the rerun
    assert second.value == first.value and second.results[0].text == first.results[0].text
    assert second.results[0].cached
    assert cached.stats() == {"hits": 1, "misses": 0, "writes": 0, "corrupt": 0}


def test_key_depends_on_every_parameter_but_not_on_the_url_or_key(tmp_path, monkeypatch) -> None:
    base = dict(tools=None, schema=Intervention, temperature=0.0, max_tokens=64, seed=0, context=None)
    b = get_backend("openai", base_url="http://127.0.0.1:1/v1", model="m")
    key = ResponseCache.key(request_material(b, HI, **base))
    for change in [dict(temperature=0.7), dict(max_tokens=65), dict(seed=1), dict(schema=None)]:
        assert ResponseCache.key(request_material(b, HI, **{**base, **change})) != key, change
    # A model reads only the messages: payload metadata must not defeat the cache...
    assert ResponseCache.key(request_material(b, HI, **{**base, "context": {"meta": "run 2"}})) == key
    # ...but an offline algorithm computes from the payload, so for it the payload is part of the key.
    off = OfflineALFWorldBackend()
    k1 = ResponseCache.key(request_material(off, HI, **{**base, "context": {"stage": "x", "input": 1}}))
    k2 = ResponseCache.key(request_material(off, HI, **{**base, "context": {"stage": "x", "input": 2}}))
    assert k1 != k2
    other_msgs = [Message(role="user", content="remind? ")]
    assert ResponseCache.key(request_material(b, other_msgs, **base)) != key
    assert ResponseCache.key(request_material(get_backend("openai", base_url="http://127.0.0.1:1/v1", model="n"),
                                              HI, **base)) != key
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    moved = get_backend("openai", base_url="http://10.0.0.1:8000/v1", model="m")
    assert ResponseCache.key(request_material(moved, HI, **base)) == key


def test_misses_and_writes_are_counted_and_files_are_auditable(tmp_path) -> None:
    cb = CachedBackend(ScriptedBackend(["a", "b"]), tmp_path)
    assert cb.chat(HI, seed=1).text == "a"
    assert cb.chat(HI, seed=2).text == "b"
    assert cb.chat(HI, seed=1).text == "a"
    assert cb.stats() == {"hits": 1, "misses": 2, "writes": 2, "corrupt": 0}
    assert len(cb.cache) == 2
    record = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert set(record) == {"key", "request", "result"} and record["request"]["backend"] == "scripted"


def test_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path) -> None:
    cb = CachedBackend(ScriptedBackend(["first", "second"]), tmp_path)
    cb.chat(HI)
    (path,) = list(tmp_path.rglob("*.json"))
    path.write_text('{"result": {"text": ')  # torn write from a killed run
    assert cb.chat(HI).text == "second"
    assert cb.stats()["corrupt"] == 1
    assert json.loads(path.read_text())["result"]["text"] == "second"
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temp files behind


def test_get_backend_can_wrap_in_cache(tmp_path) -> None:
    b = get_backend("scripted", replies=['{"reminder": null}'], cache_dir=tmp_path)
    assert isinstance(b, CachedBackend) and b.name == "scripted"
    b.chat(HI)
    assert b.stats()["writes"] == 1
