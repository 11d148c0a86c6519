"""Schema-constrained decoding for the in-process backend, with llguidance.

At each decoding step the grammar of the reply's JSON schema says which tokens may come next; the others get
probability zero, so a 135M model can only write a reply that parses (it may still say something useless, or run
out of ``max_tokens`` mid-object: the caller validates either way).

Why llguidance (over xgrammar or outlines): it computes a token mask in tens of microseconds on a CPU with no GPU
kernel or compiler behind it, builds its tokenizer view from any ``transformers`` fast tokenizer, supports the JSON
schemas pydantic writes (``anyOf``, ``const``, ``$ref``/``$defs``, ``maxLength``), and is one dependency-free wheel;
it is also the engine llama.cpp and vLLM use for the same job, so the in-process and served replies are constrained
alike. xgrammar pulls in triton on Linux; outlines pulls in a much larger stack.
"""

from __future__ import annotations

import json
from typing import Any

from workbench.llm.errors import LLMConfigError

__all__ = ["SchemaDecoder", "GRAMMAR_ENGINE"]

GRAMMAR_ENGINE = "llguidance"


def _llguidance() -> Any:
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch
    except ImportError:
        raise LLMConfigError("schema-constrained decoding in-process needs llguidance: pip install llguidance "
                             "(or pass constrain=False to the local backend: the schema is then only described in "
                             "the prompt)") from None
    return llguidance


class SchemaDecoder:
    """Token masks for replies that follow one JSON schema, over one tokenizer.

    Args:
        tokenizer: a ``transformers`` fast tokenizer (its llguidance view is built once per decoder).
    """

    def __init__(self, tokenizer: Any) -> None:
        llg = _llguidance()
        self._llg = llg
        try:
            self._tok = llg.hf.from_tokenizer(tokenizer)
        except Exception as e:  # a slow or unusual tokenizer
            raise LLMConfigError(f"llguidance cannot read this tokenizer ({type(e).__name__}: {e}); pass "
                                 "constrain=False to the local backend") from None
        self.vocab_size = self._tok.vocab_size

    def start(self, schema: dict) -> _Run:
        """A fresh matcher for one reply under ``schema`` (a JSON schema dict)."""
        grammar = self._llg.LLMatcher.grammar_from_json_schema(json.dumps(schema),
                                                               defaults={"whitespace_flexible": False})
        matcher = self._llg.LLMatcher(self._tok, grammar)
        if matcher.is_error():
            raise LLMConfigError(f"llguidance rejects the schema: {matcher.get_error()}")
        return _Run(self._llg, matcher, self.vocab_size)


class _Run:
    """One constrained reply: ``mask(logits)`` before choosing, ``advance(token)`` after."""

    def __init__(self, llg: Any, matcher: Any, vocab_size: int) -> None:
        self._llg, self._m = llg, matcher
        self._bitmask = llg.torch.allocate_token_bitmask(1, vocab_size)

    def mask(self, logits: Any) -> None:
        """Set the logits of every token the grammar forbids next to -inf (in place; ``logits`` is 1-D float)."""
        self._llg.torch.fill_next_token_bitmask(self._m, self._bitmask, 0)
        n = self._bitmask.shape[-1] * 32
        view = logits[:n] if logits.shape[0] >= n else logits
        self._llg.torch.apply_token_bitmask_inplace(view, self._bitmask[0, : (view.shape[0] + 31) // 32])
        if logits.shape[0] > n:  # padded vocabulary rows past the tokenizer's: never valid
            logits[n:] = float("-inf")

    def advance(self, token: int) -> None:
        if not self._m.consume_token(int(token)):
            raise LLMConfigError(f"llguidance refused token {token} it had allowed: {self._m.get_error()}")

    @property
    def done(self) -> bool:
        """The reply is complete: only the end of the text may follow."""
        return bool(self._m.is_stopped())

    @property
    def may_end(self) -> bool:
        return bool(self._m.is_accepting())
