"""The compiled step: the plain model's decoder stack through ``torch.compile`` (``--forward compiled``, opt-in).

:func:`~workbench.models.plain.plain_model` runs transformers' eager modules one kernel at a time: in a typical bf16
step of SmolLM2 on one CPU core, the linear layers run near the core's matrix-product peak and most of the rest is
small elementwise kernels (norms, rotary, SiLU, the mask, the fp32 softmax and its conversions) with their own passes
over memory. :func:`compiled_model` builds a second plain model on the same weights (no copy) whose attention is
:func:`fused_attention` (eager's grouped products, mask and fp32 softmax as whole-tensor operations, which inductor
fuses) and compiles its decoder stack (``model.model``, the family's base model; the unembedding stays the scorer's :class:`FlatLinear`) with
dynamic shapes, once per model and process.

What it keeps and what it does not (``benchmarks/step_limit.py --paths bridge,plain,compiled``; 136 teacher-forced
states of the default agent on one core of an AMX machine, ``benchmarks/notes/step_limit_compiled.log``): inductor
fuses operations without eager's intermediate roundings and reassociates the fp32 reductions, so the scores are not
eager's bit for bit. fp32: 405 ms a step against the plain path's 463 (limit_ratio 1.63 against 1.75), the same
action at every state, scores up to 2.5e-5 apart (issue 49 keeps a path within 1e-5); bf16: 184 against 238 ms
(2.99 against 3.62), the same action at 97.8 % of the states (issue 49 asks for 99 %), scores up to 0.43 apart
(bf16's own noise: eager rounds every intermediate to 8 bits). Rounding as eager does inside the fused kernels
(inductor's ``emulate_precision_casts``) kept 97.8 % and was slower (``step_limit_compiled_emulated.log``). So it
misses both of the issue's bars, and on a short sweep (34 episodes, 2 workers) each worker's compile outweighs the
faster steps (364 episodes an hour against the plain path's 856, ``benchmarks/notes/step_limit_sweep_compiled.log``;
16 of the 34 episodes took the bridge's actions throughout). It is never the default: a run played with it is a run of its own (its
``config.json`` says ``versions.forward = compiled``, and ``--resume`` refuses the other arithmetic), not a replay of
an eager one. It is for batch play (``run``, ``sweep``, ``dagger``): a study that compares scores would compare it
with eager steps (a captured or masked step runs eager), so a ``Session`` and the re-score primitive refuse it.

The first steps of a process compile (three graphs: no cache yet, a fresh cache, a cropped one; 33 s to 3 min on one
core of these machines, the less when inductor's on-disk cache holds them); later steps reuse them whatever the
prompt's length. transformers' forward reads a registry that grows when a model of a class not seen before is built
in the process (a retriever's encoder, another model in the notebook): the graphs then compile once more. A step
watched by taps (the attention capture) or hooks runs on the uncompiled plain model or the bridge, as with
``--forward auto``.
"""

from __future__ import annotations

from typing import Any

import torch

from workbench.models.plain import PlainModelError, family_eager, plain_model, register_attention, weighted_values

__all__ = ["compiled_model", "fused_attention", "FUSED", "CompileError", "RECOMPILE_LIMIT"]

#: The attention implementation name :func:`fused_attention` is registered under in transformers.
FUSED = "workbench_fused"


#: Graphs one compiled code object may hold during a compiled step (ours; torch's default is 8): each model compiles
#: three, and transformers' forward wrapper is one code object for every model of a process.
RECOMPILE_LIMIT = 64


class CompileError(RuntimeError):
    """``torch.compile`` could not build the step here (no C++ compiler for inductor's CPU kernels, no Triton on
    a GPU, an operation it cannot trace)."""


def fused_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
                    **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Eager attention's operations (transformers' order: grouped query heads against their key/value head, the
    scaling, the additive mask, the softmax in fp32 and back to the queries' dtype) written as whole-tensor
    operations for the compiler to fuse. Soft-capping and sinks go to the family's own eager function."""
    if (special := family_eager(module, query, key, value, attention_mask, scaling, dropout, **kwargs)) is not None:
        return special
    b, n_heads, n, d = query.shape
    kv_heads, n_keys = key.shape[1], key.shape[2]
    groups = n_heads // kv_heads
    q = query.reshape(b, kv_heads, groups * n, d)
    weights = torch.matmul(q, key.transpose(2, 3)).view(b, n_heads, n, n_keys) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask[:, :, :, :n_keys]
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return weighted_values(module, weights, value, dropout), None


register_attention(FUSED, fused_attention)


class _Compiled:
    """The plain model with its decoder stack compiled; a compiler failure at the first call is a
    :class:`CompileError` naming the way back (``--forward auto``)."""

    def __init__(self, plain: Any) -> None:
        self.plain = plain
        name = plain.base_model_prefix  # the decoder stack: "model" (Llama, Qwen, Gemma, ...), "gpt_neox"
        self.stack = getattr(plain, name)
        setattr(plain, name, torch.compile(self.stack, dynamic=True))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            # one code object (transformers' forward wrapper) holds every compiled model's graphs in this process:
            # room for a few models' three each, and past that an error, never a silent fall back to eager
            with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT, fail_on_recompile_limit_hit=True):
                return self.plain(*args, **kwargs)
        except (KeyboardInterrupt, PlainModelError):
            raise
        except Exception as e:
            from torch._dynamo.exc import FailOnRecompileLimitHit, TorchRuntimeError

            if isinstance(e, FailOnRecompileLimitHit):
                raise CompileError(f"this process has compiled the step for too many models (more than "
                                   f"{RECOMPILE_LIMIT} graphs of one forward): run this one with --forward auto "
                                   "(WORKBENCH_FORWARD=auto), or compile in a fresh process") from e
            if isinstance(e, TorchRuntimeError) and e.__cause__ is not None:
                raise e.__cause__ from e  # the step's own error, met while tracing: not the compiler's
            if type(e).__module__.startswith(("torch._dynamo", "torch._inductor")):
                raise CompileError(f"torch.compile could not build the step ({type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''}); run with --forward auto "
                                   "(WORKBENCH_FORWARD=auto), or install a C++ compiler (CPU) / Triton (GPU)") from e
            raise


def compiled_model(lm: Any) -> _Compiled:
    """A plain model of ``lm`` (:func:`~workbench.models.plain.plain_model`'s, on the bridge's own tensors) with
    :func:`fused_attention` and its decoder stack compiled (dynamic shapes): called as the plain model is. Built
    once per model (kept in ``lm.meta``); compiled at its first calls.

    Raises:
        PlainModelError: the architecture has no plain model (no compiled one either).
    """
    key = "compiled_model"
    if key not in lm.meta:
        lm.meta[key] = _Compiled(plain_model(lm, attn=FUSED))
    return lm.meta[key]
