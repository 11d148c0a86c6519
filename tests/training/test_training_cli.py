"""The training command end to end on a tiny model: adapter, log and model card written; --resume continues."""

from __future__ import annotations

import json

import pytest
from training_builders import make_traj, tiny_llama

import workbench.envs.memory_base as memory_base
import workbench.training.train as train_cli
from workbench.envs import load_alfworld_tasks
from workbench.memory import MemoryBase


@pytest.fixture
def tiny_world(monkeypatch, tmp_path, smol_tokenizer):
    """valid_train / valid_seen experts, memory base and base model replaced by small stand-ins."""
    seen = load_alfworld_tasks("valid_seen")[0].task_id
    train = [make_traj(f"valid_train/pick_clean_then_place_in_recep-Apple-None-Fridge-{i}/trial_T{i}",
                       n_steps=3 + i % 4) for i in range(4)]
    val = [make_traj(seen, n_steps=5, split="valid_seen")]
    base = MemoryBase(tmp_path / "mb")
    base.build_from_trajectories(train)
    experts = lambda split: train if split == "valid_train" else val  # noqa: E731
    for module in (memory_base, train_cli):  # the library module and the command that imported its names
        monkeypatch.setattr(module, "expert_trajectories_for", experts)
        monkeypatch.setattr(module, "default_memory_base", lambda split="valid_train": base)
    monkeypatch.setattr(train_cli, "load_base", lambda name: (tiny_llama(smol_tokenizer, "sdpa"), smol_tokenizer, 4096))
    monkeypatch.setattr(train_cli.DataConfig, "retriever", "bm25")
    return tmp_path


def test_train_command_writes_adapter_log_and_card(tiny_world):
    out, ck = tiny_world / "adapter", tiny_world / "ck"
    args = ["--out", str(out), "--checkpoints", str(ck), "--updates", "3", "--accum", "2", "--r", "4",
            "--lr", "3e-2", "--warmup", "1", "--val-tasks", "0:1", "--no-handcoded", "--checkpoint-every", "1"]
    assert train_cli.main(args) == 0
    assert {"adapter_config.json", "adapter_model.safetensors", "training_log.json", "MODEL_CARD.md"} <= {
        p.name for p in out.iterdir()}
    log = json.loads((out / "training_log.json").read_text())
    assert len(log["train"]) == 3 and {v["name"] for v in log["val"]} == {"traj", "none"}
    assert log["data"]["planner_trajectories"] == 4 and log["data"]["val_trajectories"] == 1
    card = (out / "MODEL_CARD.md").read_text()
    assert "valid_train only" in card and "r=4" in card
    assert card.startswith(f"# {out} (LoRA adapter)") and "smollm2-135m-alfworld" not in card.splitlines()[0]
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["r"] == 4 and sorted(cfg["target_modules"]) == ["k_proj", "o_proj", "q_proj", "v_proj"]
    # a longer schedule is a different run: resuming it from these checkpoints is refused
    with pytest.raises(ValueError, match="different hyper-parameters"):
        train_cli.main(args[:5] + ["5"] + args[6:] + ["--resume"])
    # the same arguments with --resume find the run finished and only rewrite the outputs
    assert train_cli.main(args + ["--resume"]) == 0
    assert json.loads((out / "training_log.json").read_text())["train"] == log["train"]
    # its checkpoints gone (a finished run's are not committed), --skip-finished still recognises it and trains
    # nothing; another schedule is not this run, so it trains
    import shutil

    shutil.rmtree(ck)
    stamp = (out / "adapter_model.safetensors").stat().st_mtime_ns
    assert train_cli.main(args + ["--resume", "--skip-finished"]) == 0
    assert (out / "adapter_model.safetensors").stat().st_mtime_ns == stamp and not ck.exists()
    assert train_cli.finished_run(out, train_cli.TrainConfig(updates=3)) is None  # other data fingerprint
    assert train_cli.main(args[:5] + ["4"] + args[6:] + ["--resume", "--skip-finished"]) == 0
    assert len(json.loads((out / "training_log.json").read_text())["train"]) == 4


def test_validation_can_be_computed_after_training(tiny_world):
    out, ck = tiny_world / "adapter", tiny_world / "ck"
    args = ["--out", str(out), "--checkpoints", str(ck), "--updates", "2", "--accum", "1", "--r", "4",
            "--no-handcoded"]
    assert train_cli.main(args + ["--val-tasks", "none"]) == 0
    assert json.loads((out / "training_log.json").read_text())["val"] == []
    assert train_cli.main(args + ["--val-tasks", "0:1", "--validate-only"]) == 0
    log = json.loads((out / "training_log.json").read_text())
    assert [(v["update"], v["name"]) for v in log["val"]] == [(0, "traj"), (0, "none"), (2, "traj"), (2, "none")]
    assert log["data"]["val_trajectories"] == 1 and "| 2 | traj |" in (out / "MODEL_CARD.md").read_text()


def test_v2_recipe_trains_every_layout_and_on_policy_labels_and_states_the_mixture(tiny_world):
    from workbench.memory.trajectory import write_jsonl

    agent = make_traj("valid_train/pick_clean_then_place_in_recep-Apple-None-Fridge-7/trial_T7", n_steps=4,
                      source="agent:v1")
    labels = [a.action if k != 2 else None for k, a in enumerate(agent.steps)]
    agent = agent.model_copy(update={"meta": {**agent.meta, "labels": labels, "rollout": "dagger-0/arbiter"}})
    labelled = tiny_world / "labelled.jsonl"
    write_jsonl(labelled, [agent])
    out = tiny_world / "v2"
    args = ["--out", str(out), "--checkpoints", str(tiny_world / "ck2"), "--updates", "4", "--accum", "5", "--r", "4",
            "--warmup", "1", "--val-tasks", "none", "--no-handcoded", "--layouts", "all", "--on-policy", str(labelled)]
    assert train_cli.main(args) == 0
    data = json.loads((out / "training_log.json").read_text())["data"]
    assert data["on_policy_trajectories"] == 1 and data["layouts"] == "all"
    mix = data["layout_mixture"]
    assert sum(mix["by_layout"].values()) == 20 and len(mix["by_layout"]) > 5
    card = (out / "MODEL_CARD.md").read_text()
    assert "drawn uniformly over the" in card and "On-policy (DAgger) trajectories: 1" in card
    with pytest.raises(ValueError, match="--layouts all"):
        train_cli.main(args[:-4] + ["--on-policy", str(labelled)])


def test_a_warm_start_begins_from_the_given_adapter_and_is_part_of_the_runs_identity(tiny_world):
    import torch
    from safetensors.torch import load_file

    first, warm, ck = tiny_world / "first", tiny_world / "warm", tiny_world / "ckw"
    common = ["--accum", "1", "--r", "4", "--lr", "3e-2", "--warmup", "1", "--val-tasks", "0:1", "--no-handcoded",
              "--checkpoint-every", "1"]
    assert train_cli.main(["--out", str(first), "--checkpoints", str(tiny_world / "ck1"), "--updates", "3"] + common) == 0
    first_log = json.loads((first / "training_log.json").read_text())
    warm_args = ["--out", str(warm), "--checkpoints", str(ck), "--updates", "2", "--init-adapter", str(first)] + common
    assert train_cli.main(warm_args) == 0
    log = json.loads((warm / "training_log.json").read_text())
    sha = json.loads(json.dumps(log["config"]))["init"]
    assert sha.startswith(f"{first}@") and len(sha.rsplit("@", 1)[1]) == 12
    # update 0 of a warm start is the adapter it starts from: its validation equals that run's final one
    final = {v["name"]: v["loss"] for v in first_log["val"] if v["update"] == 3}
    start = {v["name"]: v["loss"] for v in log["val"] if v["update"] == 0}
    assert start == final
    # it trained on from there: the weights moved away from the start
    a, b = load_file(str(first / "adapter_model.safetensors")), load_file(str(warm / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and any(not torch.equal(a[k], b[k]) for k in a)
    card = (warm / "MODEL_CARD.md").read_text()
    assert f"the weights of `{first}` (sha1 {sha.rsplit('@', 1)[1]})" in card and "| 0 (start) | traj |" in card
    # a fresh run with otherwise the same arguments is another run: its checkpoints are refused on resume
    with pytest.raises(ValueError, match="different hyper-parameters.*init"):
        train_cli.main(warm_args[:6] + common + ["--resume"])
    # a run without --init-adapter keeps the identity logged before warm starts existed (no "init" key)
    assert "init" not in first_log["config"]


def test_a_warm_start_refuses_an_adapter_of_another_shape_or_a_missing_one(tiny_world):
    first = tiny_world / "first"
    base = ["--checkpoints", str(tiny_world / "ck"), "--updates", "1", "--accum", "1", "--val-tasks", "none",
            "--no-handcoded"]
    assert train_cli.main(["--out", str(first), "--r", "4"] + base) == 0
    with pytest.raises(ValueError, match=r"adapter_config.json: the adapter to start from does not match.*'r': \(4, 8\)"):
        train_cli.main(["--out", str(tiny_world / "other"), "--r", "8", "--init-adapter", str(first)] + base[:1]
                       + [str(tiny_world / "ck8")] + base[2:])
    with pytest.raises(FileNotFoundError, match="neither a registered adapter model"):
        train_cli.main(["--out", str(tiny_world / "x"), "--init-adapter", str(tiny_world / "nowhere")] + base)
    with pytest.raises(ValueError, match="is the folder this run writes"):
        train_cli.main(["--out", str(first), "--r", "4", "--init-adapter", str(first)] + base)
