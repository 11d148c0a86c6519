"""``load_model``: a named, local or HF-cached model -> TransformerLens ``TransformerBridge``.

Nothing here downloads: ``HF_HUB_OFFLINE=1`` is set before transformers is touched, and a missing model
is an error saying every place that was looked in.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch

from workbench.models.registry import (
    ModelSpec,
    cached_model_folder,
    get_model_spec,
    list_models,
    packaged_gguf_path,
)
from workbench.paths import cache_root

__all__ = ["LoadedModel", "load_model", "ModelNotFoundError"]


#: The families the architecture matrix checks through every instrument (tests/models/test_architecture_matrix.py).
TESTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM",
                        "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Phi3ForCausalLM", "Olmo2ForCausalLM",
                        "GPTNeoXForCausalLM")


class UnsupportedArchitectureError(ValueError):
    """A model whose architecture the TransformerLens bridge cannot wrap; the message names the supported ones."""


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def _known_architectures() -> str:
    try:
        from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES
    except ImportError:
        return "(its list could not be read)"
    causal = sorted(a for a in SUPPORTED_ARCHITECTURES if a.endswith("ForCausalLM"))
    return f"{len(SUPPORTED_ARCHITECTURES)} architectures, among them {', '.join(causal)}"


class ModelNotFoundError(FileNotFoundError):
    """No weights for a model name; the message lists where the loader looked."""


@dataclass
class LoadedModel:
    """A loaded white-box model.

    Attributes:
        name: the name it was loaded by.
        bridge: the TransformerLens ``TransformerBridge`` (hooks: ``blocks.{layer}.attn.hook_pattern`` ...).
        hf_model: the underlying transformers model (the bridge wraps the very same modules).
        tokenizer: its tokenizer, with chat template.
        n_ctx: context length in tokens.
        source: where the weights came from (for config.json / model cards).
    """

    name: str
    bridge: Any
    hf_model: Any
    tokenizer: Any
    n_ctx: int
    source: str
    meta: dict = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return int(self.hf_model.config.num_hidden_layers)

    @property
    def n_heads(self) -> int:
        return int(self.hf_model.config.num_attention_heads)

    @property
    def n_key_value_heads(self) -> int:
        cfg = self.hf_model.config
        return int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)

    @property
    def d_head(self) -> int:
        cfg = self.hf_model.config
        return int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)

    @property
    def device(self) -> str:
        """Where the weights are (``cpu``, ``cuda:0``, ...)."""
        return str(next(self.hf_model.parameters()).device)

    @property
    def dtype(self) -> str:
        """The weights' dtype name (``float32``, ``bfloat16``, ``float16``), what runs and tables record."""
        return str(next(self.hf_model.parameters()).dtype).removeprefix("torch.")


def _dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}[dtype]
    except KeyError:
        raise ValueError(f"dtype '{dtype}' is not one of float32, bfloat16, float16") from None


def _dequantized_dir(spec: ModelSpec) -> Path:
    """fp32 safetensors of a packaged GGUF, made once (GGUF dequantisation takes seconds every time)."""
    out = cache_root() / "models" / spec.name

    def dequantize(tmp: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        dist, fname = spec.gguf  # type: ignore[misc]
        gguf = packaged_gguf_path(dist, fname)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # transformers dequantizes GGUF tensors on load; only the bookkeeping still says "quantized".
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "workbench_source.json").write_text(json.dumps({"gguf": str(gguf), "distribution": dist}))

    return cached_model_folder(out, dequantize)


def _resolve_path(name_or_path: str) -> tuple[Path, str, str]:
    """(local folder, hf_id for the TL adapter, source description) for a non-registered name."""
    looked: list[str] = []
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        if (p / "config.json").exists():
            return p, _hf_id_from_config(p, name_or_path), f"local:{p}"
        looked.append(f"{p} (folder without config.json)")
    else:
        looked.append(f"{p} (no such folder)")
    if "/" in name_or_path and not name_or_path.startswith((".", "/", "~")):
        hub_cache = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub")
        repo_dir = hub_cache / ("models--" + name_or_path.replace("/", "--")) / "snapshots"
        if repo_dir.is_dir():
            snaps = sorted(repo_dir.iterdir(), key=lambda d: d.stat().st_mtime)
            for snap in reversed(snaps):
                if (snap / "config.json").exists():
                    return snap, name_or_path, f"hf-cache:{snap}"
        looked.append(f"{repo_dir} (HF cache)")
    raise ModelNotFoundError(
        f"model '{name_or_path}' not found. It is not a registered name ({', '.join(list_models())}); "
        f"looked in: {'; '.join(looked)}. Nothing is downloaded at run time: put the model in a local "
        "folder (config.json + safetensors + tokenizer) or in the HF cache, and pass its path or id."
    )


def _adapter_folder_spec(name_or_path: str):
    """A local LoRA adapter folder (``adapter_config.json`` + weights, no ``config.json``: what training writes,
    e.g. a DAgger iteration's adapter) as a model spec over the registered base it was trained on."""
    # lazy: adapters.py imports this module (adapters and loading call each other)
    from workbench.models.registry import ModelSpec, list_models

    p = Path(name_or_path).expanduser()
    if not (p.is_dir() and (p / "adapter_config.json").exists() and not (p / "config.json").exists()):
        return None
    base_id = json.loads((p / "adapter_config.json").read_text()).get("base_model_name_or_path")
    base = next((get_model_spec(n) for n in list_models()
                 if (s := get_model_spec(n)) and s.hf_id == base_id and s.base is None), None)
    if base is None:
        raise ModelNotFoundError(f"{p}: a LoRA adapter over '{base_id}', which is not a registered base model "
                                 f"({', '.join(list_models())})")
    return ModelSpec(name=f"adapter-{p.resolve().name}", hf_id=base.hf_id, adapter=str(p.resolve()), base=base.name,
                     description=f"LoRA adapter {p} over {base.name}")


def _hf_id_from_config(folder: Path, fallback: str) -> str:
    """TransformerLens picks an adapter by architecture; the id is only a label for local folders."""
    try:
        cfg = json.loads((folder / "config.json").read_text())
        return cfg.get("_name_or_path") or fallback
    except (OSError, json.JSONDecodeError):
        return fallback


def load_model(
    name_or_path: str = "smollm2-135m-instruct",
    device: str | None = None,
    dtype: str | torch.dtype = "float32",
    *,
    unwrapped: bool = False,
) -> LoadedModel:
    """Load a white-box model and wrap it in a TransformerLens ``TransformerBridge``.

    Args:
        name_or_path: a registered name (``smollm2-135m-instruct``, ``smollm2-135m-alfworld``), a local HF
            folder, or an HF id already in the local HF cache (e.g. ``Qwen/Qwen2.5-7B-Instruct``).
        device: ``cpu``, ``cuda``, ``cuda:N``, ``mps`` or ``auto``; None: the process default
            (``workbench.models.device``: ``--device``, ``WORKBENCH_DEVICE``, else cpu).
        dtype: ``float32`` (default), ``bfloat16`` or ``float16``.
        unwrapped: return the `transformers` model itself, no bridge (see :func:`load_transformers_model`).

    Returns:
        The :class:`LoadedModel`; its bridge runs eager attention so every hook fires.

    Raises:
        ModelNotFoundError: nothing found; the message lists where it looked.
        DeviceError: the device cannot be used here, or cannot run the dtype (before anything is loaded).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.models.device import check_dtype, resolve_device

    spec = get_model_spec(name_or_path)
    torch_dtype = _dtype(dtype)
    device = resolve_device(device)
    check_dtype(device, str(torch_dtype).removeprefix("torch."))
    if spec is not None and spec.base is not None:
        # lazy: adapters.py imports this module (adapters and loading call each other)
        from workbench.models.adapters import load_with_adapter

        folder, hf_id, source = load_with_adapter(spec)
    elif spec is not None and spec.gguf is not None:
        folder, hf_id = _dequantized_dir(spec), spec.hf_id
        source = f"gguf:{spec.gguf[0]}/{spec.gguf[1]}"
    elif (adapter := _adapter_folder_spec(name_or_path)) is not None:
        # lazy: adapters.py imports this module (adapters and loading call each other)
        from workbench.models.adapters import load_with_adapter

        folder, hf_id, source = load_with_adapter(adapter)
    else:
        folder, hf_id, source = _resolve_path(name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    hf_model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype, attn_implementation="eager")
    hf_model.to(device).eval()
    if device == "cpu":  # after the weights: they stay mmapped (handed back when the model is dropped)
        from workbench.models.allocator import keep_freed_memory

        keep_freed_memory()  # a CPU forward's large temporaries stay in the heap (no page faults per layer)
    if unwrapped:
        return hf_model
    return wrap(hf_model, tokenizer, name=name_or_path, hf_id=hf_id, source=source, device=device)


def load_transformers_model(name_or_path: str, device: str | None = None, dtype: str | torch.dtype = "float32"):
    """The same weights as :func:`load_model`, as a plain `transformers` model (eager attention) that no bridge
    wraps: the reference ``workbench.attention.conformance.check_model`` compares against (wrapping a model in the
    bridge swaps its modules in place, so a copy made after :func:`load_model` is no reference)."""
    return load_model(name_or_path, device=device, dtype=dtype, unwrapped=True)


def wrap(hf_model: Any, tokenizer: Any, name: str, hf_id: str, source: str = "", device: str = "cpu") -> LoadedModel:
    """Wrap an in-memory transformers model (e.g. a tiny random one in tests) as a :class:`LoadedModel`."""
    import logging

    from transformer_lens.model_bridge import TransformerBridge

    logging.getLogger("transformer_lens").setLevel(logging.ERROR)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The bridge only records dtype for a given hf_model (it never casts it); left out it would say float32 for a
    # model cast to bfloat16 before wrap.
    try:
        bridge = TransformerBridge.boot_transformers(hf_id, hf_model=hf_model, tokenizer=tokenizer, device=device,
                                                     dtype=next(hf_model.parameters()).dtype)
    except ValueError as e:
        if "supported architecture" not in str(e):
            raise
        arch = ", ".join(getattr(hf_model.config, "architectures", None) or [type(hf_model).__name__])
        raise UnsupportedArchitectureError(
            f"{name}: {arch} is not an architecture the TransformerLens bridge supports (transformer-lens "
            f"{_version('transformer-lens')}), so its attention cannot be hooked. Checked with every instrument "
            f"here: {', '.join(TESTED_ARCHITECTURES)} (tests/models/test_architecture_matrix.py); the bridge also "
            f"knows {_known_architectures()}") from None
    bridge.eval()
    cfg = hf_model.config
    n_ctx = int(getattr(cfg, "max_position_embeddings", 2048))
    return LoadedModel(name=name, bridge=bridge, hf_model=hf_model, tokenizer=tokenizer, n_ctx=n_ctx, source=source)
