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
