"""The model without the bridge, on the bridge's own weights: the fast path of a forward that nothing hooks.

``TransformerBridge`` replaces every module of the transformers model it wraps with a bridge component (its hook
points, and attention re-implemented in Python so ``hook_attn_scores`` / ``hook_pattern`` fire). A forward that no
hook reads pays for that Python without using it. :func:`plain_model` builds the same transformers architecture on the
meta device and points every parameter and buffer at the tensor the bridge already holds (no copy: one set of
weights, whatever the model's size), so the forward runs transformers' own modules over the same weights, bit for bit
the eager computation the bridge reproduces (tests/models/test_plain_model.py).

:func:`bridge_hooked` says whether any hook point of the bridge has a hook (an instrument that registers its hooks
for good, not per forward): where one has, the forward must go through the bridge.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch

__all__ = ["plain_model", "bridge_hooked", "PlainModelError", "grouped_attention", "GROUPED", "attention_taps",
           "AttentionTap", "StopForward", "visible_prefix", "family_eager", "register_attention", "weighted_values"]

#: A read-only look at one layer's attention inputs on the plain path: ``tap(query, key, scaling)`` with the
#: post-RoPE ``query`` ``[batch, head, query_pos, d_head]`` of this forward and ``key`` ``[batch, kv_head,
#: key_pos, d_head]`` (the cached keys first, then this forward's), before any product. It must not write to them.
AttentionTap = Callable[[torch.Tensor, torch.Tensor, float], None]


class StopForward(Exception):
    """Raised inside the forward after the last tapped layer of :func:`attention_taps` ``(stop_after=...)``: the
    caller wanted the taps' reads, not the rest of the model."""


class _Taps:
    def __init__(self, taps: Mapping[int, Sequence[AttentionTap]], stop_after: int | None) -> None:
        self.taps = {int(layer): list(fns) for layer, fns in taps.items() if fns}
        self.stop_after = stop_after
        self.fired: set[int] = set()


_ACTIVE: ContextVar[_Taps | None] = ContextVar("workbench_attention_taps", default=None)


@contextmanager
def attention_taps(taps: Mapping[int, Sequence[AttentionTap]], stop_after: int | None = None) -> Iterator[set[int]]:
    """Hand each layer's attention inputs to ``taps[layer]`` during the plain model's forwards in this block (the
    bridge's ``hook_rot_q`` / ``hook_rot_k`` without the bridge). Yields the set of layers whose taps fired, filled
    as the forward runs, so the caller can check that none was missed. ``stop_after``: raise :class:`StopForward`
    once that layer's taps have run (a capture that needs no later layer and no logits). Blocks do not nest: an inner
    block's taps replace the outer one's while it lasts (a scorer step enters one only when some hook is a tap).
    A tap must only read: one that writes to the query or keys it is handed raises."""
    state = _Taps(taps, stop_after)
    token = _ACTIVE.set(state)
    try:
        yield state.fired
    finally:
        _ACTIVE.reset(token)


def _versions(*tensors: torch.Tensor) -> tuple[int, ...] | None:
    """The tensors' version counters (bumped by every in-place write), or None under ``torch.inference_mode``,
    whose tensors keep none."""
    try:
        return tuple(t._version for t in tensors)
    except RuntimeError:
        return None


def _run_taps(module: Any, query: torch.Tensor, key: torch.Tensor, scaling: float) -> None:
    state = _ACTIVE.get()
    if state is None:
        return
    layer = getattr(module, "layer_idx", None)
    fns = state.taps.get(layer)
    if fns:
        versions = _versions(query, key)
        for fn in fns:
            fn(query, key, scaling)
        if versions is not None and _versions(query, key) != versions:
            raise RuntimeError(f"a tap of layer {layer} wrote to the query or keys it was handed: taps only read "
                               "(copy what you need)")
        state.fired.add(layer)
    if state.stop_after is not None and layer == state.stop_after:
        raise StopForward(layer)

_BRIDGED = "._original_component"


class PlainModelError(RuntimeError):
    """The bridge's weights do not cover the plain model's (an architecture the fast path cannot mirror)."""


def _strip(name: str) -> str:
    return name.replace(_BRIDGED, "")


#: The attention implementation name :func:`grouped_attention` is registered under in transformers.
GROUPED = "workbench_grouped"
#: The fp32 softmax of :func:`grouped_attention` runs over blocks of query rows of at most this many bytes (ours).
SOFTMAX_BLOCK_BYTES = 2 << 20
#: On the CPU path of :func:`grouped_attention`, skip work whose result is known bit for bit (ours): a power-of-two
#: ``scaling`` multiplies fp32 / bf16 queries before the product instead of every score after it, and the mask is
#: added only after the key columns a caller declares visible to every query (:func:`visible_prefix`: the scorer's
#: cached prefix).
#: False runs eager's order of operations over every score (``benchmarks/step_limit.py``'s ``plain-all-ops`` arm).
EXACT_SHORTCUTS = True


def _power_of_two(x: float) -> bool:
    """Whether multiplying by ``x`` only shifts the exponent (exact in binary floating point, short of underflow)."""
    return x > 0 and math.frexp(x)[0] == 0.5


_VISIBLE: ContextVar[int] = ContextVar("workbench_visible_prefix", default=0)


@contextmanager
def visible_prefix(n_keys: int) -> Iterator[None]:
    """Tell :func:`grouped_attention` that in this block's forwards the mask is 0 over the first ``n_keys`` key
    columns for every query (a scorer step's cached prefix, which every query sees: the scorer builds that mask and
    says so; nothing is inferred from the mask), so the mask is added from column ``n_keys`` on only."""
    token = _VISIBLE.set(max(0, int(n_keys)))
    try:
        yield
    finally:
        _VISIBLE.reset(token)


def family_eager(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
                 **kwargs: Any) -> tuple[torch.Tensor, Any] | None:
    """The family's own eager attention where it has soft-capping or sinks (Gemma 2, GPT-OSS), else None."""
    if kwargs.get("softcap") is None and kwargs.get("s_aux") is None and getattr(module, "sinks", None) is None:
        return None
    import sys

    family = sys.modules[type(module).__module__].eager_attention_forward
    return family(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


def grouped_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
                      **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Eager attention (the same products, mask, fp32 softmax and order of operations as transformers' eager
    function) with grouped-query heads computed per key/value head: each kv head's query heads are stacked as rows
    of one product against that head's keys, so the cache is never copied ``n_rep`` times (``repeat_kv`` copies every
    cached key and value of every layer at every step: most of a bf16 step's memory traffic); on the CPU the scaling,
    mask and fp32 softmax run in place over blocks of query rows (:data:`SOFTMAX_BLOCK_BYTES`), the same arithmetic
    per row, skipping what is known bit for bit (:data:`EXACT_SHORTCUTS`: a power-of-two scaling applied to the
    queries, the mask added after the prefix a caller declares visible, :func:`visible_prefix`). Soft-capping and
    sinks (Gemma 2, GPT-OSS) go to the family's own eager function. Returns no attention weights (nothing reads them on this path). The taps of
    :func:`attention_taps` read the layer's query and keys first."""
    _run_taps(module, query, key, scaling)
    if (special := family_eager(module, query, key, value, attention_mask, scaling, dropout, **kwargs)) is not None:
        return special
    b, n_heads, n, d = query.shape
    kv_heads, n_keys = key.shape[1], key.shape[2]
    groups = n_heads // kv_heads
    q = query.reshape(b, kv_heads, groups * n, d)  # heads h = kv * groups + j, as repeat_kv orders them
    mask = attention_mask[:, :, :, :n_keys] if attention_mask is not None else None
    whole = query.device.type != "cpu" or (mask is not None and (mask.dtype != query.dtype or mask.shape[2] != n))
    # (q * 2^k) . K == (q . K) * 2^k bit for bit in fp32 and bf16 (an exponent shift, short of underflow: below
    # 2^-120 there); not in fp16, whose small exponent range makes scaled queries subnormal
    prescale = (not whole and EXACT_SHORTCUTS and query.dtype in (torch.float32, torch.bfloat16, torch.float64)
                and _power_of_two(scaling))
    if prescale:  # one pass over q, not over the scores
        q = q * scaling
    weights = torch.matmul(q, key.transpose(2, 3)).view(b, n_heads, n, n_keys)
    if whole:
        # a GPU: one kernel each over the whole tensor; a mask of another dtype: eager's sum promotes; a mask
        # broadcast over the queries: no rows to cut
        weights = weights * scaling
        weights = weights + mask if mask is not None else weights
        weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    else:
        # scale, mask and the fp32 softmax a block of query rows at a time, in place: each row's arithmetic is
        # eager's (elementwise, and a softmax per row), but the fp32 copy of a long prompt's scores (29 MiB for 900
        # tokens of SmolLM2) is never made whole: a block stays in the core's cache
        rows = max(1, SOFTMAX_BLOCK_BYTES // (4 * b * n_heads * n_keys))
        # x + 0 == x (up to the sign of a zero, which no softmax sees): the cached prefix every query sees
        z = min(_VISIBLE.get(), n_keys) if EXACT_SHORTCUTS else 0
        for i in range(0, n, rows):
            block = weights[:, :, i:i + rows]
            if not prescale:
                block.mul_(scaling)
            if mask is not None and z < n_keys:
                block[..., z:].add_(mask[:, :, i:i + rows, z:])
            block.copy_(torch.nn.functional.softmax(block, dim=-1, dtype=torch.float32))
    return weighted_values(module, weights, value, dropout), None


def weighted_values(module: Any, weights: torch.Tensor, value: torch.Tensor, dropout: float) -> torch.Tensor:
    """The attention's output ``[batch, query, head, d_head]``: ``weights`` ``[batch, head, query, key]`` (dropout
    applied in training) times each head's values, a kv head's query heads stacked as rows of one product."""
    b, n_heads, n, n_keys = weights.shape
    kv_heads = value.shape[1]
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(weights.view(b, kv_heads, (n_heads // kv_heads) * n, n_keys), value).view(b, n_heads, n, -1)
    return out.transpose(1, 2).contiguous()


def register_attention(name: str, fn: Callable[..., Any]) -> None:
    """``fn`` as transformers' attention implementation ``name``, with eager's masks (the masks transformers builds
    where none is given, a prefill or generation: additive, 4-D)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(name, fn)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, ALL_MASK_ATTENTION_FUNCTIONS["eager"])


register_attention(GROUPED, grouped_attention)


class FlatLinear(torch.nn.Module):
    """A linear layer applied to its input as one 2-D matrix (rows x features), the same weight and result.

    The unembedding gets the kept rows of a ``[1, tokens, hidden]`` tensor (a slice: ``logits_to_keep``); through a
    3-D input, bf16 ``linear`` on the CPU copies the whole ``[hidden, vocabulary]`` weight every call (~80 ms of a
    ~330 ms SmolLM2 step on this machine); flattened, it is one matrix product on the weight as stored (measured
    bit-identical)."""

    def __init__(self, inner: torch.nn.Linear) -> None:
        super().__init__()
        self.inner = inner

    @property
    def weight(self) -> torch.Tensor:
        return self.inner.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.inner.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = torch.nn.functional.linear(x.reshape(-1, x.shape[-1]), self.inner.weight, self.inner.bias)
        return flat.view(*x.shape[:-1], flat.shape[-1])


def plain_model(lm: Any, attn: str = GROUPED) -> Any:
    """The transformers model of ``lm`` (a :class:`~workbench.models.loading.LoadedModel`) without the bridge:
    the same class and config with attention implementation ``attn`` (default: :func:`grouped_attention`, eager's
    arithmetic without copying the cache per query head), every parameter and buffer the very tensor the bridge
    holds. Built once per model and implementation (kept in ``lm.meta``).

    Raises:
        PlainModelError: a parameter or buffer of the plain model has no tensor of the same name and shape in the
            bridged model (the fast path is then not available; the bridge still is).
    """
    key = f"plain_model:{attn}"
    if key in lm.meta:
        if isinstance(lm.meta[key], PlainModelError):
            raise lm.meta[key]
        return lm.meta[key]
    try:
        plain = _build(lm, attn)
    except PlainModelError as e:
        lm.meta[key] = e  # one rebuild and one warning per model, not per scorer
        raise
    lm.meta[key] = plain
    return plain


def _build(lm: Any, attn: str) -> Any:
    hf = lm.hf_model
    config = hf.config.__class__.from_dict(hf.config.to_dict())
    config._attn_implementation = attn
    tensors = {_strip(n): t for n, t in hf.named_parameters(remove_duplicate=False)}
    tensors |= {_strip(n): t for n, t in hf.named_buffers(remove_duplicate=False)}
    try:
        with torch.device("meta"):
            plain = type(hf)(config)
    except Exception as e:  # an architecture whose class cannot be rebuilt from its config alone
        raise PlainModelError(f"{lm.name}: {type(hf).__name__} could not be rebuilt from its config ({e})") from e
    missing = []
    for mod_name, module in plain.named_modules():
        for kind in ("_parameters", "_buffers"):
            for name, old in list(getattr(module, kind).items()):
                if old is None:
                    continue
                full = f"{mod_name}.{name}" if mod_name else name
                new = tensors.get(full)
                if new is None or new.shape != old.shape:
                    missing.append(full)
                    continue
                getattr(module, kind)[name] = new if kind == "_buffers" else torch.nn.Parameter(new, requires_grad=False)
    if getattr(config, "tie_word_embeddings", False) and "lm_head.weight" in missing:
        plain.lm_head.weight = plain.get_input_embeddings().weight
        missing.remove("lm_head.weight")
    if missing:
        raise PlainModelError(f"{lm.name}: the bridged model has no tensor for {', '.join(missing[:5])}"
                              f"{' ...' if len(missing) > 5 else ''}: no plain fast path for {type(hf).__name__}")
    head = plain.get_output_embeddings()
    if type(head) is torch.nn.Linear:
        plain.set_output_embeddings(FlatLinear(head))
    if getattr(hf, "generation_config", None) is not None:
        plain.generation_config = hf.generation_config
    plain.eval()
    return plain


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def bridge_hooked(bridge: Any, points: list | None = None) -> bool:
    """Whether any hook point of ``bridge`` (or of ``points``, its hook points listed once by the caller: 1725 of
    them in SmolLM2, 0.5 ms to list) holds a hook now: forward or backward, permanent ones included (a
    ``HookPoint`` is a torch module; its hooks are the module's)."""
    pts = points if points is not None else getattr(bridge, "hook_dict", {}).values()
    return any(getattr(hp, d, None) for hp in pts for d in _HOOK_DICTS)
