"""Does a model work with the workbench's instruments? Each check compares what the workbench computes through the
TransformerLens bridge with what the untouched `transformers` model computes (eager attention), on the same
tokens.

* ``logits``: the bridge's logits == the model's;
* ``scores``: the scorer's per-candidate mean log-probabilities (one forward: prompt + every candidate packed as a
  trie under a custom 4-D mask) == each candidate appended to the prompt in its own plain forward;
* ``kv_reuse``: an episode of prompts that grow step by step, scored reusing the KV prefix == scored afresh;
* ``capture``: the selective capture's row of q_t (whole prompt, no cache) == eager ``attentions``' last row;
* ``capture_cached``: the same row captured inside a scorer step that reused the cache, on the default forward (the
  plain path's taps where the architecture has one);
* ``capture_bridge``: the same through the bridge's hooks (``forward="bridge"``);
* ``head_mask``: masking one query head (``hook_z``) == the model with that head's slice of the output projection
  zeroed;
* ``C``: the utilization matrix of an episode from the captured rows == from the eager rows.

Each value is the largest absolute difference (0.0: bit for bit), or the error the check raised. Used by the
architecture matrix of the tests (tiny random models of every family) and ready for a user's own model
(:func:`check_model` with a second, untouched copy of it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from workbench.attention.capture import AttentionCapture
from workbench.attention.masking import mask_heads_hooks
from workbench.attention.utilization import utilization_matrix
from workbench.models.scoring import ActionScorer

__all__ = ["CHECKS", "check_model", "reference_scores"]

CHECKS = ("logits", "scores", "kv_reuse", "capture", "capture_cached", "capture_bridge", "head_mask", "C")


def _out_proj(reference: Any, layer: int):
    """The output projection of one attention layer of a transformers model (o_proj, dense, c_proj, out_proj)."""
    base = getattr(reference, "model", None) or getattr(reference, "gpt_neox", None) or reference.base_model
    layers = getattr(base, "layers", None) or getattr(base, "h", None)
    attn = getattr(layers[layer], "self_attn", None) or getattr(layers[layer], "attention", None) or \
        getattr(layers[layer], "attn")
    for name in ("o_proj", "dense", "c_proj", "out_proj"):
        if hasattr(attn, name):
            return getattr(attn, name)
    raise AttributeError(f"layer {layer}: no output projection found in {type(attn).__name__}")


@torch.no_grad()
def reference_scores(reference: Any, prompt: Sequence[int], candidates: Sequence[Sequence[int]]) -> list[float]:
    """Each candidate's mean log-probability given the prompt, one plain forward per candidate (no cache, no custom
    mask): what the scorer's one packed forward must reproduce."""
    device = next(reference.parameters()).device
    out = []
    for ids in candidates:
        x = torch.tensor([list(prompt) + list(ids)], device=device)
        logp = torch.log_softmax(reference(x).logits[0].float(), dim=-1)
        n = len(prompt)
        out.append(sum(logp[n - 1 + i, t].item() for i, t in enumerate(ids)) / len(ids))
    return out


def _eager_rows(reference: Any, prompt: Sequence[int], heads: Sequence[tuple[int, int]]) -> torch.Tensor:
    device = next(reference.parameters()).device
    with torch.no_grad():
        att = reference(torch.tensor([list(prompt)], device=device), output_attentions=True).attentions
    if not att or att[0] is None:
        raise RuntimeError("the reference model returned no attentions: compute references on an untouched copy "
                           "(a model wrapped in the bridge no longer returns them)")
    return torch.stack([att[layer][0, head, -1, :].float().cpu() for layer, head in heads])


def _check(fn: Callable[[], float]) -> float | str:
    try:
        return float(fn())
    except Exception as e:  # a check that cannot run is a finding of its own
        return f"error: {type(e).__name__}: {str(e).splitlines()[0][:160]}"


def check_model(lm: Any, reference: Any, prompts: Sequence[Sequence[int]], candidates: Sequence[str],
                masked_head: tuple[int, int] | None = None) -> dict[str, float | str]:
    """Run every check (module docstring) on ``lm`` against ``reference``, an untouched copy of its model.

    Args:
        prompts: an episode's prompts, each extending the one before (the last is used where one prompt is
            needed); the last 3 tokens of each are its suffix (q_t last).
        candidates: the candidate commands scored at every step.
        masked_head: the head ``head_mask`` zeroes (default: the last head of the last layer).

    Returns:
        check name -> largest absolute difference, or ``"error: ..."``.
    """
    heads = [(layer, h) for layer in range(lm.n_layers) for h in range(lm.n_heads)]
    masked_head = masked_head or (lm.n_layers - 1, lm.n_heads - 1)
    last = list(prompts[-1])
    device = next(lm.hf_model.parameters()).device
    res: dict[str, float | str] = {}

    def logits():
        with torch.no_grad():
            mine = lm.bridge(torch.tensor([last], device=device)).float()
            theirs = reference(torch.tensor([last], device=device)).logits.float()
        return (mine - theirs).abs().max().item()

    def step_scores(scorer, prompt, instruments=()):
        hooks = [h for i in instruments for h in i.hooks()]
        on_layout = (lambda lay: [i.on_layout(lay) for i in instruments]) if instruments else None
        return scorer.score(list(prompt[:-3]), list(prompt[-3:]), list(candidates), hooks=hooks, on_layout=on_layout)

    cand_ids = [ActionScorer(lm).encode_candidate(c) for c in candidates]

    def scores():
        got = step_scores(ActionScorer(lm, reuse_cache=False), last).scores
        want = reference_scores(reference, last, cand_ids)
        return max(abs(a - b) for a, b in zip(got, want))

    def kv_reuse():
        reuse, fresh = ActionScorer(lm, reuse_cache=True), ActionScorer(lm, reuse_cache=False)
        worst = 0.0
        for p in prompts:
            a, b = step_scores(reuse, p).scores, step_scores(fresh, p).scores
            worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
        return worst

    def capture():
        rows = AttentionCapture(lm, heads).capture_prompt(last)
        return (rows - _eager_rows(reference, last, heads)).abs().max().item()

    def capture_cached(forward: str | None = None):
        # the default forward (the plain path's taps, where the architecture has one), or the bridge's hooks
        scorer = ActionScorer(lm, reuse_cache=True, forward=forward)
        cap = AttentionCapture(lm, heads, scorer=scorer)
        worst = 0.0
        for p in prompts:
            step_scores(scorer, p, [cap])
            worst = max(worst, (cap.rows - _eager_rows(reference, p, heads)).abs().max().item())
        if not any(s.n_cached for s in cap.steps):
            raise RuntimeError("no step reused the cache: give prompts that extend one another")
        return worst

    def head_mask():
        layer, head = masked_head
        scorer = ActionScorer(lm, reuse_cache=False)

        class _Mask:
            def hooks(self):
                return mask_heads_hooks([masked_head], lm.n_heads)

            def on_layout(self, layout):
                pass

        masked = step_scores(scorer, last, [_Mask()]).scores
        proj = _out_proj(reference, layer)
        d = lm.d_head
        saved = proj.weight[:, head * d:(head + 1) * d].clone()
        with torch.no_grad():
            proj.weight[:, head * d:(head + 1) * d] = 0
        try:
            want = reference_scores(reference, last, cand_ids)
        finally:
            with torch.no_grad():
                proj.weight[:, head * d:(head + 1) * d] = saved
        unmasked = step_scores(scorer, last).scores
        if max(abs(a - b) for a, b in zip(masked, unmasked)) == 0.0:
            raise RuntimeError("masking the head changed nothing: the mask did not reach the forward")
        return max(abs(a - b) for a, b in zip(masked, want))

    def c_matrix():
        scorer = ActionScorer(lm, reuse_cache=True)
        cap = AttentionCapture(lm, heads, scorer=scorer)
        for p in prompts:
            step_scores(scorer, p, [cap])
        n0 = len(prompts[0]) - 3
        segments = [list(range(k, min(k + 4, n0))) for k in range(0, n0, 4)]  # the first prompt's prefix as memory
        mine = utilization_matrix(cap.steps, segments, heads=heads).C
        eager = [_eager_rows(reference, p, heads) for p in prompts]
        theirs = utilization_matrix(eager, segments, prompt_lens=[len(p) for p in prompts], heads=heads).C
        return float((torch.as_tensor(mine) - torch.as_tensor(theirs)).abs().max())

    for name, fn in (("logits", logits), ("scores", scores), ("kv_reuse", kv_reuse), ("capture", capture),
                     ("capture_cached", capture_cached), ("capture_bridge", lambda: capture_cached("bridge")),
                     ("head_mask", head_mask), ("C", c_matrix)):
        res[name] = _check(fn)
    return res
