"""The joint agent's data: ScienceWorld trajectories rendered with ScienceWorld's instructions under ReAct / ICL /
Traj over the ScienceWorld base, ALFWorld's as v2's recipe renders them."""

import pytest

from workbench.envs.scienceworld import INSTRUCTIONS
from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import Step, Trajectory
from workbench.prompts.layout import PromptBuilder
from workbench.training.joint import SCIENCEWORLD_LAYOUTS, JointData, is_scienceworld, scienceworld_trajectories
from workbench.training.layouts import LayoutSampler
from workbench.training.train import DataConfig, build_layout_stream, planned_layouts


def _sw(variation: int, task_type: str = "find-animal") -> Trajectory:
    steps = (Step(observation="This room is called the kitchen.\n\nYour task is to: find an animal.", action="teleport to outside"),
             Step(observation="You teleport to the outside.", action="focus on frog"))
    return Trajectory(task_id=f"train/{task_type}/{variation}", task_type=task_type, goal="find an animal.",
                      initial_observation="This room is called the kitchen.", steps=steps, success=True,
                      source="gold", split="train", meta={"final_observation": "You focus on the frog."})


def _alf() -> Trajectory:
    from tests.attention.agent_tiny import expert

    return expert("valid_train/apple/t9").model_copy(update={"split": "valid_train"})


@pytest.fixture()
def joint(tmp_path, tiny_lm):
    base = MemoryBase(tmp_path / "swbase")
    base.build_from_trajectories([_sw(v) for v in range(3)])
    builder = PromptBuilder(tiny_lm.tokenizer, 4096, instructions=INSTRUCTIONS)
    return JointData(builder, seed=0, memory_base=str(base.root))


def test_scienceworld_trajectories_render_under_their_own_instructions_and_layouts(joint, tiny_lm):
    sw, alf = _sw(7), _alf()
    assert is_scienceworld(sw) and not is_scienceworld(alf)
    alf_builder = PromptBuilder(tiny_lm.tokenizer, 4096)
    stream = build_layout_stream([sw, alf], alf_builder, LayoutSampler(seed=0), DataConfig(), seed=0, joint=joint)
    tok = tiny_lm.tokenizer
    seen = {}
    for i in range(12):
        for ex in stream(i):
            seen.setdefault(ex.task_id, set()).add(ex.memory_task_id)
            text = tok.decode(ex.prefix)
            if ex.task_id == sw.task_id:
                assert "elementary science experiments" in text and "household" not in text
                assert ex.memory_task_id.startswith("scienceworld/")
            else:
                assert "household" in text
    assert seen[sw.task_id] <= {f"scienceworld/{lay.name}" for lay in SCIENCEWORLD_LAYOUTS}
    assert len(seen[sw.task_id]) >= 2


def test_the_traj_layout_retrieves_another_variation_from_the_scienceworld_base(joint):
    from workbench.training.layouts import Layout, task_of

    sw = _sw(1)
    policy = joint.policy(Layout("traj"))
    policy.begin(task_of(sw), sw.goal, sw.initial_observation)
    block = policy.memory(0, [])
    assert block.entry is not None and block.entry.task_id != sw.task_id and block.entry.task_id.startswith("train/")


def test_the_mixture_counts_scienceworld_apart(joint):
    mix = planned_layouts([_sw(7), _alf()], LayoutSampler(seed=0), 20, 0, joint=joint)
    assert sum(mix["scienceworld"]["by_layout"].values()) == 10
    assert sum(mix["by_layout"].values()) == 10
    assert set(mix["scienceworld"]["by_layout"]) <= {"none", "icl", "traj"}
    assert joint.prompt_fingerprint(_sw(7), 3072) == joint.prompt_fingerprint(_sw(7), 3072)


def test_only_train_variations_are_trained_on():
    with pytest.raises(ValueError, match="train variations only"):
        scienceworld_trajectories("test@10")


def test_a_long_gold_path_trains_on_at_most_k_states_a_visit(joint, tiny_lm):
    long = _sw(9).model_copy(update={"steps": tuple(
        Step(observation=f"You look around ({k}).", action=f"look at thing {k}") for k in range(20))})
    stream = build_layout_stream([long], PromptBuilder(tiny_lm.tokenizer, 4096), LayoutSampler(seed=0),
                                 DataConfig(on_policy_states=3), seed=0, joint=joint)
    for epoch in range(3):
        assert sum(len(ex.steps) for ex in stream(epoch)) == 3
    whole = build_layout_stream([long], PromptBuilder(tiny_lm.tokenizer, 4096), LayoutSampler(seed=0),
                                DataConfig(on_policy_states=0), seed=0, joint=joint)
    assert sum(len(ex.steps) for ex in whole(0)) == 20


def test_a_visit_packs_its_states_into_one_forward_past_alfworlds_pack_bound(joint, tiny_lm):
    # 20 steps whose prompts pass ALFWorld's pack bound (set low here) but fit ScienceWorld's budget: one example
    long = _sw(9).model_copy(update={"steps": tuple(
        Step(observation=f"You look around the room, which holds a table ({k}).", action=f"look at thing {k}")
        for k in range(20))})
    stream = build_layout_stream([long], PromptBuilder(tiny_lm.tokenizer, 4096), LayoutSampler(seed=0),
                                 DataConfig(on_policy_states=5, max_pack_tokens=300), seed=0, joint=joint)
    exs = stream(0)
    assert joint.pack_tokens == joint.builder.max_tokens + 1024
    assert len(exs) == 1 and len(exs[0].steps) == 5 and exs[0].n_tokens > 300


def test_the_joint_data_renders_scienceworld_as_its_runs_do(tiny_lm, monkeypatch):
    from workbench.envs import scienceworld_experts
    from workbench.envs.benchmarks import benchmark

    monkeypatch.setattr(scienceworld_experts, "default_scienceworld_base", lambda: MemoryBase("/nonexistent"))
    jd = JointData.build(tiny_lm.tokenizer, 8192)
    bench = benchmark("scienceworld")
    assert jd.builder.history_chunk == bench.history_chunk == 10
    assert jd.builder.max_tokens == bench.max_prompt_tokens - 48


def test_the_joint_agents_card_states_its_mixture(tmp_path):
    """Issue 48: one agent for both benchmarks, the model card stating the mixture (rewritten from the committed
    training record, as training writes it)."""
    import json
    import shutil
    from pathlib import Path

    from workbench.training.card import adapter_summary, write_model_card

    folder = Path(__file__).resolve().parents[2] / "workbench/assets/adapters/smollm2-135m-alfworld-scienceworld"
    record = json.loads((folder / "training_log.json").read_text())
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copy(folder / name, tmp_path / name)
    card = write_model_card(tmp_path, record, adapter_summary(tmp_path)).read_text()
    n = record["data"]["scienceworld_trajectories"]
    assert f"- ScienceWorld: {n} gold paths of its train@10 variations" in card and "ScienceWorld gold paths" in card
