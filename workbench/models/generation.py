"""Generate-and-parse action selection for larger models (``Thought: ... Action: ...``).

Small models choose by likelihood over the admissible commands (:mod:`workbench.models.scoring`); larger
instruction-tuned models can instead write a thought and an action, which is parsed and mapped to an
admissible command. The bridge's components are the model's own modules, so hooks fire here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from workbench.envs.normalize import to_admissible
from workbench.models.loading import LoadedModel
from workbench.models.scoring import common_prefix_len, sliding_windows

__all__ = ["GeneratedAction", "parse_action", "closest_admissible", "generate_action", "PrefixGenerator"]

_ACTION = re.compile(r"(?:^|\n)\s*(?:Action|>)\s*:?\s*(?P<act>[^\n]+)", re.I)
_THOUGHT = re.compile(r"(?:^|\n)\s*Thought\s*:\s*(?P<th>[^\n]+)", re.I)


@dataclass(frozen=True)
class GeneratedAction:
    text: str  # the raw generation
    thought: str | None
    parsed: str  # the action as written
    action: str  # the admissible command it maps to
    exact: bool  # parsed mapped to an admissible command without the similarity fallback


def parse_action(text: str) -> tuple[str | None, str]:
    """(thought, action) from a ``Thought: ...\\nAction: ...`` generation; a bare line counts as the action."""
    thought = _THOUGHT.search(text)
    m = _ACTION.search(text)
    if m:
        action = m.group("act")
    else:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not _THOUGHT.match(ln)]
        action = lines[0] if lines else ""
    return (thought.group("th").strip() if thought else None), action.strip().rstrip(".").strip()


def closest_admissible(action: str, admissible: list[str]) -> str:
    """The admissible command sharing the most words with ``action`` (ties: the earlier command)."""
    words = set(action.lower().split())
    return max(admissible, key=lambda c: (len(words & set(c.split())) / (1 + len(set(c.split()) ^ words)),
                                          -admissible.index(c)))


def _generated(lm: LoadedModel, ids: list[int], admissible: list[str]) -> GeneratedAction:
    text = lm.tokenizer.decode(ids, skip_special_tokens=True)
    thought, parsed = parse_action(text)
    mapped = to_admissible(parsed, admissible)
    return GeneratedAction(
        text=text, thought=thought, parsed=parsed, action=mapped or closest_admissible(parsed, admissible),
        exact=mapped is not None,
    )


@torch.no_grad()
def generate_action(lm: LoadedModel, prompt_tokens: list[int], admissible: list[str], max_new_tokens: int = 48) -> GeneratedAction:
    """Greedy-generate a reply to the prompt and map its action to an admissible command."""
    device = next(lm.hf_model.parameters()).device
    ids = torch.tensor([prompt_tokens], device=device)
    out = lm.hf_model.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
        pad_token_id=lm.tokenizer.pad_token_id, eos_token_id=lm.tokenizer.eos_token_id,
    )
    return _generated(lm, out[0, ids.shape[1]:].tolist(), admissible)


class PrefixGenerator:
    """Greedy generation that keeps the KV cache of the prompt's prefix from one call to the next.

    Along an episode each step's prompt extends the previous one's prefix (the history grows at its end), so a
    step encodes only the tokens added since the previous step, its suffix and the tokens it writes, not the
    whole prompt again (:class:`~workbench.models.scoring.ActionScorer` does the same for scoring). After each
    call the cache is cropped back to the prefix: the suffix and the reply are per-step scratch. The reply is
    :func:`generate_action`'s (greedy, the same end token and token limit); ``reuse_cache=False`` encodes the
    whole prompt every call (the reference for the parity check in ``benchmarks/kv_reuse.py --decode``).
    """

    def __init__(self, lm: LoadedModel, reuse_cache: bool = True, max_new_tokens: int = 48):
        self.lm, self.reuse_cache, self.max_new_tokens = lm, reuse_cache, max_new_tokens
        self.reset()

    def reset(self) -> None:
        """Forget the cached prefix (a new episode)."""
        self._cache = None
        self._cached: list[int] = []
        self.reused_tokens = 0  # prefix tokens served from the cache by the last call

    def _keep(self, prefix: list[int]) -> int:
        if not self.reuse_cache or self._cache is None:
            return 0
        return common_prefix_len(self._cached, prefix)

    @torch.no_grad()
    def generate(self, prefix: list[int], suffix: list[int], admissible: list[str]) -> GeneratedAction:
        """Write the reply to ``prefix + suffix`` and map its action to ``admissible`` (see :func:`generate_action`)."""
        prefix, suffix = list(prefix), list(suffix)
        if not suffix:
            raise ValueError("the suffix must hold at least one token (the assistant header)")
        model = self.lm.hf_model
        device = next(model.parameters()).device
        keep = self._keep(prefix)
        cache = self._cache if keep else None
        if cache is None and sliding_windows(model.config) is not None:
            cache = DynamicCache()  # every key kept, so the cache can be cropped back to the prefix (see scoring)
        if cache is not None and keep < cache.get_seq_length():
            cache.crop(keep - cache.get_seq_length())
        eos = self.lm.tokenizer.eos_token_id
        out = model(input_ids=torch.tensor([prefix[keep:] + suffix], device=device), past_key_values=cache,
                    use_cache=True, logits_to_keep=1)
        written: list[int] = []
        while len(written) < self.max_new_tokens:
            nxt = int(out.logits[0, -1].argmax())
            written.append(nxt)
            if nxt == eos or len(written) == self.max_new_tokens:
                break
            out = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=out.past_key_values,
                        use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        cache.crop(len(prefix) - cache.get_seq_length())
        self._cache, self._cached = (cache, prefix) if self.reuse_cache else (None, [])
        self.reused_tokens = keep
        return _generated(self.lm, written, admissible)
