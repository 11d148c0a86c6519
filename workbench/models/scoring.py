"""Choose an action by length-normalised log-likelihood over the admissible commands.

One bridge forward per decision step, with the KV prefix reused from the previous step:

    cache (prefix of the previous step)  +  [ new prefix tokens | suffix | cand_0 | cand_1 | ... ]

* ``new prefix tokens`` extend the cached prefix (the history appended since the previous step) and stay.
* ``suffix`` (end-of-user-turn + assistant header) ends the prompt; its last token is q_t, the last prompt
  token whose attention row the instruments read.
* the candidates are packed after the suffix as a token trie ("go to" is encoded once for thirty
  "go to X" commands): each trie node sees the prefix, the suffix and its own ancestors only (custom 4-D
  mask) at its own depth's position id, so all candidates are scored in the same forward, exactly as if
  each were appended alone, without copying the cache per candidate and with about half the tokens.

After the forward the cache is cropped back to the prefix. Hooks registered on the bridge see one forward
whose query positions are the new tokens; :class:`ForwardLayout` tells them where q_t and each candidate sit.

**Which forward.** A step that an instrument hooks runs through the bridge (every hook point fires), unless every
hook it is handed is a read-only tap (:func:`plain_taps`: the attention capture's are), which the plain path hands
each tapped layer's post-RoPE query and keys instead. A step that nothing hooks, or only taps watch, runs, by default (``forward="auto"``), through the plain transformers model on the bridge's own weights
(:func:`workbench.models.plain.plain_model`): the same eager computation without the bridge's per-module Python, the
same scores bit for bit on the CPU (tests/models/test_plain_model.py), the KV cache shared between the two. Only the
architectures of the matrix (``TESTED_ARCHITECTURES``) take it; any other keeps the bridge. ``forward="bridge"``
(``--forward bridge``, ``WORKBENCH_FORWARD=bridge``) sends every step through the bridge. ``forward="compiled"``
(``--forward compiled``) runs an unhooked step on the plain model with its decoder stack compiled
(:func:`workbench.models.compiled.compiled_model`: 1.1-1.3x faster a step here, not eager's scores: the same action at
97.8 % of bf16 states, so never the default, and for batch play only: a re-score or a session refuses it); a step
that taps watch runs on the uncompiled plain model.

A forward that raises (a hook, a tap, an interrupt) drops the cached prefix: some layers would already hold this
step's keys. The next step recomputes the prefix; each hook's ``on_abort`` (the capture's) is called so the
instrument forgets the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from transformers import DynamicCache

from workbench.models.loading import TESTED_ARCHITECTURES, LoadedModel
from workbench.models.plain import (AttentionTap, PlainModelError, attention_taps, bridge_hooked, plain_model,
                                    visible_prefix)

__all__ = ["ForwardLayout", "ScoreResult", "WriteResult", "ActionScorer", "common_prefix_len", "sliding_windows",
           "FORWARDS", "default_forward", "set_default_forward", "log_softmax_rows", "plain_taps", "check_taps_fired"]

#: How an unhooked step runs: ``auto`` (the plain model on the bridge's weights), ``bridge`` (always the bridge) or
#: ``compiled`` (the plain model's decoder stack through ``torch.compile``: :mod:`workbench.models.compiled`, opt-in,
#: not eager's scores bit for bit).
FORWARDS = ("auto", "bridge", "compiled")
_FORWARD_ENV = "WORKBENCH_FORWARD"


def default_forward() -> str:
    """This process's forward path: ``$WORKBENCH_FORWARD`` (set by :func:`set_default_forward`, inherited by worker
    processes) or ``auto``."""
    import os

    value = os.environ.get(_FORWARD_ENV, "auto").strip().lower() or "auto"
    if value not in FORWARDS:
        raise ValueError(f"{_FORWARD_ENV}={value!r}: expected one of {', '.join(FORWARDS)}")
    return value


def set_default_forward(forward: str) -> str:
    """Make ``forward`` (:data:`FORWARDS`) the default of this process and of the processes it starts."""
    import os

    if forward not in FORWARDS:
        raise ValueError(f"forward '{forward}': expected one of {', '.join(FORWARDS)}")
    os.environ[_FORWARD_ENV] = forward
    return forward


def plain_taps(hooks: list[tuple[str, Callable]] | None) -> dict[int, list[AttentionTap]] | None:
    """The plain path's taps standing in for ``hooks``: ``{}`` for no hook, ``{layer: [tap, ...]}`` when every hook
    carries a read-only tap (``fn.plain_tap = (layer, tap)``, as :class:`~workbench.attention.AttentionCapture`'s do;
    hooks that share one tap, a layer's ``hook_rot_q`` and ``hook_rot_k``, give it once), and None when any hook
    needs the bridge (a head mask writes, ``hook_pattern`` reads what the plain path never makes)."""
    taps: dict[int, list[AttentionTap]] = {}
    for _, fn in hooks or ():
        tap = getattr(fn, "plain_tap", None)
        if tap is None:
            return None
        layer, f = tap
        if not any(g is f for g in taps.setdefault(int(layer), [])):
            taps[int(layer)].append(f)
    return taps


def _abort_hooks(hooks: list[tuple[str, Callable]] | None) -> None:
    """Call each distinct ``on_abort`` the hooks carry (an instrument forgets a step whose forward raised); one that
    raises is warned about, not raised: the step's own error is the one the caller gets."""
    import warnings

    # bound methods compare equal by instance and function: one call per instrument, not per hook
    for abort in dict.fromkeys(a for _, fn in hooks or () if (a := getattr(fn, "on_abort", None)) is not None):
        try:
            abort()
        except Exception as e:  # noqa: BLE001 - the original error matters more
            warnings.warn(f"an instrument's on_abort raised {type(e).__name__}: {e}", stacklevel=3)


def check_taps_fired(taps: dict[int, list[AttentionTap]], fired: set[int]) -> None:
    """Raise if a tapped layer's attention never ran on the plain path (an attention implementation that does not
    go through :func:`~workbench.models.plain.grouped_attention`): its reads would be silently missing."""
    missed = sorted(set(taps) - fired)
    if missed:
        raise RuntimeError(f"the plain path never ran the attention of layer(s) {missed}, so their taps read nothing; "
                           "run this step through the bridge (--forward bridge, or ActionScorer(forward='bridge'))")


@dataclass(frozen=True)
class ForwardLayout:
    """Where things sit in one scoring forward.

    Attributes:
        n_cached: keys already in the KV cache before this forward (key positions 0..n_cached-1).
        n_new_prefix: new prefix tokens at query positions 0..n_new_prefix-1 (key positions n_cached+...).
        n_suffix: suffix tokens right after them.
        query_index: index (within this forward's queries) of q_t, the last prompt token.
        prompt_len: n_t = number of prompt tokens (keys visible to q_t, q_t included).
        candidate_slices: the (start, end) query-index range of the packed candidate tokens (trie nodes).
        candidate_paths: per candidate, the query indices of its tokens (its path in the trie).
    """

    n_cached: int
    n_new_prefix: int
    n_suffix: int
    query_index: int
    prompt_len: int
    candidate_slices: tuple[tuple[int, int], ...]
    candidate_paths: tuple[tuple[int, ...], ...] = ()

    @property
    def n_queries(self) -> int:
        return self.query_index + 1 + sum(e - s for s, e in self.candidate_slices)


@dataclass(frozen=True)
class WriteResult:
    """What :meth:`ActionScorer.write` wrote: ``best`` (the candidate's index), ``scores`` (candidate index -> mean
    log-prob per token, for the candidates the beam finished), how many forwards it took and how many prompt tokens
    the first one served from the cache."""

    best: int
    scores: dict[int, float]
    forwards: int
    reused_tokens: int


@dataclass(frozen=True)
class ScoreResult:
    scores: tuple[float, ...]  # mean log-prob per candidate token (length-normalised)
    best: int
    layout: ForwardLayout
    reused_tokens: int  # prefix tokens served from the cache this step
    extras: dict = field(default_factory=dict)


def _trie(cands: list[list[int]]) -> tuple[list[int], list[int], list[int], list[tuple[int, ...]]]:
    """Token trie of the candidates: (node token, node parent (-1: root), node depth, path per candidate).

    Nodes are numbered in creation order, so a parent always precedes its children.
    """
    tok: list[int] = []
    parent: list[int] = []
    depth: list[int] = []
    children: dict[tuple[int, int], int] = {}
    paths = []
    for ids in cands:
        node, path = -1, []
        for d, t in enumerate(ids):
            key = (node, t)
            if key not in children:
                children[key] = len(tok)
                tok.append(t)
                parent.append(node)
                depth.append(d)
            node = children[key]
            path.append(node)
        paths.append(tuple(path))
    return tok, parent, depth, paths


def sliding_windows(config: Any) -> int | dict[str, int | None] | None:
    """Where a model's attention is a sliding window: None (every layer full), one window for every layer
    (Mistral, Phi-3 with ``sliding_window`` set; Gemma-style configs whose layers are all of one kind), or per layer
    type (Gemma 2/3, Qwen2 with sliding layers). A multimodal config is read through its text config.

    Raises:
        NotImplementedError: a layer type other than full and sliding attention (Llama 4's chunked attention).
    """
    if config is not None and callable(getattr(config, "get_text_config", None)):
        config = config.get_text_config()
    window = getattr(config, "sliding_window", None) if config is not None else None
    kinds = set(getattr(config, "layer_types", None) or ())
    other = kinds - {"full_attention", "sliding_attention"}
    if other:
        raise NotImplementedError(f"attention layer types {sorted(other)}: the scorer's masks know full and "
                                  "sliding-window attention only")
    if not window or getattr(config, "use_sliding_window", True) is False:
        return None
    if not kinds:
        return int(window)
    if "sliding_attention" not in kinds:
        return None
    if kinds == {"sliding_attention"}:
        return int(window)  # one mask: a model whose layers are all sliding takes no per-type dict
    return {kind: (int(window) if kind == "sliding_attention" else None) for kind in kinds}


def common_prefix_len(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share (the cached prefix a new prompt can reuse)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


#: :func:`log_softmax_rows` converts and normalises blocks of rows of at most this many fp32 bytes (ours).
LOG_SOFTMAX_BLOCK_BYTES = 2 << 20


def log_softmax_rows(logits: torch.Tensor) -> torch.Tensor:
    """The fp32 log-softmax of each row of ``logits`` [rows, vocabulary], whatever their dtype: on the CPU a block
    of rows at a time into one output, so no whole fp32 copy of the rows is made and dropped per step (with
    SmolLM2's 49,152 tokens, 100 rows are 20 MiB: a fresh block whose first touch cost more than the arithmetic; the
    output is still one tensor).
    Each row is the very ``log_softmax(row.float())`` (bit for bit)."""
    if logits.device.type != "cpu" or logits.dtype == torch.float32 or logits.dim() != 2:
        return torch.log_softmax(logits.float(), dim=-1)  # fp32 rows: no conversion to spare
    n, vocab = logits.shape
    out = torch.empty(n, vocab, dtype=torch.float32)
    rows = max(1, LOG_SOFTMAX_BLOCK_BYTES // (4 * vocab))
    for i in range(0, n, rows):
        out[i:i + rows] = torch.log_softmax(logits[i:i + rows].float(), dim=-1)
    return out


class ActionScorer:
    """Scores candidate continuations of a prompt, reusing the KV cache of the longest common prefix.

    Args:
        lm: the loaded model; its bridge runs the forward so every TransformerLens hook fires.
        reuse_cache: False re-encodes the whole prompt every step (the baseline for the cost benchmark).
        end_token: text appended to each candidate (end of the assistant turn), so a candidate that is a
            prefix of another is not favoured.
        forward: ``auto``, ``bridge`` or ``compiled`` (module docstring); None: :func:`default_forward`.
    """

    def __init__(self, lm: LoadedModel, reuse_cache: bool = True, end_token: str | None = "<|im_end|>",
                 forward: str | None = None):
        self.lm = lm
        self.reuse_cache = reuse_cache
        self.forward = forward or default_forward()
        if self.forward not in FORWARDS:
            raise ValueError(f"forward '{self.forward}': expected one of {', '.join(FORWARDS)}")
        self._plain: Any = None  # built on the first unhooked step; False: this architecture has no plain path
        self._compiled: Any = None  # forward="compiled": built on the first unhooked step
        self._hook_points: list | None = None
        self.last_path = ""  # the path the last score() took: "bridge", "plain" or "compiled"
        tok = lm.tokenizer
        self._end_ids: list[int] = []
        if end_token is not None and end_token in tok.get_vocab():
            self._end_ids = [tok.convert_tokens_to_ids(end_token)]
        elif tok.eos_token_id is not None:
            self._end_ids = [tok.eos_token_id]
        self._windows = sliding_windows(getattr(getattr(lm, "hf_model", None), "config", None))
        self.reset()

    def reset(self) -> None:
        """Forget the cached prefix (a new episode)."""
        self._cache: Any = None
        self._cached: list[int] = []

    def snapshot(self) -> tuple[Any, tuple[int, ...]]:
        """A copy of the cached prefix (its KV and its tokens), for :meth:`restore`: a live session keeps
        the one of the state it looks at, so every re-score of that state starts from the same cache."""
        import copy

        return copy.deepcopy(self._cache), tuple(self._cached)

    def restore(self, snap: tuple[Any, tuple[int, ...]]) -> None:
        """Make ``snap`` (from :meth:`snapshot`) the cached prefix again; the snapshot itself is not consumed."""
        import copy

        cache, tokens = snap
        self._cache = copy.deepcopy(cache) if self.reuse_cache else None
        self._cached = list(tokens) if self.reuse_cache and cache is not None else []

    @property
    def cache(self) -> Any:
        """The KV cache of the current prefix (an HF ``DynamicCache``), or None before the first step."""
        return self._cache

    def encode_candidate(self, text: str) -> list[int]:
        return self.lm.tokenizer(text, add_special_tokens=False).input_ids + self._end_ids

    def _common_prefix(self, prefix: list[int]) -> int:
        if not self.reuse_cache or self._cache is None:
            return 0
        n = common_prefix_len(self._cached, prefix)
        # Keep at least one new token so the forward always has a query for the prefix end.
        return min(n, len(prefix) - 1) if n == len(prefix) else n

    @torch.no_grad()
    def score(
        self,
        prefix: list[int],
        suffix: list[int],
        candidates: list[str],
        hooks: list[tuple[str, Callable]] | None = None,
        on_layout: Callable[[ForwardLayout], None] | None = None,
    ) -> ScoreResult:
        """Score ``candidates`` as continuations of ``prefix + suffix``.

        Args:
            prefix: prompt tokens that future steps extend (system, memory, task, history).
            suffix: prompt tokens after the prefix (end of user turn, assistant header); last one is q_t.
            candidates: action strings.
            hooks: extra TransformerLens ``(hook_name, fn)`` pairs active during this forward (capture,
                masking). They see this step's queries only; ``on_layout`` is called first with the layout.

        Returns:
            ScoreResult with mean log-prob per candidate token.
        """
        if not candidates:
            raise ValueError("no candidate actions to score")
        if not suffix:
            raise ValueError("the suffix must hold at least one token (q_t)")
        cand_ids = [self.encode_candidate(c) for c in candidates]
        node_tok, node_parent, node_depth, paths = _trie(cand_ids)
        n_new = self._new_len(prefix, suffix)
        paths_q = tuple(tuple(n_new + i for i in path) for path in paths)
        first = n_new - 1  # q_t: the first query whose logits matter (it predicts each candidate's first token)
        # the rows whose logits are read: q_t and every trie node that is some candidate's parent (a leaf, each
        # candidate's end token, predicts nothing): about half the trie, the same values row for row
        rows = sorted({first} | {q for path in paths_q for q in path[:-1]})
        logp, layout = self._trie_forward(prefix, suffix, node_tok, node_parent, node_depth, rows, paths_q,
                                          hooks, on_layout)
        row_of = {q: i for i, q in enumerate(rows)}
        scores = []
        for path, ids in zip(paths_q, cand_ids):
            prev = [first] + list(path[:-1])  # a token is predicted by its parent's output
            lp = logp[[row_of[q] for q in prev], ids].sum().item()
            scores.append(lp / len(ids))
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return ScoreResult(scores=tuple(scores), best=best, layout=layout, reused_tokens=layout.n_cached)

    @torch.no_grad()
    def write(self, prefix: list[int], suffix: list[int], candidates: list[str], beam: int = 4,
              hooks: list[tuple[str, Callable]] | None = None,
              on_layout: Callable[[ForwardLayout], None] | None = None) -> WriteResult:
        """Write one of ``candidates`` token by token: a beam search over their token trie, each hypothesis ranked
        by its mean log-prob per token (the score :meth:`score` gives a whole candidate), each round one forward
        of the beam's paths packed as a trie after the cached prompt.

        For a candidate set too large to score in one forward (ScienceWorld's thousand valid actions: a trie of
        ~3,000 nodes, ~30 s a step on one core), it costs one small forward per token of the longest candidate.
        ``beam`` at least the number of candidates scores every candidate, as :meth:`score` does (the same
        scores); a narrower beam may miss the best-scoring candidate when its first tokens are unlikely.

        ``hooks`` and ``on_layout`` watch the first forward only (the one whose last prompt token is q_t; later
        forwards run the prompt's suffix again and the beam's paths).

        Returns:
            WriteResult: the written candidate's index, and the mean log-prob of every candidate the search
            finished (the others were pruned).
        """
        if not candidates:
            raise ValueError("no candidate actions to write from")
        if not suffix:
            raise ValueError("the suffix must hold at least one token (q_t)")
        if beam < 1:
            raise ValueError(f"beam {beam}: expected at least 1")
        cand_ids = [self.encode_candidate(c) for c in candidates]
        node_tok, node_parent, node_depth, paths = _trie(cand_ids)
        children: dict[int, list[int]] = {}
        for i, par in enumerate(node_parent):
            children.setdefault(par, []).append(i)
        ends = {path[-1]: k for k, path in enumerate(paths)}  # a candidate's last node (its end token)
        live: list[tuple[tuple[int, ...], float]] = [((), 0.0)]  # (trie nodes of the path, sum of log-probs)
        done: dict[int, float] = {}
        reused, forwards = 0, 0
        try:
            while live:
                nodes = sorted({n for path, _ in live for n in path})
                index = {n: i for i, n in enumerate(nodes)}
                sub_parent = [index[node_parent[n]] if node_parent[n] >= 0 else -1 for n in nodes]
                n_new = self._new_len(prefix, suffix)
                read = sorted({n_new - 1 if not path else n_new + index[path[-1]] for path, _ in live})
                first = not forwards
                logp, layout = self._trie_forward(prefix, suffix, [node_tok[n] for n in nodes], sub_parent,
                                                  [node_depth[n] for n in nodes], read, (),
                                                  hooks if first else None, on_layout if first else None)
                reused, forwards = (layout.n_cached if not forwards else reused), forwards + 1
                row_of = {q: i for i, q in enumerate(read)}
                grown: list[tuple[tuple[int, ...], float]] = []
                for path, lp in live:
                    row = logp[row_of[n_new - 1 if not path else n_new + index[path[-1]]]]
                    for c in children.get(path[-1] if path else -1, ()):
                        total = lp + row[node_tok[c]].item()
                        if c in ends:
                            done[ends[c]] = total / (len(path) + 1)
                        if c in children:
                            grown.append((path + (c,), total))
                grown.sort(key=lambda h: -h[1] / len(h[0]))
                live = grown[:beam]
        except BaseException:
            # a later forward of the search raised: the step the first forward's instruments recorded is taken back
            # too (a raise in the first forward has been handled by it)
            if forwards:
                _abort_hooks(hooks)
            raise
        best = max(done, key=lambda k: (done[k], -k))
        return WriteResult(best=best, scores=done, forwards=forwards, reused_tokens=reused)

    def _new_len(self, prefix: list[int], suffix: list[int]) -> int:
        """How many prompt tokens the next forward runs (the new prefix tokens and the suffix)."""
        return len(prefix) - self._common_prefix(prefix) + len(suffix)  # 0 cached tokens when there is no cache

    def _trie_forward(self, prefix: list[int], suffix: list[int], node_tok: list[int], node_parent: list[int],
                      node_depth: list[int], rows: list[int], paths_q: tuple[tuple[int, ...], ...] = (),
                      hooks: list[tuple[str, Callable]] | None = None,
                      on_layout: Callable[[ForwardLayout], None] | None = None) -> tuple[torch.Tensor, ForwardLayout]:
        """One forward of ``prefix + suffix`` and a token trie packed after it (the cached prefix reused); returns
        the fp32 log-softmax of the query ``rows`` (indices into this forward's queries) and the layout. The cache
        is left holding the prefix only."""
        keep = self._common_prefix(prefix)
        if self._cache is not None and keep < len(self._cached):
            if keep == 0:
                self._cache = None
            else:
                self._cache.crop(keep - len(self._cached))
            self._cached = self._cached[:keep]  # the tokens stay the cache's, whatever raises below
        n_cached = keep if self._cache is not None else 0
        new = prefix[n_cached:] + suffix
        base = n_cached + len(new)
        toks = list(new) + node_tok
        pos = list(range(n_cached, base)) + [base + d for d in node_depth]
        n_q = len(toks)
        layout = ForwardLayout(
            n_cached=n_cached,
            n_new_prefix=len(prefix) - n_cached,
            n_suffix=len(suffix),
            query_index=len(new) - 1,
            prompt_len=len(prefix) + len(suffix),
            candidate_slices=((len(new), n_q),),
            candidate_paths=paths_q,
        )
        param = next(self.lm.hf_model.parameters())
        device = param.device
        mask_dtype = param.dtype if param.is_floating_point() else torch.float32  # quantized: fp32 compute
        mask = self._masks(n_cached, len(new), node_parent, mask_dtype, pos)
        mask = {k: m.to(device) for k, m in mask.items()} if isinstance(mask, dict) else mask.to(device)
        laid = False  # whether the instruments were told this forward's layout (only then is a step theirs to drop)
        try:
            if on_layout is not None:
                on_layout(layout)
                laid = True
        except BaseException:
            self.reset()
            raise
        bridge = self.lm.bridge
        kwargs = dict(
            return_type="logits_and_cache",
            # with sliding windows every layer keeps every key (a sliding layer's own cache drops those outside
            # its window and cannot be cropped back to the prefix; the window is in the mask instead); without,
            # the cache transformers builds from the config
            past_key_values=self._cache if self._cache is not None or self._windows is None else DynamicCache(),
            attention_mask=mask,
            position_ids=torch.tensor([pos], device=device),
            # only the rows read are unembedded: the unembedding (and the log-softmax) of the new prefix tokens
            # and of the leaves would be work for nothing; the rows kept are bit-identical to a full one
            logits_to_keep=torch.tensor(rows, device=device),
        )
        inp = torch.tensor([toks], device=device)
        taps = plain_taps(hooks)
        plain = self._plain_forward() if taps is not None else None
        if plain is not None and not taps and self.forward == "compiled":
            plain = self._compiled_forward()
        try:
            if plain is not None:
                kwargs.pop("return_type")
                # every query sees the whole cached prefix unless a sliding window masks part of it
                with visible_prefix(n_cached if self._windows is None else 0):
                    if taps:
                        with attention_taps(taps) as fired:
                            out = plain(input_ids=inp, use_cache=True, **kwargs)
                        check_taps_fired(taps, fired)
                    else:
                        out = plain(input_ids=inp, use_cache=True, **kwargs)
                logits, cache = out.logits, out.past_key_values
                self.last_path = "compiled" if plain is self._compiled else "plain"
            elif hooks:
                with bridge.hooks(fwd_hooks=hooks):
                    logits, cache = bridge(inp, **kwargs)
                self.last_path = "bridge"
            else:
                logits, cache = bridge(inp, **kwargs)
                self.last_path = "bridge"
            # fp32 whatever the model's dtype: a bf16 log-softmax over the vocabulary (8-bit mantissa, ~0.03 nats at
            # log p ~ -4) would round close candidates to the same score.
            logp = log_softmax_rows(logits[0])  # [rows, vocab]
            # Keep only the prefix in the cache: suffix and candidates are per-step scratch.
            cache.crop(len(prefix) - cache.get_seq_length())
        except BaseException:
            # a hook, a tap or an interrupt that raised mid-step leaves the cache with this step's keys appended in
            # place (in some layers, or in all of them, uncropped): drop it (the next step recomputes the prefix)
            # rather than crop a cache whose layers may disagree; the instruments forget the step (their on_abort)
            self.reset()
            if laid:
                _abort_hooks(hooks)
            raise
        self._cache = cache if self.reuse_cache else None
        self._cached = list(prefix) if self.reuse_cache else []
        return logp, layout

    def plain_path(self) -> Any:
        """The plain transformers model (:func:`~workbench.models.plain.plain_model`) this scorer runs a step on
        when no hook, or only read-only taps (:func:`plain_taps`), watch it (with ``forward="compiled"``, a tapped
        step; an unhooked one runs compiled); None where every step goes through the bridge (``forward="bridge"``,
        a hook left on the bridge itself, or an architecture outside the matrix)."""
        return self._plain_forward()

    def _plain_forward(self) -> Any:
        """The plain model for a step no hook reads, or None where it must go through the bridge (``forward`` is
        ``bridge``, a hook sits on the bridge itself, or the architecture has no plain path)."""
        if self.forward == "bridge" or self._plain is False:
            return None
        if self._plain is None and type(self.lm.hf_model).__name__ not in TESTED_ARCHITECTURES:
            # the bridge's own arithmetic differs from transformers' in the last bits for some families outside
            # the matrix (OLMo 3, Starcoder2, Cohere: measured up to 2e-3 in bf16): those keep the bridge
            self._plain = False
            return None
        if self._hook_points is None:
            self._hook_points = list(getattr(self.lm.bridge, "hook_dict", {}).values())
        if bridge_hooked(self.lm.bridge, self._hook_points):
            return None
        if self._plain is None:
            try:
                self._plain = plain_model(self.lm)
            except PlainModelError as e:
                import warnings

                warnings.warn(f"{e}; every step goes through the bridge", stacklevel=3)
                self._plain = False
                return None
        return self._plain

    def _compiled_forward(self) -> Any:
        """The compiled plain model (:func:`~workbench.models.compiled.compiled_model`), built once per model."""
        if self._compiled is None:
            from workbench.models.compiled import compiled_model

            self._compiled = compiled_model(self.lm)
        return self._compiled

    @staticmethod
    def _mask(n_cached: int, n_new: int, node_parent: list[int], dtype: torch.dtype = torch.float32,
              window: int | None = None, positions: list[int] | None = None) -> torch.Tensor:
        """Additive 4-D mask [1, 1, query, key]: causal over prefix+suffix; a trie node sees its ancestors.

        Built in the model's dtype with that dtype's min (as transformers does): the bridge casts the mask to
        the attention scores' dtype, and float32's min overflows to -inf in bfloat16 / float16, which makes a
        fully masked row NaN and puts -inf into every hook that reads the scores.

        ``window``: a sliding-window layer's span: a query at position p also sees only keys at positions
        > p - window (transformers' sliding mask), with ``positions`` the queries' position ids (a trie node's is
        its depth after the prompt, not its place in the packed sequence; cached keys sit at 0..n_cached-1).
        """
        neg = torch.finfo(dtype).min
        n_nodes = len(node_parent)
        n_q = n_new + n_nodes
        allowed = torch.zeros(n_q, n_q, dtype=torch.bool)
        allowed[:n_new, :n_new] = torch.ones(n_new, n_new, dtype=torch.bool).tril()
        allowed[n_new:, :n_new] = True
        for i, parent in enumerate(node_parent):  # parents precede children, so rows copy then add self
            if parent >= 0:
                allowed[n_new + i, n_new:] = allowed[n_new + parent, n_new:]
            allowed[n_new + i, n_new + i] = True
        full = torch.cat([torch.ones(n_q, n_cached, dtype=torch.bool), allowed], dim=1)
        if window is not None:
            pos = torch.tensor(positions if positions is not None else range(n_cached, n_cached + n_q))
            key_pos = torch.cat([torch.arange(n_cached), pos])
            full &= key_pos[None, :] > pos[:, None] - window
        mask = torch.zeros(n_q, n_cached + n_q, dtype=dtype)
        mask.masked_fill_(~full, neg)
        return mask[None, None]

    def _masks(self, n_cached: int, n_new: int, node_parent: list[int], dtype: torch.dtype, positions: list[int]):
        """The mask the forward takes: one 4-D mask, or, for a model that mixes full and sliding-window layers, one
        per layer type (``{"full_attention": ..., "sliding_attention": ...}``, as transformers' own forward makes)."""
        windows = self._windows
        if windows is None:
            return self._mask(n_cached, n_new, node_parent, dtype)
        if isinstance(windows, int):
            return self._mask(n_cached, n_new, node_parent, dtype, window=windows, positions=positions)
        return {kind: self._mask(n_cached, n_new, node_parent, dtype, window=w, positions=positions)
                for kind, w in windows.items()}

    @staticmethod
    def normalise(scores: tuple[float, ...]) -> list[float]:
        """Softmax over candidates (a probability per admissible action)."""
        m = max(scores)
        ex = [math.exp(s - m) for s in scores]
        z = sum(ex)
        return [x / z for x in ex]
