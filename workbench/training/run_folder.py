"""A training run's folder: where the adapter starts from, its checkpoints, the fingerprints of its data and prompts, and what a finished run recorded (so a recipe step is not trained twice)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.memory.trajectory import Trajectory, read_jsonl
from workbench.models.adapters import adapter_dir, adapter_folder
from workbench.models.registry import get_model_spec, list_models
from workbench.training.data import (
    build_examples,
)
from workbench.training.trainer import TrainConfig

if TYPE_CHECKING:  # the type only: train.py imports this module
    from workbench.training.train import DataConfig

__all__ = ["init_adapter_folder", "default_checkpoints", "data_fingerprint", "prompt_fingerprint", "finished_run"]


def init_adapter_folder(name_or_folder: str) -> Path:
    """The adapter folder behind ``--init-adapter``: a registered model's adapter, or a folder holding one."""
    spec = get_model_spec(name_or_folder)
    if spec is not None and spec.adapter is not None:
        return adapter_dir(spec)  # a registered adapter not trained yet: its error says how to train it
    if spec is None and (folder := adapter_folder(name_or_folder)) is not None:
        return folder
    registered = [n for n in list_models() if (s := get_model_spec(n)) and s.adapter]
    raise FileNotFoundError(f"--init-adapter {name_or_folder}: neither a registered adapter model "
                            f"({', '.join(registered)}) nor a folder with adapter_config.json and "
                            "adapter_model.safetensors")


def default_checkpoints(out: Path) -> Path:
    """Where a run's checkpoints go: ``runs/train/<name>`` for a committed adapter, else a folder named after the
    whole output path (two runs writing ``.../it0/adapter`` and ``.../expert-only/adapter`` must not share one)."""
    out = Path(out)
    adapters = Path("workbench/assets/adapters")
    if out.parent == adapters or out.parent.resolve() == adapters.resolve():
        return Path("runs") / "train" / out.name
    return Path("runs") / "train" / "--".join(p for p in out.parts if p not in ("/", ".", ".."))


def data_fingerprint(trajs: list, layouts: str, dcfg: "DataConfig") -> str:
    """A hash of what a run trains on: each trajectory's source, task, rollout, actions and labels, in order, with
    the layout mode and the data options (a resume on other data is refused: ``TrainConfig.data``)."""
    import hashlib

    h = hashlib.sha256(json.dumps([layouts, {k: v for k, v in sorted(vars(dcfg).items()) if k != "val_tasks"}],
                                  sort_keys=True, default=str).encode())
    for t in trajs:
        h.update(json.dumps([t.source, t.task_id, t.meta.get("rollout"), [s.action for s in t.steps],
                             t.meta.get("labels")]).encode())
    return h.hexdigest()[:16]


def prompt_fingerprint(traj: Any, builder: Any, layouts: str, dcfg: "DataConfig") -> str:
    """A hash of how training renders its prompts: ``traj`` under every layout (budgets 500; v1: with and without
    its own memory), tokens and targets. Changing a layout's policy (a MemArbiter rule, a proactive reminder) or
    the prompt builder changes it, so a resume never mixes two renderings of the same data."""
    import hashlib

    # lazy: the training data stack (peft, the packers) loads only for a fingerprint
    # lazy: the training data stack (peft, the packers) loads only for a fingerprint
    from workbench.training.data import build_policy_examples
    from workbench.training.layouts import LAYOUTS, Layout, layout_policy

    h = hashlib.sha256()
    if layouts == "all":
        for lay in LAYOUTS:
            lay = Layout(lay.memory, lay.ablation, True, 500) if lay.budgeted else lay
            for ex in build_policy_examples(traj, builder, layout_policy(lay), None, dcfg.max_pack_tokens):
                h.update(json.dumps([lay.name, ex.prefix, ex.suffix, [s.target for s in ex.steps]]).encode())
    else:
        for ex in build_examples(traj, builder, None, dcfg.max_pack_tokens):
            h.update(json.dumps([ex.prefix, ex.suffix, [s.target for s in ex.steps]]).encode())
    return h.hexdigest()[:16]


def on_policy_trajectories(paths) -> list:
    """Labelled on-policy trajectories (valid_train only, every one with its per-step labels)."""
    out = []
    for p in paths:
        for t in read_jsonl(p, Trajectory):
            if t.split not in ("valid_train", ""):
                raise ValueError(f"{p}: {t.task_id} is from split '{t.split}'; on-policy data must be valid_train")
            if len(t.meta.get("labels") or []) != t.n_steps:
                raise ValueError(f"{p}: {t.task_id} has no per-step meta['labels']; label it with `workbench dagger label`")
            out.append(t)
    return out


def finished_run(out: Path, cfg: TrainConfig) -> dict | None:
    """The training log in ``out`` if it is this very run, finished (same hyper-parameters and data fingerprint, every
    update logged), else None. ``--skip-finished`` then leaves the adapter as it is: a finished run needs no
    checkpoint to be recognised, so a pipeline that spans sessions (``make train-agent``) does not train an
    intermediate step again once its final checkpoint is gone (checkpoints of finished runs are not committed: the
    adapter and its log are the product)."""
    path = Path(out) / "training_log.json"
    if not (Path(out) / "adapter_model.safetensors").exists() or not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if record.get("config") != cfg.identity() or len(record.get("train") or []) != cfg.updates:
        return None
    return record


def write_outputs(out: Path, record: dict) -> None:
    # lazy: the training data stack (peft, the packers) loads only for a fingerprint
    from workbench.training.card import adapter_summary, write_model_card

    (out / "training_log.json").write_text(json.dumps(record, indent=1))
    write_model_card(out, record, adapter_summary(out))
