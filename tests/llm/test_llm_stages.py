"""Prompt template files, their pairing with typed inputs/outputs, and run_stage on the offline backend."""

from __future__ import annotations

import pytest
from llm_cases import (
    EXPERT_PLAN,
    GOAL,
    ROOM,
    failed_run,
    memory_clean_tomato,
    successful_run,
)

from workbench.llm import (
    LLMConfigError,
    get_backend,
    get_stage,
    list_stages,
    list_templates,
    load_template,
    render_stage,
    run_stage,
)
from workbench.llm.templates import _parse
from workbench.methods.agmr.stage_types import (
    CurateInput,
    DirectFailureEditInput,
    DirectSuccessEditInput,
    FailureRefinerInput,
    PatternJudgeInput,
    FailureReflection,
    ReflectorInput,
    RetrievalAnalyzerInput,
    SuccessRefinerInput,
    SuccessReflection,
    WorkflowInput,
)
from workbench.methods.arbiter.stage_types import StateParserInput, WriterInput
from workbench.methods.proactive.stage_types import ProactiveInput


def payloads() -> dict[str, object]:
    mem, fail, succ = memory_clean_tomato(), failed_run(), successful_run()
    refl = FailureReflection(critical_step=3, wrong_action="go to fridge 1", correct_action="go to sinkbasin 1",
                             supporting_segment=2)
    n = len(mem.segments)
    return {
        "retrieval_analyzer": RetrievalAnalyzerInput(memory=mem, failed=fail, succeeded=succ),
        "reflector_failure": ReflectorInput(memory=mem, trajectory=fail, expert_plan=EXPERT_PLAN),
        "reflector_success": ReflectorInput(memory=mem, trajectory=succ),
        "refiner_failure": FailureRefinerInput(memory=mem, reflection=refl, utilization=(0.1,) * n),
        "pattern_judge": PatternJudgeInput(memory=mem, step=1, correct_action="take apple 1 from countertop 2",
                                           segment=1, utilization=(0.1,) * n, scale=0.2),
        "refiner_success": SuccessRefinerInput(memory=mem, reflection=SuccessReflection(redundant_segments=()),
                                               utilization=((0.1, 0.2),) * n),
        "reflector_edit_failure": DirectFailureEditInput(memory=mem, reflection=refl),
        "reflector_edit_success": DirectSuccessEditInput(memory=mem, reflection=SuccessReflection(redundant_segments=())),
        "awm_induce": WorkflowInput(task_type="clean", examples=(mem,)),
        "dc_curate": CurateInput(goal=GOAL, task_type="clean", examples=(mem,)),
        "arbiter_writer": WriterInput(goal=GOAL, step=0, observation=ROOM),
        "arbiter_state_parser": StateParserInput(goal=GOAL, observation=fail.steps[1].observation,
                                                 history=fail.steps[:1]),
        "proactive_update": ProactiveInput(goal=GOAL, step=0, window=fail.steps[:1],
                                           current_observation=fail.steps[1].observation),
        "proactive_intervene": ProactiveInput(goal=GOAL, step=0, window=fail.steps[:1]),
        "proactive_advise": ProactiveInput(goal=GOAL, step=0, window=fail.steps[:1]),
    }


def test_every_stage_has_a_template_file_and_a_typed_output() -> None:
    assert set(list_stages()) == set(payloads()) and set(list_templates()) == set(list_stages())
    for name in list_stages():
        st = get_stage(name)
        assert (st.output_model is None) == bool(st.tools), name
        assert load_template(st.template).fields, name


@pytest.mark.parametrize("name", sorted(payloads()))
def test_rendering_fills_every_placeholder_and_carries_the_payload(name: str) -> None:
    payload = payloads()[name]
    msgs, context = render_stage(name, payload)
    assert [m.role for m in msgs] == ["system", "user"]
    assert "$" not in msgs[1].content and GOAL.split()[-1].rstrip(".") in msgs[1].content
    assert context == {"stage": name, "input": payload.model_dump(mode="json")}


@pytest.mark.parametrize("name", sorted(payloads()))
def test_offline_backend_answers_every_stage_through_the_same_path(name: str) -> None:
    st = get_stage(name)
    for fmt in ("native", "text"):
        out = run_stage(get_backend("offline-alfworld", tool_format=fmt), name, payloads()[name])
        assert not out.repaired
        if st.output_model is not None:
            assert isinstance(out.value, st.output_model)
        else:
            assert out.value and {c.name for c in out.value} <= {t.name for t in st.tools}


def test_memory_segments_are_numbered_as_the_schemas_index_them() -> None:
    msgs, _ = render_stage("reflector_failure", payloads()["reflector_failure"])
    user = msgs[1].content
    assert "[segment 2]\nObservation: You pick up the tomato 1" in user
    assert "[step 3]\nObservation: You pick up the apple 1 from the countertop 2.\nAction: go to fridge 1" in user
    assert "6. put apple 1 in/on fridge 1" in user


def test_the_memory_agents_window_is_labelled_with_the_steps_it_holds() -> None:
    from workbench.memory.trajectory import Step
    from workbench.methods.proactive.stage_types import ProactiveInput

    window = tuple(Step(observation=f"obs {k}", action=f"act {k}") for k in range(5, 8))  # steps 5, 6, 7
    msgs, _ = render_stage("proactive_intervene", ProactiveInput(goal="put a apple in fridge", step=8,
                                                                  window=window, current_observation="obs 8"))
    user = msgs[1].content
    assert "[step 5]\nObservation: obs 5" in user and "[step 7]\nObservation: obs 7" in user
    assert "[step 8]" not in user


def test_the_advisor_prompt_shows_no_bank() -> None:
    msgs, _ = render_stage("proactive_advise", payloads()["proactive_advise"])
    text = "\n".join(m.content for m in msgs)
    assert "Memory bank" not in text and "no memory bank" in text and "Recent steps" in text


def test_template_rendering_is_strict(tmp_path) -> None:
    t = load_template("proactive_intervene")
    with pytest.raises(LLMConfigError, match="missing values for \\['window'\\]"):
        t.render(goal="g", step="0", bank="b", current_observation="o")
    with pytest.raises(LLMConfigError, match="no placeholder for \\['extra'\\]"):
        t.render(goal="g", step="0", bank="b", window="w", current_observation="o", extra="x")
    with pytest.raises(LLMConfigError, match="exactly one \\[system\\]"):
        _parse("bad", tmp_path / "bad.txt", "[user]\nonly a user part")
    with pytest.raises(LLMConfigError, match="no prompt template 'nope'"):
        load_template("nope")


def test_literal_braces_in_templates_survive_rendering() -> None:
    msgs = load_template("proactive_intervene").render(goal="g", step="0", bank="b", window="w",
                                                       current_observation="o")
    assert '{"reminder": null}' in msgs[0].content


def test_payload_shape_errors_name_the_field() -> None:
    mem = memory_clean_tomato()
    refl = FailureReflection(critical_step=0, wrong_action="a", correct_action="b", supporting_segment=0)
    with pytest.raises(ValueError, match="utilization has 2 scores but the memory has 7 segments"):
        FailureRefinerInput(memory=mem, reflection=refl, utilization=(0.1, 0.2))


def test_offline_backend_refuses_prose_without_a_payload() -> None:
    with pytest.raises(LLMConfigError, match="run_stage"):
        get_backend("offline-alfworld").chat([{"role": "user", "content": "reflect on this"}])
