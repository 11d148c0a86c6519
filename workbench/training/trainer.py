"""LoRA behaviour cloning on packed examples: seeded, checkpointed, resumable to the same bits.

One *update* = ``accum`` trajectories (each one or a few :class:`~workbench.training.data.PackedExample`),
loss = mean negative log-likelihood per target token over the update. The data of trajectory slot ``i`` is
a pure function of ``i`` (``stream(i)``), the learning rate a pure function of the update index, and a
checkpoint holds the LoRA weights, the optimizer state and the RNG state: a resumed run continues exactly as
the uninterrupted one would have.

Precision: the weights, the LoRA adapter, its gradients and the optimizer are float32; ``autocast="bf16"`` runs
the updates' matmuls in bfloat16 (``torch.autocast``), about 1.5x faster on a CPU with native bf16 kernels
(AVX512-BF16 / AMX) and several times slower on one without, so it is a property of the machine, not of the
run: a run may resume under the other mode (each logged update records its ``autocast``), and only an
uninterrupted run in one mode on one machine kind is reproducible to the bit. Validation is float32 always.

Checkpoints: ``<ckpt_dir>/update-000040/{adapter.safetensors, optimizer.pt, state.json}``; ``state.json`` is
written last, so a folder without it (a kill mid-save) is ignored.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from tqdm.auto import tqdm

from workbench.training.data import IGNORE, PackedExample, pack

AUTOCAST_MODES = ("off", "bf16", "auto")


def native_bf16() -> bool:
    """Whether this CPU has native bfloat16 matmul kernels (the ``avx512_bf16`` or ``amx_bf16`` flag)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def resolve_autocast(mode: str) -> str:
    """``auto`` -> ``bf16`` where the CPU has native bf16 kernels, else ``off``; ``off`` / ``bf16`` as given."""
    if mode not in AUTOCAST_MODES:
        raise ValueError(f"autocast '{mode}' is not one of {', '.join(AUTOCAST_MODES)}")
    return ("bf16" if native_bf16() else "off") if mode == "auto" else mode


__all__ = ["AUTOCAST_MODES", "native_bf16", "resolve_autocast", "TrainConfig", "add_lora", "init_lora", "example_loss", "example_losses", "ExampleLosses", "evaluate", "evaluate_loss",
           "Trainer", "lr_at"]


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one LoRA run (everything that must match for ``resume``).

    Attributes:
        updates: optimizer updates; each consumes ``accum`` trajectories.
        lr: peak learning rate (linear warm-up over ``warmup`` updates, cosine decay to ``lr * min_lr_ratio``).
        lora_r / lora_alpha / lora_dropout / target_modules: the LoRA adapter.
        negatives / cand_weight: other admissible commands sampled per step, and the weight of the candidate
            loss (cross-entropy of the expert's command among them, scored by mean log-prob per token as the
            agent scores them); 0 trains on the expert's tokens only.
        eval_every / checkpoint_every: in updates (0: only at the end).
        data: a fingerprint of the training data (``train.data_fingerprint``): a checkpoint of a run on other
            data (other on-policy files, layouts or data options) is refused on resume, not continued.
        init: the adapter the LoRA weights start from (``"<name or folder>@<sha1 of its weights>"``, see
            :func:`init_lora`); empty: a fresh adapter (LoRA B = 0, the identity). Part of the identity when set.
    """

    seed: int = 0
    updates: int = 160
    accum: int = 2
    lr: float = 1e-3
    warmup: int = 5
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    negatives: int = 0
    cand_weight: float = 0.0
    eval_every: int = 80
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    data: str = ""
    init: str = ""

    def __post_init__(self) -> None:
        if self.keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints is {self.keep_checkpoints}: at least 1 (the checkpoint a resume reads)")

    def identity(self) -> dict:
        d = asdict(self)
        d["target_modules"] = list(self.target_modules)
        for k in ("eval_every", "checkpoint_every", "keep_checkpoints"):
            d.pop(k)  # bookkeeping: may change between a run and its resume
        if not d["init"]:
            d.pop("init")  # a fresh adapter: the identity of runs logged before warm starts existed
        return d


def lr_at(cfg: TrainConfig, update: int) -> float:
    """Learning rate of update ``update`` (0-based)."""
    if update < cfg.warmup:
        return cfg.lr * (update + 1) / cfg.warmup
    span = max(1, cfg.updates - cfg.warmup)
    frac = min(1.0, (update - cfg.warmup) / span)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


def add_lora(model: Any, cfg: TrainConfig) -> Any:
    """Wrap ``model`` with a fresh, seeded LoRA adapter on ``cfg.target_modules`` (base weights frozen)."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(cfg.seed)
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=list(cfg.target_modules), bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def init_lora(model: Any, folder: str | Path, cfg: TrainConfig) -> None:
    """Load a trained adapter's LoRA weights (``folder``: adapter_config.json + adapter_model.safetensors) into the
    fresh adapter of ``model`` (:func:`add_lora`), to continue training from it (a warm start; ``TrainConfig.init``
    names it with the sha1 of its weights, ``card.adapter_summary``).

    Raises:
        ValueError: the adapter's rank, alpha or target modules differ from ``cfg``'s, or its weights do not
            cover every LoRA parameter of ``model`` (naming the folder and the mismatch).
    """
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    folder = Path(folder)
    weights_file = folder / "adapter_model.safetensors"
    conf_file = folder / "adapter_config.json"
    if not weights_file.exists() or not conf_file.exists():
        raise FileNotFoundError(f"{folder}: not a trained LoRA adapter (needs adapter_config.json and "
                                "adapter_model.safetensors)")
    conf = json.loads(conf_file.read_text())
    want = {"r": cfg.lora_r, "lora_alpha": cfg.lora_alpha, "target_modules": sorted(cfg.target_modules)}
    have = {"r": conf.get("r"), "lora_alpha": conf.get("lora_alpha"),
            "target_modules": sorted(conf.get("target_modules") or [])}
    if have != want:
        diff = {k: (have[k], want[k]) for k in want if have[k] != want[k]}
        raise ValueError(f"{conf_file}: the adapter to start from does not match this run (its value, this run's): "
                         f"{diff}; pass the same --r / --alpha or start from another adapter")
    weights = load_file(str(weights_file))
    res = set_peft_model_state_dict(model, weights)
    lora = [n for n, p in model.named_parameters() if p.requires_grad]
    n_lora = sum(".lora_" in n for n in lora)
    if res.unexpected_keys or n_lora != len(weights):
        raise ValueError(f"{weights_file}: {len(weights)} tensors for {n_lora} LoRA parameters of this model "
                         f"(unexpected: {list(res.unexpected_keys)[:3]}); the adapter was trained on another base")


@dataclass
class ExampleLosses:
    """Losses of one packed example (sums, so an update can normalise over all its examples)."""

    nll: torch.Tensor  # sum of target-token NLL
    n_tokens: int
    cand: torch.Tensor  # sum over steps with negatives of -log softmax(candidate scores)[expert]
    n_cand_steps: int = 0
    cand_correct: int = 0  # steps where the expert's command has the highest score (the agent's choice)
    scores: list = field(default_factory=list)  # per step: mean log-prob per token of [expert, *negatives]


def example_losses(model: Any, ex: PackedExample) -> ExampleLosses:
    """Target-token NLL and, for steps with negatives, the candidate loss of one packed example.

    The LM head runs on the positions that predict a scored token only: most of a packed sequence is prompt,
    and the 49k-way head would otherwise be a fifth of the forward.
    """
    b = pack(ex)
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = inner.model(input_ids=b.input_ids, attention_mask=b.attention_mask,
                         position_ids=b.position_ids).last_hidden_state  # [1, pos, d_model]
    sel = (b.labels[0] != IGNORE).nonzero().squeeze(-1)
    if not b.candidates:
        logits = inner.lm_head(hidden[0, sel]).float()  # [n_target, d_vocab]
        nll = torch.nn.functional.cross_entropy(logits, b.labels[0, sel], reduction="sum")
        return ExampleLosses(nll, int(sel.numel()), nll.new_zeros(()))
    need = sorted(set(sel.tolist()) | {p for step in b.candidates for ps, _ in step for p in ps})
    row = {p: i for i, p in enumerate(need)}
    logp = torch.log_softmax(inner.lm_head(hidden[0, need]).float(), dim=-1)  # [n_needed, d_vocab]
    nll = -logp[[row[p] for p in sel.tolist()], b.labels[0, sel]].sum()
    cand, correct, scores = nll.new_zeros(()), 0, []
    for step in b.candidates:
        s = torch.stack([logp[[row[p] for p in ps], list(toks)].mean() for ps, toks in step])  # [n_candidates]
        cand = cand - torch.log_softmax(s, dim=0)[0]
        correct += int(s.argmax().item() == 0)
        scores.append(s.detach().tolist())
    return ExampleLosses(nll, int(sel.numel()), cand, len(b.candidates), correct, scores)


def example_loss(model: Any, ex: PackedExample) -> tuple[torch.Tensor, int]:
    """(sum of target-token NLL, number of target tokens) of one packed example."""
    out = example_losses(model, ex)
    return out.nll, out.n_tokens


@torch.no_grad()
def evaluate(model: Any, examples: Sequence[PackedExample], desc: str = "val", progress: bool = False) -> dict:
    """Mean NLL per target token over ``examples`` and, where steps carry negatives, the share of steps whose
    expert command scores highest (with every admissible command as negatives: teacher-forced accuracy)."""
    was = model.training
    model.eval()
    tot, n, steps, correct = 0.0, 0, 0, 0
    for ex in tqdm(examples, desc=desc, disable=not progress, leave=False):
        out = example_losses(model, ex)
        tot += out.nll.item()
        n += out.n_tokens
        steps += out.n_cand_steps
        correct += out.cand_correct
    model.train(was)
    return {"loss": tot / max(1, n)} | ({"acc": correct / steps} if steps else {})


def evaluate_loss(model: Any, examples: Sequence[PackedExample], desc: str = "val", progress: bool = False) -> float:
    """Mean NLL per target token over ``examples`` (eval mode, no gradients)."""
    return evaluate(model, examples, desc, progress)["loss"]


@dataclass
class TrainLog:
    """What a run did; written to JSON beside the adapter."""

    config: dict
    train: list[dict] = field(default_factory=list)  # {update, loss, tokens, lr, trajectories}
    val: list[dict] = field(default_factory=list)  # {update, loss[, name]}
    wall_s: float = 0.0


ValSets = dict[str, Sequence[PackedExample]]


class Trainer:
    """Runs ``cfg.updates`` LoRA updates over ``stream`` with checkpoints in ``ckpt_dir``.

    Args:
        model: a PEFT model (:func:`add_lora`).
        cfg: the run's :class:`TrainConfig`.
        stream: trajectory slot ``i`` -> its packed examples (a pure function of ``i``).
        val_sets: name -> packed examples whose loss is logged every ``eval_every`` updates and at the end
            (or a function returning them, called at the first validation).
        ckpt_dir: checkpoint folder.
    """

    def __init__(self, model: Any, cfg: TrainConfig, stream: Callable[[int], list[PackedExample]],
                 val_sets: ValSets | Callable[[], ValSets] | None = None, ckpt_dir: str | Path | None = None,
                 progress: bool = True, autocast: str = "off"):
        self.model = model
        self.autocast = resolve_autocast(autocast)
        self.cfg = cfg
        self.stream = stream
        self._val_sets = val_sets
        self.ckpt_dir = Path(ckpt_dir) if ckpt_dir is not None else None
        self.progress = progress
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.update = 0
        self.log = TrainLog(config=cfg.identity())

    # ---- checkpoints -------------------------------------------------------------------------------
    def _trainable_state(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}

    def save_checkpoint(self) -> Path:
        from safetensors.torch import save_file

        assert self.ckpt_dir is not None
        folder = self.ckpt_dir / f"update-{self.update:06d}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        save_file(self._trainable_state(), str(folder / "adapter.safetensors"))
        torch.save(self.opt.state_dict(), folder / "optimizer.pt")
        state = {"update": self.update, "config": self.cfg.identity(), "log": asdict(self.log),
                 "torch_rng": torch.get_rng_state().tolist()}
        (folder / "state.json").write_text(json.dumps(state))  # last: marks the checkpoint complete
        done = sorted(p for p in self.ckpt_dir.glob("update-*") if (p / "state.json").exists())
        for old in done[: -self.cfg.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)
        return folder

    def latest_checkpoint(self) -> Path | None:
        if self.ckpt_dir is None or not self.ckpt_dir.exists():
            return None
        done = sorted(p for p in self.ckpt_dir.glob("update-*") if (p / "state.json").exists())
        return done[-1] if done else None

    def load_checkpoint(self, folder: Path) -> None:
        from safetensors.torch import load_file

        state = json.loads((folder / "state.json").read_text())
        if state["config"] != self.cfg.identity():
            mine = self.cfg.identity()
            diff = {k: (state["config"].get(k), mine.get(k)) for k in {**state["config"], **mine}
                    if state["config"].get(k) != mine.get(k)}
            raise ValueError(f"{folder}: --resume with different hyper-parameters {diff}; use a new checkpoint "
                             "folder or the same arguments")
        weights = load_file(str(folder / "adapter.safetensors"))
        named = dict(self.model.named_parameters())
        with torch.no_grad():
            for n, t in weights.items():
                named[n].copy_(t)
        self.opt.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
        torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
        self.update = int(state["update"])
        log = state["log"]
        self.log = TrainLog(config=log["config"], train=log["train"], val=log["val"], wall_s=log["wall_s"])

    # ---- training ----------------------------------------------------------------------------------
    @property
    def val_sets(self) -> ValSets:
        if callable(self._val_sets):
            self._val_sets = self._val_sets()
        return dict(self._val_sets or {})

    def _validate(self) -> None:
        if not any(v["update"] == 0 for v in self.log.val) and not self.cfg.init:
            # The adapter starts as the identity (LoRA B = 0), so update 0's loss is the base model's: computed
            # here with the adapter disabled, it needs the validation data only when the first check is due.
            with self.model.disable_adapter():
                self._val_losses(0)
        if self.update:
            self._val_losses(self.update)

    def _val_losses(self, update: int) -> None:
        for name, exs in self.val_sets.items():
            res = evaluate(self.model, exs, desc=f"val {name}", progress=self.progress)
            self.log.val.append({"update": update, "name": name} | {k: round(v, 5) for k, v in res.items()})

    def fit(self, resume: bool = False) -> TrainLog:
        """Train to ``cfg.updates`` (continuing from the latest checkpoint when ``resume``)."""
        cfg = self.cfg
        if resume and (ck := self.latest_checkpoint()) is not None:
            self.load_checkpoint(ck)
        if self.cfg.init and self._val_sets and self.update == 0 and not any(v["update"] == 0 for v in self.log.val):
            # A warm start's update 0 is the adapter it starts from (not the base): measured before it moves.
            self._val_losses(0)
        t0 = time.perf_counter() - self.log.wall_s
        self.model.train()
        bar = tqdm(total=cfg.updates, initial=self.update, desc="LoRA updates", disable=not self.progress)
        while self.update < cfg.updates:
            t_update = time.perf_counter()
            exs = [ex for i in range(cfg.accum) for ex in self.stream(self.update * cfg.accum + i)]
            n_tok = sum(ex.n_target_tokens for ex in exs)
            lr = lr_at(cfg, self.update)
            for g in self.opt.param_groups:
                g["lr"] = lr
            n_cand = sum(1 for ex in exs for st in ex.steps if st.negatives)
            self.opt.zero_grad(set_to_none=True)
            total = cand_total = 0.0
            correct = 0
            for ex in exs:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast == "bf16"):
                    out = example_losses(self.model, ex)
                loss_ex = out.nll / n_tok
                if cfg.cand_weight and out.n_cand_steps:
                    loss_ex = loss_ex + cfg.cand_weight * out.cand / n_cand
                loss_ex.backward()
                total += out.nll.item()
                cand_total += out.cand.item()
                correct += out.cand_correct
            torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
            self.opt.step()
            self.update += 1
            loss = total / max(1, n_tok)
            row = {"update": self.update, "loss": round(loss, 5), "tokens": n_tok, "lr": lr,
                   "n_tokens_seq": sum(ex.n_tokens for ex in exs), "autocast": self.autocast}
            if n_cand:
                row |= {"cand_loss": round(cand_total / n_cand, 5), "cand_acc": round(correct / n_cand, 4)}
            self.log.train.append(row | {"s": round(time.perf_counter() - t_update, 2)})
            self.log.wall_s = round(time.perf_counter() - t0, 1)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.1e}")
            last = self.update == cfg.updates
            if self._val_sets and (last or (cfg.eval_every and self.update % cfg.eval_every == 0)):
                self._validate()
                self.model.train()
                bar.set_postfix(loss=f"{loss:.3f}", val=f"{self.log.val[-1]['loss']:.3f}")
            if self.ckpt_dir is not None and (last or (cfg.checkpoint_every and self.update % cfg.checkpoint_every == 0)):
                self.log.wall_s = round(time.perf_counter() - t0, 1)
                self.save_checkpoint()
        bar.close()
        self.log.wall_s = round(time.perf_counter() - t0, 1)
        return self.log
