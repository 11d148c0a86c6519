"""Load white-box models (packaged SmolLM2 GGUF, local HF folders, HF cache) as TransformerLens bridges."""

from workbench.models.device import DeviceError, resolve_device, set_default_device
from workbench.models.loading import LoadedModel, ModelNotFoundError, load_model, load_transformers_model, wrap
from workbench.models.registry import (
    DEFAULT_AGENT,
    ModelSpec,
    get_model_spec,
    list_models,
    packaged_gguf_path,
    register_model,
)

__all__ = [
    "DEFAULT_AGENT",
    "DeviceError",
    "LoadedModel",
    "ModelNotFoundError",
    "ModelSpec",
    "get_model_spec",
    "list_models",
    "load_model",
    "load_transformers_model",
    "packaged_gguf_path",
    "register_model",
    "resolve_device",
    "set_default_device",
    "wrap",
]
