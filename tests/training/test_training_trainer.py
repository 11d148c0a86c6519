"""LoRA training on a tiny random Llama: the loss falls, and a run resumed from a checkpoint after a kill
ends with the very same weights and log as the uninterrupted run."""

from __future__ import annotations

import pytest
import torch
from training_builders import make_memory, make_traj, tiny_llama

from workbench.prompts.layout import PromptBuilder
from workbench.training.data import build_examples
from workbench.training.trainer import TrainConfig, Trainer, add_lora, lr_at


class Killed(RuntimeError):
    pass


@pytest.fixture(scope="module")
def examples(smol_tokenizer):
    b = PromptBuilder(smol_tokenizer, 8192)
    trajs = [make_traj(n_steps=4), make_traj(n_steps=7)]
    return [build_examples(t, b, make_memory() if i % 2 else None) for i, t in enumerate(trajs)]


def _stream(examples, kill_at: int | None = None):
    def stream(i):
        if kill_at is not None and i >= kill_at:
            raise Killed(f"killed at slot {i}")
        return examples[i % len(examples)]
    return stream


def _cfg(**kw):
    base = dict(seed=0, updates=6, accum=2, lr=3e-2, warmup=1, lora_r=4, lora_alpha=8, checkpoint_every=2)
    return TrainConfig(**(base | kw))


def _trainer(tok, examples, cfg, ckpt, kill_at=None, autocast="off"):
    model = add_lora(tiny_llama(tok), cfg)
    return Trainer(model, cfg, _stream(examples, kill_at), val_sets={"val": examples[1]}, ckpt_dir=ckpt,
                   progress=False, autocast=autocast)


def _weights(trainer):
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def test_loss_decreases_and_only_lora_trains(smol_tokenizer, examples, tmp_path):
    cfg = _cfg(updates=8)
    tr = _trainer(smol_tokenizer, examples, cfg, tmp_path / "ck")
    names = [n for n, p in tr.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    assert {n.split(".")[-4] for n in names} == {"q_proj", "k_proj", "v_proj", "o_proj"}
    log = tr.fit()
    first, last = log.train[0]["loss"], log.train[-1]["loss"]
    assert last < 0.7 * first, (first, last)
    assert log.val[-1]["loss"] < log.val[0]["loss"]
    assert [v["update"] for v in log.val] == [0, 8]
    kept = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert kept == ["update-000006", "update-000008"]  # keep_checkpoints=2


def test_resume_after_a_kill_continues_identically(smol_tokenizer, examples, tmp_path):
    torch.set_num_threads(1)
    cfg = _cfg()
    straight = _trainer(smol_tokenizer, examples, cfg, tmp_path / "a")
    log_a = straight.fit()

    killed = _trainer(smol_tokenizer, examples, cfg, tmp_path / "b", kill_at=5)  # mid update 3
    with pytest.raises(Killed):
        killed.fit()
    assert killed.latest_checkpoint().name == "update-000002"
    resumed = _trainer(smol_tokenizer, examples, cfg, tmp_path / "b")
    log_b = resumed.fit(resume=True)

    wa, wb = _weights(straight), _weights(resumed)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert [r["loss"] for r in log_a.train] == [r["loss"] for r in log_b.train]
    assert [r["loss"] for r in log_a.val] == [r["loss"] for r in log_b.val]


def test_resume_refuses_other_hyper_parameters(smol_tokenizer, examples, tmp_path):
    _trainer(smol_tokenizer, examples, _cfg(updates=2), tmp_path / "c").fit()
    other = _trainer(smol_tokenizer, examples, _cfg(updates=2, lr=1e-2), tmp_path / "c")
    with pytest.raises(ValueError, match="different hyper-parameters.*lr"):
        other.fit(resume=True)
    # the same hyper-parameters on other data (TrainConfig.data, the data fingerprint) is refused too
    with pytest.raises(ValueError, match="different hyper-parameters.*data"):
        _trainer(smol_tokenizer, examples, _cfg(updates=2, data="other"), tmp_path / "c").fit(resume=True)


def test_data_fingerprint_and_checkpoint_folders():
    from pathlib import Path

    from workbench.memory.trajectory import Step, Trajectory
    from workbench.training.run_folder import data_fingerprint, default_checkpoints
    from workbench.training.train import DataConfig

    t = Trajectory(task_id="valid_train/a", goal="g", steps=(Step(observation="o", action="look"),), source="planner")
    on = t.model_copy(update={"source": "agent:x", "meta": {"rollout": "dagger-0/none", "labels": ["look"]}})
    relabelled = on.model_copy(update={"meta": {"rollout": "dagger-0/none", "labels": ["inventory"]}})
    fp = {k: data_fingerprint(v, "all", DataConfig()) for k, v in
          {"expert": [t], "on": [t, on], "relabelled": [t, relabelled]}.items()}
    assert len(set(fp.values())) == 3 and fp["on"] == data_fingerprint([t, on], "all", DataConfig())
    assert data_fingerprint([t], "v1", DataConfig()) != fp["expert"]
    assert default_checkpoints(Path("workbench/assets/adapters/smollm2-135m-alfworld")) == Path(
        "runs/train/smollm2-135m-alfworld")
    assert (default_checkpoints(Path("runs/dagger/it0/adapter"))
            != default_checkpoints(Path("runs/dagger/expert-only/adapter")))


def test_schedule_warms_up_then_decays():
    cfg = _cfg(updates=20, warmup=4, lr=1.0, min_lr_ratio=0.1)
    lrs = [lr_at(cfg, u) for u in range(20)]
    assert lrs[:4] == [0.25, 0.5, 0.75, 1.0]
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:])) and lrs[-1] >= 0.1


def test_candidate_loss_trains_the_agents_decision_rule(smol_tokenizer, tmp_path):
    b = PromptBuilder(smol_tokenizer, 8192)
    exs = [build_examples(make_traj(n_steps=7), b, make_memory(), negatives=5, seed=0)]
    cfg = _cfg(updates=10, accum=1, negatives=5, cand_weight=1.0)
    tr = Trainer(add_lora(tiny_llama(smol_tokenizer), cfg), cfg, lambda i: exs[0], val_sets={"val": exs[0]},
                 progress=False)
    log = tr.fit()
    assert log.train[-1]["cand_loss"] < 0.5 * log.train[0]["cand_loss"]
    assert log.train[-1]["cand_acc"] > log.train[0]["cand_acc"]
    assert log.val[-1]["acc"] >= log.val[0]["acc"] and "acc" in log.val[0]


def test_on_policy_states_are_capped_per_visit_and_seeded():
    from workbench.memory.trajectory import Step, Trajectory
    from workbench.training.train import capped_labels

    steps = tuple(Step(observation="o", action="look") for _ in range(30))
    labels = [None if k % 5 == 0 else f"go to x {k}" for k in range(30)]  # 24 labelled states
    t = Trajectory(task_id="valid_train/a", goal="g", steps=steps, source="agent:m",
                   meta={"rollout": "dagger-0/none", "labels": labels})
    got = capped_labels(t, 10, 0, 0)
    kept = [k for k, lab in enumerate(got) if lab is not None]
    assert len(kept) == 10 and all(got[k] == labels[k] for k in kept)
    assert capped_labels(t, 10, 0, 0) == got and capped_labels(t, 10, 0, 1) != got  # seeded; anew each epoch
    assert capped_labels(t, 0, 0, 0) == labels and capped_labels(t, 30, 0, 0) == labels
    expert = Trajectory(task_id="valid_train/a", goal="g", steps=steps, source="planner")
    assert capped_labels(expert, 10, 0, 0) is None  # an expert trajectory trains on its own actions


def test_prompt_fingerprint_follows_the_rendering_of_every_layout(smol_tokenizer, monkeypatch):
    """A resume must not continue a run whose prompts were rendered by other policy code (TrainConfig.data)."""
    from workbench.envs.memory_base import expert_trajectories_for
    from workbench.llm.offline.backend import OFFLINE_ALGORITHMS
    from workbench.methods.proactive.stage_types import Intervention, ProactiveInput
    from workbench.prompts.layout import PromptBuilder
    from workbench.training.run_folder import prompt_fingerprint
    from workbench.training.train import DataConfig

    traj = expert_trajectories_for("valid_train")[0]
    builder = PromptBuilder(smol_tokenizer, 8192)
    fp = prompt_fingerprint(traj, builder, "all", DataConfig())
    assert fp == prompt_fingerprint(traj, builder, "all", DataConfig())
    assert prompt_fingerprint(traj, builder, "v1", DataConfig()) != fp
    monkeypatch.setitem(OFFLINE_ALGORITHMS, "proactive_intervene",
                        (ProactiveInput, lambda inp: Intervention(reminder="Look around.")))
    assert prompt_fingerprint(traj, builder, "all", DataConfig()) != fp  # one layout's reminders changed


def test_keep_checkpoints_must_leave_one_to_resume_from():
    from workbench.training.trainer import TrainConfig

    with pytest.raises(ValueError, match="keep_checkpoints is 0"):
        TrainConfig(keep_checkpoints=0)
    assert "keep_checkpoints" not in TrainConfig(keep_checkpoints=1).identity()  # a resume may keep fewer


def test_bf16_autocast_trains_float32_weights_and_a_resume_may_switch_mode(smol_tokenizer, examples, tmp_path):
    from workbench.training.card import _precision
    from workbench.training.trainer import resolve_autocast

    torch.set_num_threads(1)
    fp32 = _trainer(smol_tokenizer, examples, _cfg(), tmp_path / "a").fit()
    killed = _trainer(smol_tokenizer, examples, _cfg(), tmp_path / "b", kill_at=5, autocast="bf16")
    with pytest.raises(Killed):
        killed.fit()
    assert all(p.dtype == torch.float32 for p in killed.params)  # autocast never casts the adapter
    resumed = _trainer(smol_tokenizer, examples, _cfg(), tmp_path / "b")  # on a CPU without native bf16, say
    log = resumed.fit(resume=True)
    assert [r["autocast"] for r in log.train] == ["bf16"] * 2 + ["off"] * 4
    # the bf16 updates computed the same losses to bf16's precision, and the run still learns
    assert log.train[0]["loss"] == pytest.approx(fp32.train[0]["loss"], rel=2e-2)
    assert log.train[0]["loss"] != fp32.train[0]["loss"]  # it did run in bfloat16
    assert log.train[-1]["loss"] < 0.7 * log.train[0]["loss"]
    assert "bfloat16 autocast for 2 of 6 updates" in _precision(log.train)
    assert _precision(fp32.train).endswith("float32 matmuls") and _precision([{"loss": 1.0}]).endswith("float32 matmuls")
    assert resolve_autocast("off") == "off" and resolve_autocast("auto") in ("off", "bf16")
    with pytest.raises(ValueError, match="autocast 'fp8'"):
        resolve_autocast("fp8")
