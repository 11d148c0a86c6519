"""A registered LoRA adapter -> its base model with the adapter merged, cached once as fp32 safetensors.

Merging (``peft``'s ``merge_and_unload``) gives a plain transformers model, so TransformerLens wraps it like any
other and hooks, capture and parity need nothing adapter-specific. The merged copy lives in
``cache_root()/models/<name>-<adapter hash>/``: a retrained adapter gets a fresh folder, never a stale merge.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from workbench.models.registry import ModelSpec, cached_model_folder, get_model_spec
from workbench.paths import cache_root

__all__ = ["adapter_dir", "adapter_folder", "adapter_path", "adapter_hash", "model_adapter_hash", "load_with_adapter", "ADAPTER_FILES"]

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def adapter_path(spec: ModelSpec) -> Path | None:
    """Where ``spec``'s adapter folder is (relative paths are relative to the ``workbench`` package), whether or not
    it is trained yet; None for a model without an adapter."""
    return None if spec.adapter is None else PACKAGE_ROOT / spec.adapter  # an absolute adapter path stays as it is


def adapter_dir(spec: ModelSpec) -> Path:
    """The adapter folder of ``spec`` (``adapter_path``), checked to hold a trained adapter.

    Raises:
        ModelNotFoundError: the folder or one of its files is missing; the message says how to train it.
    """
    # lazy: loading.py imports this module (adapters and loading call each other)
    from workbench.models.loading import ModelNotFoundError

    folder = adapter_path(spec)
    if folder is None:
        raise ValueError(f"model '{spec.name}' has a base ('{spec.base}') but no adapter folder")
    missing = [f for f in ADAPTER_FILES if not (folder / f).exists()]
    if missing:
        raise ModelNotFoundError(
            f"model '{spec.name}': the LoRA adapter folder {folder} lacks {', '.join(missing)}. "
            f"It is trained, not downloaded: `{spec.recipe or 'python -m workbench.training.train --out ' + str(folder)}`; "
            f"or load the untrained base as '{spec.base}'."
        )
    return folder


def adapter_hash(folder: Path) -> str:
    """Content hash of the adapter's config and weights (names the merged cache folder)."""
    h = hashlib.sha1()
    for name in ADAPTER_FILES:
        h.update((folder / name).read_bytes())
    return h.hexdigest()[:10]


def adapter_folder(name_or_path: str) -> Path | None:
    """The adapter folder a model name or path names: a registered adapter model's (:func:`adapter_path`, trained
    or not), or a folder holding :data:`ADAPTER_FILES` (a training output such as a DAgger iteration's); None for
    anything else (a base model, an HF folder or id)."""
    spec = get_model_spec(name_or_path)
    if spec is not None:
        return adapter_path(spec)
    folder = Path(name_or_path).expanduser()
    return folder if all((folder / f).exists() for f in ADAPTER_FILES) else None


def model_adapter_hash(name_or_path: str) -> str | None:
    """The :func:`adapter_hash` of the adapter a model name or path loads (:func:`adapter_folder`); None for a model
    without one, or one not trained yet. A run records it, so episodes played under one name before and after the
    adapter was retrained are told apart."""
    folder = adapter_folder(name_or_path)
    if folder is None or not all((folder / f).exists() for f in ADAPTER_FILES):
        return None
    return adapter_hash(folder)


def _base_folder(base: ModelSpec) -> tuple[Path, str]:
    # lazy: loading.py imports this module (adapters and loading call each other)
    from workbench.models.loading import _dequantized_dir, _resolve_path

    if base.gguf is not None:
        return _dequantized_dir(base), f"gguf:{base.gguf[0]}/{base.gguf[1]}"
    folder, _, source = _resolve_path(base.hf_id)
    return folder, source


def load_with_adapter(spec: ModelSpec) -> tuple[Path, str, str]:
    """(folder of the merged fp32 model, hf_id for TransformerLens, source description) for ``spec``.

    The first call merges the adapter into the base and saves the result (seconds); later calls only
    check the folder.

    Raises:
        ModelNotFoundError: the adapter is missing (see :func:`adapter_dir`).
        ValueError: ``spec.base`` is not a registered model.
    """
    folder = adapter_dir(spec)
    base = get_model_spec(spec.base or "")
    if base is None:
        raise ValueError(f"model '{spec.name}': base '{spec.base}' is not a registered model")
    digest = adapter_hash(folder)
    out = cache_root() / "models" / f"{spec.name}-{digest}"
    source = f"adapter:{spec.adapter}@{digest} merged into {spec.base}"

    def merge(tmp: Path) -> None:
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        base_dir, base_source = _base_folder(base)
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        PeftModel.from_pretrained(model, folder).merge_and_unload().save_pretrained(tmp)
        AutoTokenizer.from_pretrained(base_dir).save_pretrained(tmp)
        (tmp / "workbench_source.json").write_text(json.dumps(
            {"adapter": str(folder), "adapter_hash": digest, "base": spec.base, "base_source": base_source}))

    cached_model_folder(out, merge)
    return out, base.hf_id, source
