"""The SFT export: the memory agent's exact prompts, its applied tool calls and its reminder-or-null, in the
conversational tool-calling format chat templates (and TRL's SFTTrainer) take."""

from __future__ import annotations

import json

import pytest

from workbench.envs.memory_base import expert_trajectories_for
from workbench.llm.offline import OfflineALFWorldBackend
from workbench.methods.proactive import ProactivePolicy, export_sft, sft_examples
from workbench.training.layouts import task_of


class Recording(OfflineALFWorldBackend):
    """The offline memory agent, keeping every prompt it was sent."""

    def __init__(self):
        super().__init__()
        self.sent = []

    def chat(self, messages, **kw):
        self.sent.append([{"role": m.role, "content": m.content} for m in messages])
        return super().chat(messages, **kw)


@pytest.mark.parametrize("variant", ["proactive", "proactive-advisor", "proactive-passive"])
def test_examples_carry_the_prompts_the_memory_agent_was_sent(variant):
    expert = next(e for e in expert_trajectories_for("valid_unseen") if e.task_type == "clean")
    backend = Recording()
    pol = ProactivePolicy(variant, backend=backend)
    pol.begin(task_of(expert), expert.goal, expert.initial_observation)
    records = []
    for k, st in enumerate(expert.steps):
        records.append(dict(pol.memory(k, list(expert.steps[:k])).record))
        pol.observe(st, expert.steps[k + 1].observation if k + 1 < expert.n_steps else "")
    traj = expert.model_copy(update={"meta": {**expert.meta, "steps": records, "memory_policy": variant}})
    examples = sft_examples(traj)
    assert [ex["messages"][:-1] for ex in examples] == backend.sent  # exactly what it saw, in order
    for ex, rec in zip([e for e in examples if e["phase"] == 1], records):
        assert [c["function"]["name"] for c in ex["messages"][-1]["tool_calls"]] == [c["name"] for c in rec["proactive"]["calls"]]
        assert {t["function"]["name"] for t in ex["tools"]} == {"memory_update_status", "memory_save_knowledge",
                                                               "memory_save_procedural", "memory_delete"}
    for ex, rec in zip([e for e in examples if e["phase"] == 2], records):
        assert json.loads(ex["messages"][-1]["content"]) == {"reminder": rec["proactive"]["reminder"]}


def test_the_file_loads_as_a_dataset_and_renders_through_a_chat_template(tmp_path):
    import datasets
    from transformers import AutoTokenizer

    from workbench.models.loading import _dequantized_dir
    from workbench.models.registry import get_model_spec

    expert = next(e for e in expert_trajectories_for("valid_unseen") if e.task_type == "clean")
    pol = ProactivePolicy()
    pol.begin(task_of(expert), expert.goal, expert.initial_observation)
    records = []
    for k, st in enumerate(expert.steps):
        records.append(dict(pol.memory(k, list(expert.steps[:k])).record))
        pol.observe(st, expert.steps[k + 1].observation if k + 1 < expert.n_steps else "")
    traj = expert.model_copy(update={"meta": {**expert.meta, "steps": records, "memory_policy": "proactive"}})
    counts = export_sft([traj], tmp_path / "sft.jsonl")
    assert counts["phase_1"] == counts["phase_2"] == expert.n_steps and counts["examples"] == 2 * expert.n_steps
    ds = datasets.load_dataset("json", data_files=str(tmp_path / "sft.jsonl"), split="train")
    assert len(ds) == counts["examples"] and {"messages", "phase"} <= set(ds.column_names)
    tok = AutoTokenizer.from_pretrained(_dequantized_dir(get_model_spec("smollm2-135m-instruct")))
    for row in (json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()):
        text = tok.apply_chat_template(row["messages"], tools=row.get("tools"), tokenize=False)
        assert row["messages"][1]["content"][:40] in text
