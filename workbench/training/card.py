"""MODEL_CARD.md of a trained adapter: data, schedule, loss curve, wall time, size (and evaluation, when run)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from workbench.models.adapters import adapter_path
from workbench.models.registry import get_model_spec, list_models

__all__ = ["adapter_summary", "write_model_card", "CARD_FILE"]

CARD_FILE = "MODEL_CARD.md"
WEIGHTS = "adapter_model.safetensors"


def adapter_summary(folder: str | Path) -> dict:
    """Size, content hash and parameter count of the adapter weights in ``folder``."""
    from safetensors import safe_open

    path = Path(folder) / WEIGHTS
    n = 0
    with safe_open(str(path), framework="pt") as f:
        for k in f.keys():
            n += _numel(f.get_slice(k).get_shape())
    return {"file": WEIGHTS, "bytes": path.stat().st_size, "sha1": hashlib.sha1(path.read_bytes()).hexdigest()[:12],
            "parameters": n}


def _numel(shape) -> int:
    out = 1
    for d in shape:
        out *= int(d)
    return out


def _curve(rows: list[dict], points: int = 12) -> str:
    """A loss curve as a compact table: the mean train loss over equal windows of updates."""
    if not rows:
        return "(no updates)"
    size = max(1, len(rows) // points)
    lines = ["| updates | mean train loss |", "|---|---|"]
    for i in range(0, len(rows), size):
        win = rows[i:i + size]
        lines.append(f"| {win[0]['update']}–{win[-1]['update']} | {sum(r['loss'] for r in win) / len(win):.3f} |")
    return "\n".join(lines)


def _memory_line(data: dict) -> str:
    """The card's memory/layout paragraph: the v1 recipe (Traj or none), or v2's layout mixture and its counts."""
    mix = data.get("layout_mixture")
    if not mix:
        return (f"- Memory: with probability {1 - data['p_no_memory']:.0%} the prompt carries the trajectory of a "
                f"*different*\n  game of the same task type, drawn among the top {data['memory_top_k']} MiniLM-retrieved "
                "entries of the\n  valid_train planner memory base (own game excluded); otherwise no memory (ReAct condition).")
    rows = ", ".join(f"{k} {v}" for k, v in mix["by_layout"].items())
    budgets = ", ".join(f"{k}: {v}" for k, v in mix["by_budget"].items())
    return (f"- Layouts: each training sequence under one layout drawn uniformly over the {len(mix['by_layout'])} "
            f"evaluated conditions (trajectory passes per layout: {rows}); budgeted layouts drew their o200k budget "
            f"uniformly from 500 / 750 ({budgets}).\n- On-policy (DAgger) trajectories: "
            f"{data.get('on_policy_trajectories', 0)} labelled by the expert for any state "
            f"({', '.join(data.get('on_policy_files') or []) or 'none'}).")


def _identity(folder: str | Path, record: dict) -> tuple[str, str]:
    """The card's title (the registered model name whose adapter this folder is, else the output path) and its
    regenerate line (the registered recipe, else the training command)."""
    here = Path(folder).resolve()
    command = (f"`python -m workbench.training.train --out {record.get('out', Path(folder).as_posix())} ...`; "
               "the exact arguments are in `training_log.json`")
    for name in list_models():
        spec = get_model_spec(name)
        folder_of = adapter_path(spec) if spec else None
        if folder_of is not None and folder_of.resolve() == here:
            return name, (f"`{spec.recipe}` (its training step: {command})" if spec.recipe else command)
    return record.get("out", Path(folder).as_posix()), command


def _precision(train: list[dict]) -> str:
    """Which updates ran their matmuls in bfloat16 autocast (rows without the field: float32, older runs)."""
    n_bf16 = sum(r.get("autocast", "off") == "bf16" for r in train)
    base = "float32 weights, adapter, gradients and optimizer"
    if not n_bf16:
        return base + "; float32 matmuls"
    return (base + f"; matmuls in bfloat16 autocast for {n_bf16} of {len(train)} updates"
            + (" (float32 for the rest: resumed on a CPU without native bf16)" if n_bf16 < len(train) else ""))


def write_model_card(folder: str | Path, record: dict, adapter: dict, evaluation: str | None = None) -> Path:
    """Write ``folder/MODEL_CARD.md`` from a training record (``training_log.json``) and an adapter summary.

    Args:
        evaluation: optional markdown section with evaluation results (added by the evaluation script).
    """
    cfg, data = record["config"], record["data"]
    val = record.get("val", [])
    init = cfg.get("init", "")
    start = (f"the weights of `{init.rsplit('@', 1)[0]}` (sha1 {init.rsplit('@', 1)[-1]}), trained further (a warm start)"
             if init else "a fresh adapter (LoRA B = 0: the base model)")
    val_rows = "\n".join(
        f"| {v['update']}{(' (start)' if init else ' (base)') if v['update'] == 0 else ''} | {v.get('name', '')} | {v['loss']:.3f} | "
        f"{v['acc']:.1%} |" if "acc" in v else f"| {v['update']} | {v.get('name', '')} | {v['loss']:.3f} | – |"
        for v in val)
    cand = (f"; candidate loss weight {cfg['cand_weight']} over {cfg['negatives']} sampled admissible commands per "
            "step" if cfg.get("cand_weight") else "")
    after = (" Computed after training (`--validate-only`); validation never steers training."
             if record.get("val_computed_after_training") else "")
    hc = data.get("handcoded_expert") or {}
    val_s = record.get("val_s", max(0.0, record["train_wall_s"] - record["updates_s"]))
    val_time = f"; validation {val_s / 60:.1f} min" if val else ""
    memory_line = _memory_line(data)
    if data.get("scienceworld_trajectories"):  # the joint agent: ScienceWorld's gold paths beside ALFWorld's data
        memory_line += (f"\n- ScienceWorld: {data['scienceworld_trajectories']} gold paths of its "
                        f"{data.get('scienceworld_split', '?')} variations (every task type, ETO's `easy` "
                        "simplifications, ScienceWorld's own instructions and prompt budget), mixed into the same "
                        "updates under the same layouts: one agent for both benchmarks. Its dev and test "
                        "variations are never read.")
    mixture = (" and ScienceWorld gold paths" if data.get("scienceworld_trajectories") else "")
    start0 = ("the adapter the run starts from, measured before the first update" if init
              else "the base model (the LoRA adapter starts as the identity)")
    title, regenerate = _identity(folder, record)
    hc_line = (f"{hc['won']}/{hc['total']} valid_train games won by ALFWorld's handcoded expert "
               f"({hc['success_rate']:.0%}; {hc['first_try_won']} on the first of 2 seeded tries; "
               f"{hc['mean_steps_won']} steps on average when won)" if hc else "not used")
    text = f"""# {title} (LoRA adapter)

A LoRA adapter for SmolLM2-135M-Instruct (`{record['base_hf_id']}`, from the packaged Q4_1 GGUF dequantized
to fp32), trained by memory-conditioned behaviour cloning on ALFWorld expert trajectories{mixture} so that the
workbench's log-likelihood agent can act. `load_model("{title}")` merges it into the base once
and caches the merged fp32 model, so TransformerLens hooks, capture and parity work unchanged.

Regenerate: {regenerate}.

## Data
- Split: **valid_train only** (200 games) of ALFWorld. valid_seen gives the validation loss; valid_unseen is never read.
- Planner replays: {data['planner_trajectories']} successful trajectories.
- Handcoded search: {data['handcoded_trajectories']} successful trajectories ({hc_line}).
- Layout: exactly the agent's prompt (`PromptBuilder` + `render_pieces`); the target at step k is the expert's
  action tokens + `<|im_end|>` (what `ActionScorer` scores); loss on those tokens only. The handcoded
  searcher's `look` (its fallback when a proposal maps to no command), `close X` and `inventory` stay in the
  history but are not imitated.
{memory_line}
- Packing: all steps of one trajectory in one forward (the longest prefix once, one `suffix + target` branch per
  step, a 4-D mask and position ids so each branch sees exactly its own prompt); sequences over
  {data['max_pack_tokens']} tokens are split.

## Training
| | |
|---|---|
| start | {start} |
| LoRA | r={cfg['lora_r']}, alpha={cfg['lora_alpha']}, dropout={cfg['lora_dropout']}, modules {', '.join(cfg['target_modules'])} (all {record.get('n_layers', '?')} layers) |
| optimizer | AdamW, lr {cfg['lr']} (warm-up {cfg['warmup']} updates, cosine to {cfg['min_lr_ratio']}×), grad clip {cfg['max_grad_norm']}{cand} |
| updates | {cfg['updates']} × {cfg['accum']} trajectories = {cfg['updates'] * cfg['accum']} trajectory passes ({data['epochs']} epochs) |
| seed | {cfg['seed']} |
| precision | {_precision(record['train'])} |
| wall time | {record['updates_s'] / 60:.1f} min for the {len(record['train'])} updates, {record['threads']} CPU thread(s) (the 2-core machine was shared with other jobs), torch {record['torch']}{val_time} |
| adapter | `{adapter['file']}`, {adapter['bytes'] / 1e6:.2f} MB, {adapter['parameters']:,} parameters, sha1 {adapter['sha1']} |

### Train loss (mean NLL per action token)
{_curve(record['train'])}

### Validation (valid_seen planner trajectories, tasks {data['val_tasks']}: {data['val_trajectories']} games)
Loss: mean NLL per action token. Accuracy: the expert's command scores highest among all admissible commands
(mean log-prob per token, as the agent decides): teacher-forced accuracy. Update 0 is {start0}.{after}

| update | memory | loss | accuracy |
|---|---|---|---|
{val_rows}
"""
    if record.get("notes"):
        text += "\n### Notes\n" + "\n".join(f"- {n}" for n in record["notes"]) + "\n"
    if evaluation:
        text += "\n" + evaluation.strip() + "\n"
    path = Path(folder) / CARD_FILE
    path.write_text(text)
    return path
