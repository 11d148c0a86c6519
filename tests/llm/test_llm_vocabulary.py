"""The prompts speak the benchmark's world: ALFWorld's renders are the original text, ScienceWorld's name a science
agent and its own examples, and the methods pass the episode's benchmark to their stages."""

from __future__ import annotations

import json

import pytest
from test_llm_stages import payloads

from workbench.envs.base import Task
from workbench.envs.benchmarks import BENCHMARKS
from workbench.eval.config import RunConfig
from workbench.llm import LLMConfigError, render_stage
from workbench.llm.templates import VOCABULARY_FILE, vocabulary

# the stages a method runs on ScienceWorld (AGMR, w/o AGR, MemArbiter, the proactive agent)
SCIENCEWORLD_STAGES = ("reflector_failure", "reflector_success", "refiner_failure", "refiner_success",
                       "reflector_edit_failure", "reflector_edit_success", "pattern_judge", "arbiter_writer",
                       "arbiter_state_parser", "proactive_update", "proactive_intervene", "proactive_advise")


def test_every_benchmark_has_the_same_vocabulary_words():
    words = set(vocabulary("alfworld"))
    assert words == {"agent_kind", "constraint_examples", "reference_examples", "item_focal", "item_entities"}
    for name in BENCHMARKS.names():
        assert set(vocabulary(name)) == words, name
    assert vocabulary("scienceworld:none") == vocabulary("scienceworld")
    json.loads(vocabulary("scienceworld")["item_entities"])  # the example's entity list is JSON, as replies are


def test_an_unknown_benchmark_is_named_with_the_known_ones():
    with pytest.raises(LLMConfigError, match=r"no prompt vocabulary for benchmark 'webshop'.*alfworld, scienceworld"):
        vocabulary("webshop")
    assert VOCABULARY_FILE.name == "vocabulary.json"


@pytest.mark.parametrize("name", SCIENCEWORLD_STAGES)
def test_scienceworld_prompts_name_a_science_agent_and_alfworlds_a_household_one(name):
    alf, _ = render_stage(name, payloads()[name])
    sw, _ = render_stage(name, payloads()[name], benchmark="scienceworld")
    assert "household agent" in alf[0].content
    assert "household" not in sw[0].content and "science-experiment agent" in sw[0].content
    assert alf[1:] == sw[1:] or name == "arbiter_writer"  # only the writer's reply example differs in the user turn


def test_the_writers_examples_are_the_benchmarks():
    sw, _ = render_stage("arbiter_writer", payloads()["arbiter_writer"], benchmark="scienceworld")
    text = sw[0].content + sw[1].content.split("Reply format:")[1]  # not the payload (an ALFWorld room here)
    assert "countertop" not in text and "receptacle" not in text
    assert '"entities": ["orange box", "living room"]' in text and "focused on" in text


def test_a_field_may_not_take_a_vocabulary_words_name(tmp_path):
    from workbench.llm.templates import _parse

    t = _parse("x", tmp_path / "x.txt", "[system]\nYou help a $agent_kind.\n[user]\n$goal\n")
    assert t.render("scienceworld", goal="g")[0].content == "You help a science-experiment agent."
    with pytest.raises(LLMConfigError, match="vocabulary words"):
        t.render("alfworld", goal="g", agent_kind="robot")


def test_alfworld_only_baselines_are_refused_on_scienceworld():
    for memory in ("awm", "dc-rs"):
        with pytest.raises(ValueError, match="built for ALFWorld"):
            RunConfig(out="x", env="scienceworld", memory=memory, backend="llama-server")


@pytest.mark.parametrize("policy", ["arbiter", "proactive"])
def test_the_methods_pass_the_episodes_benchmark_to_their_stages(policy, monkeypatch):
    from workbench.agents.policy import build_policy
    from workbench.llm.errors import LLMOutputError

    module = __import__(f"workbench.methods.{policy}.policy", fromlist=["run_stage"])
    seen = []

    def fake(backend, stage, payload, **kw):
        seen.append(kw.get("benchmark"))
        raise LLMOutputError(stage, "refused")

    monkeypatch.setattr(module, "run_stage", fake)
    p = build_policy(policy, backend="llama-server")
    task = Task(task_id="test/boil/0", split="test", task_type="boil", path="", benchmark="scienceworld")
    p.begin(task, "boil water", "This room is called the kitchen.")
    try:
        p.memory(0, [])
    except LLMOutputError:
        pass
    assert seen and set(seen) == {"scienceworld"}


@pytest.mark.parametrize("benchmark, refusal, other", [
    ("scienceworld", "No known action matches that input.", "Nothing happens."),
    ("alfworld", "Nothing happens.", "No known action matches that input.")])
def test_the_methods_read_a_failed_action_in_the_episodes_benchmarks_words(benchmark, refusal, other):
    from workbench.agents.policy import build_policy
    from workbench.envs.benchmarks import failure_check
    from workbench.memory.trajectory import Step

    assert failure_check(benchmark)(refusal) and not failure_check(benchmark)(other)
    arbiter = build_policy("arbiter", backend="llama-server")
    task = Task(task_id="t/x/0", split="t", task_type="x", path="", benchmark=benchmark)
    arbiter.begin(task, "boil water", "This room is called the kitchen.")
    arbiter.observe(Step(observation="", action="eat stove"), refusal)
    assert arbiter._failed
    arbiter.observe(Step(observation="", action="eat stove"), "You move to the kitchen.")
    assert not arbiter._failed
    proactive = build_policy("proactive", backend="llama-server")
    proactive.begin(task, "boil water", "This room is called the kitchen.")
    assert proactive._is_failure(refusal) and not proactive._is_failure(other)


#: sha256 (16 hex) of every stage's ALFWorld render of the test payloads, as the prompt files rendered them before the
#: vocabulary existed (74cc0f3's templates): a change here changes ALFWorld's results and invalidates its cached replies
ALFWORLD_RENDERS = {
    "arbiter_state_parser": "850f8fa307daafe8", "arbiter_writer": "cc31dfca586c36fb", "awm_induce": "83ed05cbb80befc5",
    "dc_curate": "3a3f331ff215997f", "pattern_judge": "f1421c9a4a9ac94f", "proactive_advise": "850a05f7bc6f2877",
    "proactive_intervene": "f75e95fa7a4ec37a", "proactive_update": "6fc3e4c0eae32d4f",
    "refiner_failure": "1d14be5ad1c519d5", "refiner_success": "88ec754563f0fc04",
    "reflector_edit_failure": "1de836aa54b7c4eb", "reflector_edit_success": "34dac3d860738265",
    "reflector_failure": "a6bfa2a25ce80f50", "reflector_success": "8a5f876088187a43",
    "retrieval_analyzer": "5d8b89a66554695a",
}


def test_alfworlds_renders_are_byte_for_byte_the_prompts_before_the_vocabulary():
    import hashlib

    got = {}
    for name, payload in sorted(payloads().items()):
        messages, _ = render_stage(name, payload)
        got[name] = hashlib.sha256(json.dumps([[m.role, m.content] for m in messages]).encode()).hexdigest()[:16]
    assert got == ALFWORLD_RENDERS
