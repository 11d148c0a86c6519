"""Selective last-query capture: the attention row of q_t for chosen heads, computed from q and K only.

``blocks.{layer}.attn.hook_pattern`` hands out ``[batch, head, query_pos, key_pos]`` for every layer; keeping
it for an episode is what ran AGMR out of memory. The instruments only need one query row (q_t, the last
prompt token) per selected head, so this capture recomputes exactly that row:

* ``hook_rot_q`` (post-RoPE queries) -> keep q_t's vector for the selected query heads;
* ``hook_rot_k`` (post-RoPE keys of *this* forward) -> together with the keys already in the scorer's
  ``DynamicCache`` (read before this forward appends to it, so nothing is copied), score q_t against key
  positions ``0..prompt_len-1`` only: the packed candidates after q_t are never visible to it;
* ``softmax(q . k * scaling)`` in fp32, with query head ``h`` reading key/value head
  ``h // (n_heads // n_key_value_heads)`` (grouped-query attention); as the layer's eager attention does, the
  scores are soft-capped where the model caps them (Gemma 2: ``tanh(s / cap) * cap``) and keys outside a
  sliding-window layer's window are masked (Gemma 2/3, Mistral);
* fused-QKV bridges (Phi-3, GPT-NeoX) rebuild attention themselves and fire no rotary hooks: there q_t's row is
  read from the scores they hand out (``hook_attn_scores``, scaled and masked) and softmaxed over the prompt.

Whatever the model's dtype, q and K are upcast before the product and the rows are float32, so C and head scores
are summed in fp32. In bfloat16 a row is the fp32 softmax of the model's own bf16 q and K; on SmolLM2 it was
measured within 1e-2 of ``hook_pattern``'s bf16 row (which rounds scores and weights to bf16) and within 3e-2 of
the fp32 model's row (tests/attention/test_attention_bf16.py holds it to twice that).

On the plain path (the scorer's default forward, :mod:`workbench.models.plain`) there are no hook points: each hook
of :meth:`AttentionCapture.hooks` carries a read-only tap that the plain model's attention hands the layer's post-RoPE
query and keys (the cached keys first), and the tap computes the same rows from them.

The extra memory is ``n_selected x prompt_len`` floats per step. The rows equal ``hook_pattern``'s row of q_t
restricted to the prompt (tests/attention/test_attention_capture_real.py measures the difference on SmolLM2).

Use it inside the scorer's one forward per step::

    capture = AttentionCapture(lm, [(13, 6), (14, 1)], scorer=scorer)
    scorer.score(prefix, suffix, actions, hooks=capture.hooks(), on_layout=capture.on_layout)
    capture.rows       # Float[Tensor, "n_selected key_pos"] of this step
    capture.steps      # one CapturedStep per step since reset()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from workbench.attention.head_set import Head, HeadSet, kv_head_of
from workbench.models.loading import LoadedModel
from workbench.models.scoring import ForwardLayout

__all__ = ["AttentionCapture", "CapturedStep"]


@dataclass(frozen=True)
class CapturedStep:
    """q_t's attention rows of one decision step.

    Attributes:
        rows: attention of q_t over the prompt, one row per selected head (HeadSet order); each row sums to 1.
            Always float32, whatever the model's dtype.
        prompt_len: n_t, the number of prompt tokens (keys visible to q_t, q_t included).
        n_cached: how many of those keys came from the KV cache.
    """

    rows: Float[Tensor, "n_selected key_pos"]
    prompt_len: int
    n_cached: int


def _past_keys(cache: Any, layer: int) -> Tensor:
    """Post-RoPE cached keys ``[batch, kv_head, key_pos, d_head]`` of one layer (transformers 5 and 4 caches)."""
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys
    return cache.key_cache[layer]


def _fused_qkv(attn: Any) -> bool:
    """A bridge attention that rebuilds attention from a fused QKV projection (its scores are handed out)."""
    try:
        from transformer_lens.model_bridge.generalized_components.joint_qkv_attention import JointQKVAttentionBridge
    except ImportError:  # pragma: no cover - another TransformerLens layout
        return "JointQKV" in type(attn).__name__
    return isinstance(attn, JointQKVAttentionBridge)


def _layer_windows(lm: LoadedModel) -> dict[int, int]:
    """layer -> its sliding window, for the layers that have one (the scorer's masks use the same rule)."""
    from workbench.models.scoring import sliding_windows

    config = lm.hf_model.config
    windows = sliding_windows(config)
    if windows is None:
        return {}
    if isinstance(windows, int):
        return dict.fromkeys(range(lm.n_layers), windows)
    kinds = list(config.get_text_config().layer_types)
    return {layer: windows[kind] for layer, kind in enumerate(kinds) if windows.get(kind) is not None}


def _to_tl_layout(x: Tensor, n_heads: int, min_pos: int, what: str) -> Tensor:
    """``[batch, pos, head, d_head]`` whichever layout the hook point hands out (the bridge converts to TL's).

    Raises if the tensor holds fewer than ``min_pos`` positions: the forward is not the one on_layout described.
    """
    if x.ndim == 4 and x.shape[2] == n_heads:
        out = x
    elif x.ndim == 4 and x.shape[1] == n_heads:
        out = x.transpose(1, 2)
    elif x.ndim == 3 and x.shape[2] % n_heads == 0:
        out = x.view(x.shape[0], x.shape[1], n_heads, -1)
    else:
        raise RuntimeError(f"{what}: cannot find {n_heads} heads in a tensor of shape {tuple(x.shape)}")
    if out.shape[1] < min_pos:
        raise RuntimeError(
            f"{what}: {out.shape[1]} query positions, but the layout puts q_t at index {min_pos - 1}; pass "
            "on_layout=capture.on_layout to the very score() call that receives capture.hooks()"
        )
    return out


class AttentionCapture:
    """Captures q_t's attention row for a set of heads during the scorer's forward.

    Args:
        lm: the loaded model (its config gives n_heads, n_key_value_heads and each layer's ``scaling``).
        heads: the query heads to read, ``"all"``, or a :class:`HeadSet`.
        scorer: the ``ActionScorer`` whose KV cache holds the keys of earlier steps; needed whenever a step
            reuses the cache (``layout.n_cached > 0``).
        keep_steps: append every step's rows to :attr:`steps` (off for head scoring over many prompts).
    """

    def __init__(
        self,
        lm: LoadedModel,
        heads: HeadSet | Iterable[Head] | str = "all",
        scorer: Any = None,
        keep_steps: bool = True,
    ):
        self.lm = lm
        self.n_layers, self.n_heads, self.n_kv = lm.n_layers, lm.n_heads, lm.n_key_value_heads
        if isinstance(heads, str):
            if heads != "all":
                raise ValueError(f"heads='{heads}': pass 'all', a HeadSet or (layer, head_index) pairs")
            heads = HeadSet.all(self.n_layers, self.n_heads)
        self.heads = HeadSet.of(heads)
        if not len(self.heads):
            raise ValueError("AttentionCapture needs at least one head")
        self.heads.validate(self.n_layers, self.n_heads)
        self.scorer = scorer
        self.keep_steps = keep_steps
        self.last_path = ""  # the path capture_prompt took last: "plain" or "bridge"
        self._prompt_scorer: Any = None  # capture_prompt's way to the plain path when no scorer is given
        self._windows = _layer_windows(lm)
        self._softcap = {layer: self._layer_softcap(layer) for layer in self.heads.layers}
        # fused-QKV bridges (Phi-3, GPT-NeoX) rebuild attention themselves and fire no rotary hooks: there the row
        # is read from the scores they hand out (hook_attn_scores, already scaled and masked)
        self._from_scores = {layer: _fused_qkv(lm.bridge.blocks[layer].attn) for layer in self.heads.layers}
        self._scaling = {layer: self._layer_scaling(layer) for layer in self.heads.layers}
        self._by_layer = {layer: self.heads.in_layer(layer) for layer in self.heads.layers}
        self.reset()

    def _layer_scaling(self, layer: int) -> float:
        hf_attn = getattr(self.lm.bridge.blocks[layer].attn, "original_component", None)
        if getattr(hf_attn, "sinks", None) is not None:
            raise NotImplementedError(
                f"layer {layer} uses attention sinks (a learnt extra logit per head); the capture reproduces causal "
                "softmax attention with soft-capping and sliding windows, not sinks (read hook_pattern for this "
                "architecture)"
            )
        if self._from_scores[layer]:
            return 1.0  # hook_attn_scores are scaled already
        return float(getattr(hf_attn, "scaling", self.lm.d_head**-0.5))

    def _layer_softcap(self, layer: int) -> float | None:
        hf_attn = getattr(self.lm.bridge.blocks[layer].attn, "original_component", None)
        cap = getattr(hf_attn, "attn_logit_softcapping", None)
        if cap is None:
            cap = getattr(self.lm.hf_model.config, "attn_logit_softcapping", None)
        return float(cap) if cap else None

    def reset(self) -> None:
        """Forget all captured steps (a new episode)."""
        self.steps: list[CapturedStep] = []
        self.rows: Float[Tensor, "n_selected key_pos"] | None = None
        self._layout: ForwardLayout | None = None
        self._past: Any = None
        self._recorded: CapturedStep | None = None  # the step the current forward recorded (a raise takes it back)

    def hooks(self) -> list[tuple[str, Callable]]:
        """TransformerLens ``(hook_name, fn)`` pairs for ``scorer.score(hooks=...)``.

        Each hook also carries a read-only tap (``fn.plain_tap = (layer, tap)``, one tap per layer shared by its
        hooks): a scorer whose hooks are all taps runs the step on the plain model, which hands the tap the layer's
        post-RoPE query and keys (:func:`workbench.models.plain.attention_taps`); the rows are the same
        computation either way."""
        out: list[tuple[str, Callable]] = []
        for layer in self.heads.layers:
            tap = (layer, self._tap(layer))
            if self._from_scores[layer]:
                pairs = [(f"blocks.{layer}.attn.hook_attn_scores", self._scores_hook(layer))]
            else:
                pairs = [(f"blocks.{layer}.attn.hook_rot_q", self._query_hook(layer)),
                         (f"blocks.{layer}.attn.hook_rot_k", self._key_hook(layer))]
            for name, fn in pairs:
                fn.plain_tap = tap  # type: ignore[attr-defined]
                fn.on_abort = self._abort  # type: ignore[attr-defined]
                out.append((name, fn))
        return out

    def _abort(self) -> None:
        """The scorer's forward raised (its cache is dropped): forget this step, rows recorded from it included."""
        if self._recorded and self.steps and self.steps[-1] is self._recorded:
            self.steps.pop()
        self.rows, self._recorded = None, None
        self._layout, self._past = None, None

    def _tap(self, layer: int) -> Callable[[Tensor, Tensor, float], None]:
        """The plain path's read of one layer: q_t's query heads against the prompt's keys (cached ones first),
        the same product, scaling, soft-cap, window and fp32 softmax as the bridge hooks' rows."""

        def tap(query: Tensor, key: Tensor, scaling: float) -> None:
            lay = self._layout
            if lay is None:
                raise RuntimeError("AttentionCapture tap ran without on_layout: pass on_layout=capture.on_layout")
            # query [batch, head, query_pos, d_head]; key [batch, kv_head, key_pos, d_head], the cached keys first
            if (query.shape[1] != self.n_heads or key.shape[1] != self.n_kv or query.shape[2] <= lay.query_index
                    or key.shape[2] - query.shape[2] != lay.n_cached or key.shape[2] < lay.prompt_len):
                raise RuntimeError(
                    f"layer {layer}: the attention holds queries {tuple(query.shape)} and keys {tuple(key.shape)}, "
                    f"not the layout's ({lay.n_cached} cached keys, q_t at {lay.query_index}, {lay.prompt_len} "
                    "prompt tokens); pass on_layout=capture.on_layout to the very score() call that receives "
                    "capture.hooks()"
                )
            rows, head_indices = self._by_layer[layer]
            q = query[0, head_indices, lay.query_index, :].float()  # [n_layer_heads, d_head]
            scores = torch.empty(len(rows), lay.prompt_len, dtype=torch.float32, device=q.device)
            kv_of = [kv_head_of(h, self.n_heads, self.n_kv) for h in head_indices]
            for kv in sorted(set(kv_of)):
                sel = [i for i, k in enumerate(kv_of) if k == kv]
                scores[sel] = q[sel] @ key[0, kv, : lay.prompt_len].float().T
            self._pending_rows[rows] = self._row(layer, scores, scaling=float(scaling))
            self._pending_layers.discard(layer)
            if not self._pending_layers:
                self._finish()

        return tap

    def _row(self, layer: int, scores: Tensor, scaling: float | None = None) -> Tensor:
        """q_t's attention over the prompt from its raw q.K scores [head, key_pos] (fp32): scaled (the layer's
        ``scaling``, or the one its attention was called with), soft-capped, windowed, softmaxed -- what the
        layer's eager attention does."""
        lay = self._layout
        scores = scores * (self._scaling[layer] if scaling is None else scaling)
        cap = self._softcap[layer]
        if cap is not None:
            scores = torch.tanh(scores / cap) * cap
        window = self._windows.get(layer)
        if window is not None:  # q_t sits at position prompt_len - 1; keys 0..prompt_len-1
            q_pos = lay.prompt_len - 1
            scores[:, : max(0, q_pos - window + 1)] = float("-inf")
        return torch.softmax(scores, dim=-1)

    def _scores_hook(self, layer: int) -> Callable:
        def hook(attn_scores: Tensor, hook: Any) -> None:
            lay = self._layout
            if lay is None:
                raise RuntimeError("AttentionCapture hooks ran without on_layout: pass on_layout=capture.on_layout")
            rows, head_indices = self._by_layer[layer]
            # [batch, head, query_pos, key_pos], the cached keys first: q_t's row over the prompt's keys
            row = attn_scores[0, head_indices, lay.query_index, : lay.prompt_len].float()
            self._pending_rows[rows] = torch.softmax(row, dim=-1)
            self._pending_layers.discard(layer)
            if not self._pending_layers:
                self._finish()

        return hook

    def on_layout(self, layout: ForwardLayout) -> None:
        """Called by the scorer before its forward: where q_t sits and which keys it may see."""
        if layout.n_cached > 0 and self.scorer is None:
            raise ValueError(
                "this step reuses the KV cache: build AttentionCapture(..., scorer=scorer) so the capture can "
                "read the cached keys"
            )
        self._layout = layout
        self.rows, self._recorded = None, None  # until this step's rows are complete
        needs_past = layout.n_cached > 0 and not all(self._from_scores.values())
        self._past = self._scorer_cache() if needs_past else None
        # q_t's row for every selected head, filled layer by layer during the forward.
        device = next(self.lm.hf_model.parameters()).device
        self._pending_rows: Float[Tensor, "n_selected key_pos"] = torch.zeros(
            len(self.heads), layout.prompt_len, dtype=torch.float32, device=device
        )
        self._pending_layers = set(self.heads.layers)
        self._q: dict[int, Float[Tensor, "n_layer_heads d_head"]] = {}

    def _scorer_cache(self) -> Any:
        cache = getattr(self.scorer, "cache", None)
        if cache is None:
            cache = getattr(self.scorer, "_cache", None)  # ActionScorer has no public accessor yet
        if cache is None:
            raise RuntimeError("the layout says keys come from the KV cache, but the scorer holds no cache")
        return cache

    def _query_hook(self, layer: int) -> Callable:
        def hook(rot_q: Tensor, hook: Any) -> None:
            if self._layout is None:
                raise RuntimeError("AttentionCapture hooks ran without on_layout: pass on_layout=capture.on_layout")
            # [batch, query_pos, head, d_head]
            q = _to_tl_layout(rot_q, self.n_heads, self._layout.query_index + 1, hook.name)
            _, head_indices = self._by_layer[layer]
            self._q[layer] = q[0, self._layout.query_index, head_indices, :].float()

        return hook

    def _key_hook(self, layer: int) -> Callable:
        def hook(rot_k: Tensor, hook: Any) -> None:
            lay = self._layout
            if lay is None or layer not in self._q:
                raise RuntimeError("AttentionCapture: hook_rot_k fired before hook_rot_q / on_layout")
            # [batch, query_pos, kv_head, d_head]: this forward's keys only; earlier ones are in the cache.
            k_new = _to_tl_layout(rot_k, self.n_kv, lay.query_index + 1, hook.name)
            rows, head_indices = self._by_layer[layer]
            q = self._q.pop(layer)  # [n_layer_heads, d_head]
            # fp32 like q: a bf16 model's keys are upcast below, never the rows downcast.
            scores = torch.empty(len(rows), lay.prompt_len, dtype=torch.float32, device=q.device)  # [head, key_pos]
            if lay.n_cached:
                past = _past_keys(self._past, layer)  # [batch, kv_head, key_pos, d_head]
                if past.shape[-2] != lay.n_cached:
                    raise RuntimeError(
                        f"layer {layer}: the KV cache holds {past.shape[-2]} keys but the layout says "
                        f"{lay.n_cached}; is scorer= the scorer running this forward?"
                    )
            kv_of = [kv_head_of(h, self.n_heads, self.n_kv) for h in head_indices]
            # One matmul per key/value head against a view of the cache: no copy of the keys.
            for kv in sorted(set(kv_of)):
                sel = [i for i, k in enumerate(kv_of) if k == kv]
                if lay.n_cached:
                    scores[sel, : lay.n_cached] = q[sel] @ past[0, kv].float().T
                # Only this forward's keys up to q_t itself: candidates packed after it are masked for q_t.
                scores[sel, lay.n_cached :] = q[sel] @ k_new[0, : lay.query_index + 1, kv, :].float().T
            self._pending_rows[rows] = self._row(layer, scores)
            self._pending_layers.discard(layer)
            if not self._pending_layers:
                self._finish()

        return hook

    def _finish(self) -> None:
        lay = self._layout
        assert lay is not None
        # Rows accumulate over an episode: keep them in host memory, off the accelerator.
        self.rows = self._pending_rows.cpu()
        if self.keep_steps:
            self._recorded = CapturedStep(rows=self.rows, prompt_len=lay.prompt_len, n_cached=lay.n_cached)
            self.steps.append(self._recorded)
        self._layout, self._past = None, None

    def _plain_path(self) -> Any:
        """The plain model :meth:`capture_prompt` runs on (the scorer's, or one a scorer of this model would run
        on), or None where it keeps the bridge."""
        from workbench.models.scoring import ActionScorer

        if isinstance(self.scorer, ActionScorer):
            return self.scorer.plain_path()
        if self._prompt_scorer is None:
            self._prompt_scorer = ActionScorer(self.lm)
        return self._prompt_scorer.plain_path()

    @torch.no_grad()
    def capture_prompt(self, token_ids: Sequence[int]) -> Float[Tensor, "n_selected key_pos"]:
        """Rows of the last token of a whole prompt, in one uncached forward that stops after the last
        selected layer (no logits are computed): on the plain model where a scorer of this model would take it
        (the taps of :meth:`hooks`), else through the bridge (``last_path`` says which).

        Args:
            token_ids: the full prompt; its last token plays q_t.

        Returns:
            ``[n_selected, len(token_ids)]`` attention rows (also left in :attr:`rows`).
        """
        n = len(token_ids)
        if n == 0:
            raise ValueError("capture_prompt needs at least one token")
        device = next(self.lm.hf_model.parameters()).device
        inp = torch.tensor([list(token_ids)], device=device)
        last = max(self.heads.layers)
        self._recorded = None  # a raise below takes back only what this call records
        try:
            plain = self._plain_path()
            self.on_layout(ForwardLayout(n_cached=0, n_new_prefix=n - 1, n_suffix=1, query_index=n - 1,
                                         prompt_len=n, candidate_slices=()))
            if plain is not None:
                # the plain model's decoder stack, its taps reading each selected layer; it stops once the last
                # one has (no later layer, no logits), as the bridge's stop_at_layer does
                from workbench.models.plain import StopForward, attention_taps
                from workbench.models.scoring import check_taps_fired, plain_taps

                taps = plain_taps(self.hooks())
                assert taps is not None
                with attention_taps(taps, stop_after=last) as fired:
                    try:
                        plain.get_decoder()(input_ids=inp, use_cache=False)
                    except StopForward:
                        pass
                check_taps_fired(taps, fired)
                self.last_path = "plain"
            else:
                with self.lm.bridge.hooks(fwd_hooks=self.hooks()):
                    self.lm.bridge(inp, stop_at_layer=last + 1)
                self.last_path = "bridge"
        except BaseException:
            self._abort()
            raise
        if self._layout is not None:
            self._abort()
            raise RuntimeError("the forward ended before every selected layer was captured")
        assert self.rows is not None
        return self.rows
