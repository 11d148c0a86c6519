"""``python -m workbench.training.train``: memory-conditioned behaviour cloning of SmolLM2 on ALFWorld experts (and,
with ``--scienceworld``, ScienceWorld's gold paths beside them: one agent for both benchmarks).

Data: valid_train only (planner replays + successful handcoded-search runs); validation loss on valid_seen
planner trajectories; valid_unseen is never read here. Writes the LoRA adapter (safetensors), the training
log and a MODEL_CARD.md to ``--out``; checkpoints go to ``--checkpoints`` (resumable with ``--resume``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from workbench.envs.memory_base import default_memory_base, expert_trajectories_for
from workbench.eval.config import RunConfig, select_tasks
from workbench.memory.retrieval import get_retriever
from workbench.models.loading import _dequantized_dir
from workbench.models.registry import get_model_spec
from workbench.prompts.layout import PromptBuilder
from workbench.training.data import (
    HANDCODED_FILE,
    MemorySampler,
    PackedExample,
    _stable_seed,
    build_examples,
    epoch_order,
    handcoded_report,
    training_trajectories,
)
from workbench.training.run_folder import (
    data_fingerprint,
    default_checkpoints,
    finished_run,
    init_adapter_folder,
    on_policy_trajectories,
    prompt_fingerprint,
    write_outputs,
)
from workbench.training.trainer import TrainConfig, Trainer, add_lora, init_lora

__all__ = ["DataConfig", "load_base", "build_stream", "build_layout_stream", "planned_layouts", "validation_sets", "main"]

HF_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class DataConfig:
    """Which data a run trains and validates on.

    Attributes:
        p_no_memory: share of trajectories shown without a memory block.
        memory_top_k: the memory is drawn among this many best retrieved same-type entries.
        max_pack_tokens: a packed sequence longer than this is split (memory/time bound).
        val_tasks: slice of valid_seen tasks whose expert trajectories give the validation loss.
        handcoded: also train on successful handcoded-search runs.
        on_policy_states: an on-policy trajectory trains on at most this many of its labelled states per visit
            (drawn anew each epoch, seeded; 0: all). A 50-step rollout under a working-memory layout is 50
            separate prompts, and under a ReAct layout its late prompts outgrow a pack: unbounded, one rollout
            costs about six expert trajectories (measured: 23.4k vs 4.0k tokens a visit), mostly for states
            of the same loop.
    """

    p_no_memory: float = 0.25
    memory_top_k: int = 3
    max_pack_tokens: int = 3072
    val_tasks: str = "0:140:7"
    handcoded: bool = True
    retriever: str = "minilm"
    on_policy_states: int = 0


def load_base(name: str = "smollm2-135m-instruct", attn: str = "sdpa") -> tuple[Any, Any, int]:
    """(fp32 transformers model, tokenizer, n_ctx) of a registered base model.

    Training uses SDPA attention (same function as eager, a fraction of the memory at 2k tokens); the
    workbench loads the merged model with eager attention so every hook fires.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = get_model_spec(name)
    if spec is None or spec.gguf is None:
        raise ValueError(f"base model '{name}' must be a registered packaged model (e.g. smollm2-135m-instruct)")
    folder = _dequantized_dir(spec)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation=attn)
    from workbench.models.allocator import keep_freed_memory

    keep_freed_memory()  # training runs on the CPU: its large activations stay in the heap (models.allocator)
    return model, tok, int(model.config.max_position_embeddings)


def build_stream(trajs: list, builder: Any, sampler: MemorySampler, dcfg: DataConfig, seed: int, negatives: int = 0):
    """Trajectory slot i -> packed examples: epoch e = i // n visits the trajectories in a seeded order."""
    n = len(trajs)
    orders: dict[int, list[int]] = {}

    def stream(i: int) -> list[PackedExample]:
        epoch, j = divmod(i, n)
        order = orders.setdefault(epoch, epoch_order(n, epoch, seed))
        traj = trajs[order[j]]
        return build_examples(traj, builder, sampler(traj, epoch), dcfg.max_pack_tokens, negatives, (seed, epoch))

    return stream


def build_layout_stream(trajs: list, builder: Any, sampler: Any, dcfg: DataConfig, seed: int, negatives: int = 0,
                        joint: Any = None):
    """Like :func:`build_stream`, each trajectory rendered under one layout drawn by ``sampler``
    (:class:`~workbench.training.layouts.LayoutSampler`); an on-policy trajectory trains on its labels.

    ``joint`` (a :class:`~workbench.training.joint.JointData`): how ScienceWorld's trajectories among ``trajs`` are
    rendered (their builder, layouts and memory base); None: every trajectory is ALFWorld's."""
    # lazy: `--help` and a finished step's skip stay fast without the training stack (peft)
    from workbench.training.data import build_policy_examples, imitated
    from workbench.training.joint import is_scienceworld
    from workbench.training.layouts import layout_policy

    n = len(trajs)
    orders: dict[int, list[int]] = {}
    policies: dict[str, Any] = {}  # one policy per layout (begin resets its episode state)

    def stream(i: int) -> list[PackedExample]:
        epoch, j = divmod(i, n)
        order = orders.setdefault(epoch, epoch_order(n, epoch, seed))
        traj = trajs[order[j]]
        if joint is not None and is_scienceworld(traj):
            lay = joint.layout(traj, epoch)
            # like an on-policy rollout, a long gold path trains on at most on_policy_states of its steps a visit
            # (an inclined-plane path of 200 steps under ReAct is ~1.1M tokens whole; ~66k with 10 states)
            labels = [s.action if imitated(s.action) else None for s in traj.steps]
            targets = capped_labels(traj.model_copy(update={"meta": traj.meta | {"labels": labels}}),
                                    dcfg.on_policy_states, seed, epoch)
            return build_policy_examples(traj, joint.builder, joint.policy(lay), targets,
                                         max(dcfg.max_pack_tokens, joint.pack_tokens), negatives, (seed, epoch),
                                         memory_id=f"scienceworld/{lay.name}")
        lay = sampler(traj, epoch)
        policy = policies.get(lay.name) or policies.setdefault(lay.name, layout_policy(lay))
        targets = capped_labels(traj, dcfg.on_policy_states, seed, epoch)
        return build_policy_examples(traj, builder, policy, targets, dcfg.max_pack_tokens,
                                     negatives, (seed, epoch), memory_id=lay.name)

    return stream


def capped_labels(traj: Any, cap: int, seed: int, epoch: int) -> list | None:
    """An on-policy trajectory's labels with at most ``cap`` of them kept (seeded by seed, trajectory and
    epoch; the rest None: replayed as history, not trained); an expert trajectory's (None: its own actions)."""
    labels = traj.meta.get("labels")
    if labels is None or not cap:
        return labels
    chosen = [k for k, lab in enumerate(labels) if lab is not None]
    if len(chosen) <= cap:
        return labels
    keep = set(random.Random(_stable_seed(seed, "states", traj.task_id, traj.meta.get("rollout", ""), epoch))
               .sample(chosen, cap))
    return [lab if k in keep else None for k, lab in enumerate(labels)]


def planned_layouts(trajs: list, sampler: Any, slots: int, seed: int, joint: Any = None) -> dict:
    """The mixture a run trains on: the layout of every trajectory slot it will visit, counted (the model card
    states it); with ``joint``, ScienceWorld's slots counted apart (``scienceworld``)."""
    # lazy: `--help` and a finished step's skip stay fast without the training stack (peft)
    from workbench.training.joint import is_scienceworld
    from workbench.training.layouts import layout_counts

    n = len(trajs)
    orders: dict[int, list[int]] = {}
    chosen, sw = [], []
    for i in range(slots):
        epoch, j = divmod(i, n)
        order = orders.setdefault(epoch, epoch_order(n, epoch, seed))
        traj = trajs[order[j]]
        if joint is not None and is_scienceworld(traj):
            sw.append(joint.layout(traj, epoch))
        else:
            chosen.append(sampler(traj, epoch))
    return layout_counts(chosen) | ({"scienceworld": layout_counts(sw)} if joint is not None else {})


def validation_sets(builder: Any, retriever: Any, dcfg: DataConfig) -> dict[str, list[PackedExample]]:
    """valid_seen expert trajectories, with the ``traj`` policy's memory (top-1 retrieved) and without."""
    ids = {t.task_id for t in select_tasks(RunConfig(out="", split="valid_seen", tasks=dcfg.val_tasks))}
    trajs = [t for t in expert_trajectories_for("valid_seen") if t.task_id in ids and t.success and t.steps]
    out: dict[str, list[PackedExample]] = {"traj": [], "none": []}
    every = 10**6  # every admissible command as a negative: the accuracy is the teacher-forced accuracy
    for t in trajs:
        hits = retriever.retrieve(t.goal, t.task_id, t.task_type or None, k=1)
        out["traj"] += build_examples(t, builder, hits[0][0] if hits else None, 10**6, every)
        out["none"] += build_examples(t, builder, None, 10**6, every)
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench.training.train", description=__doc__)
    p.add_argument("--out", required=True, help="adapter folder, e.g. workbench/assets/adapters/smollm2-135m-alfworld")
    p.add_argument("--base", default="smollm2-135m-instruct")
    p.add_argument("--checkpoints", help="checkpoint folder (default runs/train/<out name> for an adapter under "
                   "workbench/assets/adapters, else runs/train/<out path, '/' as '--'>)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--skip-finished", action="store_true", help="if --out already holds this very run, finished "
                   "(same hyper-parameters and data fingerprint), print its summary and train nothing (for a "
                   "pipeline's intermediate steps; without it a finished run is trained again, e.g. to check that it "
                   "reproduces)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--autocast", choices=("off", "bf16", "auto"), default="off",
                   help="run the updates' matmuls in bfloat16 (weights, adapter and optimizer stay float32): 'auto' "
                        "where the CPU has native bf16 kernels (AVX512-BF16 / AMX, ~1.5x faster), else float32. "
                        "Not part of a run's identity: a resume may switch (each update records its mode)")
    d, c = DataConfig(), TrainConfig()
    p.add_argument("--seed", type=int, default=c.seed)
    p.add_argument("--updates", type=int, default=c.updates)
    p.add_argument("--accum", type=int, default=c.accum, help="trajectories per update")
    p.add_argument("--lr", type=float, default=c.lr)
    p.add_argument("--warmup", type=int, default=c.warmup)
    p.add_argument("--r", type=int, default=c.lora_r)
    p.add_argument("--alpha", type=int, default=c.lora_alpha)
    p.add_argument("--negatives", type=int, default=c.negatives, help="admissible non-expert commands per step")
    p.add_argument("--cand-weight", type=float, default=c.cand_weight, help="weight of the candidate loss")
    p.add_argument("--eval-every", type=int, default=c.eval_every,
                   help="updates between validation losses (0: only at the start and the end)")
    p.add_argument("--checkpoint-every", type=int, default=c.checkpoint_every)
    p.add_argument("--keep-checkpoints", type=int, default=c.keep_checkpoints,
                   help="checkpoints kept on disk (the newest; an older one is removed only after a newer is whole)")
    p.add_argument("--p-no-memory", type=float, default=d.p_no_memory)
    p.add_argument("--memory-top-k", type=int, default=d.memory_top_k)
    p.add_argument("--max-pack-tokens", type=int, default=d.max_pack_tokens)
    p.add_argument("--val-tasks", default=d.val_tasks,
                   help="slice of valid_seen tasks for the validation loss ('none': no validation)")
    p.add_argument("--no-handcoded", action="store_true", help="planner trajectories only")
    p.add_argument("--layouts", choices=("v1", "all"), default="v1",
                   help="v1: Traj memory or none (the v1 recipe); all: one of every evaluated layout per sequence, "
                        "drawn uniformly (the v2 recipe)")
    p.add_argument("--on-policy", action="append", metavar="LABELLED.jsonl",
                   help="DAgger's labelled on-policy trajectories to add (repeatable; see workbench dagger)")
    p.add_argument("--on-policy-states", type=int, default=d.on_policy_states, metavar="K",
                   help="an on-policy trajectory trains on at most K of its labelled states per visit (0: all)")
    p.add_argument("--scienceworld", metavar="SPLIT",
                   help="also train on ScienceWorld's gold trajectories of SPLIT (train or train@N), each under "
                        "ScienceWorld's instructions and one of ReAct / ICL / Traj over its memory base: one agent for "
                        "both benchmarks (issue 48); needs --layouts all")
    p.add_argument("--init-adapter", metavar="NAME_OR_FOLDER",
                   help="start the LoRA weights from a trained adapter (a registered model name such as "
                        "smollm2-135m-alfworld, or an adapter folder) instead of a fresh one; same --r / --alpha. "
                        "Its sha1 is part of the run's identity, and update 0's validation is that adapter's")
    p.add_argument("--validate-only", action="store_true",
                   help="only compute the validation losses of the adapter in --out (after a --val-tasks none run)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    torch.set_num_threads(a.threads)
    return _validate_only(a) if a.validate_only else _train(a)



def _train(a: argparse.Namespace) -> int:
    # lazy: `--help` and a finished step's skip stay fast without the training stack (peft)
    from workbench.training.card import adapter_summary
    t_start = time.perf_counter()
    cfg = TrainConfig(seed=a.seed, updates=a.updates, accum=a.accum, lr=a.lr, warmup=a.warmup, lora_r=a.r,
                      lora_alpha=a.alpha, negatives=a.negatives, cand_weight=a.cand_weight,
                      eval_every=a.eval_every, checkpoint_every=a.checkpoint_every,
                      keep_checkpoints=a.keep_checkpoints)
    dcfg = _data_config(a)
    out = Path(a.out)
    ckpt = Path(a.checkpoints or default_checkpoints(out))
    init_folder = init_adapter_folder(a.init_adapter) if a.init_adapter else None  # a bad name fails before loading
    if init_folder is not None and init_folder.resolve() == out.resolve():
        raise ValueError(f"--init-adapter {a.init_adapter} is the folder this run writes (--out {out}): copy the "
                         "adapter to start from elsewhere, or write to another --out")
    model, tok, n_ctx = load_base(a.base)
    builder = PromptBuilder(tok, n_ctx)
    if dcfg.handcoded and not HANDCODED_FILE.exists():
        raise FileNotFoundError(
            f"{HANDCODED_FILE} is missing: generate it with `workbench experts --split valid_train --kind handcoded "
            f"--tries 2 --out {HANDCODED_FILE}` (~15 min), or train on planner trajectories only (--no-handcoded)"
        )
    planner = expert_trajectories_for("valid_train")
    trajs = training_trajectories(planner, HANDCODED_FILE if dcfg.handcoded else None)
    base = default_memory_base("valid_train")
    retriever = get_retriever(dcfg.retriever, base)
    on_policy = on_policy_trajectories(a.on_policy or ())
    trajs = trajs + on_policy
    joint, sw_trajs = None, []
    if a.scienceworld:
        if a.layouts != "all":
            raise ValueError("--scienceworld trains with --layouts all (the v2 recipe)")
        from workbench.training.joint import JointData, scienceworld_trajectories

        sw_trajs = scienceworld_trajectories(a.scienceworld)
        joint = JointData.build(tok, n_ctx, seed=cfg.seed)
        trajs = trajs + sw_trajs
    mixture = None
    if a.layouts == "all":
        # lazy: `--help` and a finished step's skip stay fast without the training stack (peft)
        from workbench.training.layouts import LayoutSampler

        layouts = LayoutSampler(seed=cfg.seed)
        stream = build_layout_stream(trajs, builder, layouts, dcfg, cfg.seed, cfg.negatives, joint=joint)
        mixture = planned_layouts(trajs, layouts, cfg.updates * cfg.accum, cfg.seed, joint=joint)
    else:
        if on_policy:
            raise ValueError("--on-policy data is trained with --layouts all (the v1 recipe is expert data only)")
        sampler = MemorySampler(retriever, dcfg.p_no_memory, dcfg.memory_top_k, seed=cfg.seed)
        stream = build_stream(trajs, builder, sampler, dcfg, cfg.seed, cfg.negatives)
    cfg = replace(cfg, data=data_fingerprint(trajs, a.layouts, dcfg) + "/"
                  + prompt_fingerprint(trajs[0], builder, a.layouts, dcfg)
                  + (f"/scienceworld:{_joint_fingerprint(joint, sw_trajs, dcfg)}" if joint else ""))
    if init_folder is not None:
        cfg = replace(cfg, init=f"{a.init_adapter}@{adapter_summary(init_folder)['sha1']}")
    if a.skip_finished and (done := finished_run(out, cfg)) is not None:
        print(json.dumps({"out": str(out), "already_trained": True, "updates": cfg.updates,
                          "final_train_loss": done["train"][-1]["loss"], "val": done["val"][-2:]}))
        return 0
    peft_model = add_lora(model, cfg)
    if init_folder is not None:
        init_lora(peft_model, init_folder, cfg)
    val = None if dcfg.val_tasks == "none" else (lambda: validation_sets(builder, retriever, dcfg))
    trainer = Trainer(peft_model, cfg, stream, val_sets=val, ckpt_dir=ckpt, autocast=a.autocast)
    log = trainer.fit(resume=a.resume)

    out.mkdir(parents=True, exist_ok=True)
    peft_model.peft_config["default"].base_model_name_or_path = HF_ID  # not the local cache path
    peft_model.save_pretrained(out, save_embedding_layers=False)
    (out / "README.md").unlink(missing_ok=True)  # peft's template card; MODEL_CARD.md is the real one
    cfg_path = out / "adapter_config.json"  # peft writes target_modules from a set: sort it, so reruns are byte-equal
    adapter_cfg = json.loads(cfg_path.read_text())
    if isinstance(adapter_cfg.get("target_modules"), list):
        adapter_cfg["target_modules"] = sorted(adapter_cfg["target_modules"])
    cfg_path.write_text(json.dumps(adapter_cfg, indent=2, sort_keys=True) + "\n")
    os.chmod(out / "adapter_model.safetensors", 0o644)  # safetensors writes 0600; the file is committed
    data = {
        "planner_trajectories": sum(t.source == "planner" for t in trajs),
        "handcoded_trajectories": sum(t.source == "handcoded" for t in trajs),
        "handcoded_file": str(HANDCODED_FILE.name) if dcfg.handcoded else None,
        "handcoded_expert": handcoded_report() if dcfg.handcoded and HANDCODED_FILE.exists() else None,
        "val_trajectories": len({e.task_id for e in trainer.val_sets.get("traj", [])}),
        "epochs": round(cfg.updates * cfg.accum / len(trajs), 2),
        "on_policy_trajectories": len(on_policy), "on_policy_files": list(a.on_policy or ()),
        "scienceworld_trajectories": len(sw_trajs), "scienceworld_split": a.scienceworld,
        "layouts": a.layouts, "layout_mixture": mixture,
        **{k: v for k, v in vars(dcfg).items()},
    }
    record = {"config": log.config, "data": data, "train": log.train, "val": log.val,
              "train_wall_s": log.wall_s, "updates_s": round(sum(r.get("s", 0) for r in log.train), 1),
              "total_wall_s": round(time.perf_counter() - t_start, 1),
              "threads": a.threads, "n_layers": int(model.config.num_hidden_layers), "out": a.out,
              "args": vars(a), "base": a.base, "base_hf_id": HF_ID, "torch": torch.__version__}
    write_outputs(out, record)
    print(json.dumps({"out": str(out), "train_wall_s": log.wall_s, "updates_s": record["updates_s"],
                      "final_train_loss": log.train[-1]["loss"], "val": log.val[-2:]}))
    return 0


def _joint_fingerprint(joint: Any, sw_trajs: list, dcfg: DataConfig) -> str:
    """How ScienceWorld's trajectories are rendered, on the longest one (its prompts overflow the budget, so the
    history drop is covered), packed as the stream packs them."""
    return joint.prompt_fingerprint(max(sw_trajs, key=lambda t: t.n_steps), max(dcfg.max_pack_tokens, joint.pack_tokens))


def _data_config(a: argparse.Namespace) -> DataConfig:
    return DataConfig(p_no_memory=a.p_no_memory, memory_top_k=a.memory_top_k, max_pack_tokens=a.max_pack_tokens,
                      val_tasks=a.val_tasks, handcoded=not a.no_handcoded, on_policy_states=a.on_policy_states)


def _validate_only(a: argparse.Namespace) -> int:
    """Validation losses of the adapter in ``--out`` (and of the base, = update 0) into its log and card.

    Validation never steers training (no early stopping, no tuning), so computing it after the run gives
    the same numbers as during it; this is for a run trained with ``--val-tasks none``.
    """
    from peft import PeftModel

    # lazy: `--help` and a finished step's skip stay fast without the training stack (peft)
    from workbench.training.trainer import evaluate

    t0 = time.perf_counter()
    out = Path(a.out)
    record = json.loads((out / "training_log.json").read_text())
    dcfg = _data_config(a)
    model, tok, n_ctx = load_base(a.base)
    peft_model = PeftModel.from_pretrained(model, out).eval()
    val = validation_sets(PromptBuilder(tok, n_ctx), get_retriever(dcfg.retriever, default_memory_base()), dcfg)
    final = record["train"][-1]["update"]
    rows = []
    for name, exs in val.items():
        with peft_model.disable_adapter():
            res = evaluate(peft_model, exs, progress=True)
        rows.append({"update": 0, "name": name} | {k: round(v, 5) for k, v in res.items()})
        res = evaluate(peft_model, exs, progress=True)
        rows.append({"update": final, "name": name} | {k: round(v, 5) for k, v in res.items()})
    record["val"] = sorted(rows, key=lambda r: r["update"])
    record["val_s"] = round(time.perf_counter() - t0, 1)
    record["data"]["val_tasks"] = dcfg.val_tasks
    record["data"]["val_trajectories"] = len({e.task_id for e in val["traj"]})
    record["val_computed_after_training"] = True
    write_outputs(out, record)
    print(json.dumps({"val": record["val"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
