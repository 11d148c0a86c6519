"""Which attention heads exist, and which ones an instrument reads: :class:`HeadSet`.

A head is named ``(layer, head_index)`` where ``head_index`` counts *query* heads (0..n_heads-1). Under
grouped-query attention several query heads share one key/value head; every instrument here selects query
heads, and :meth:`HeadSet.kv_head` says which key/value head a query head reads.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["Head", "HeadSet", "MAX_INDEX", "as_head", "check_heads", "kv_head_of"]

Head = tuple[int, int]  # (layer, head_index)

#: A layer or head index must be below this: no model here comes near it, and a value past it (1e9, 99999) is a
#: typo, not a head.
MAX_INDEX = 4096


def as_head(value: object, where: str = "head") -> Head:
    """``value`` as a ``(layer, head_index)`` pair of non-negative integers below :data:`MAX_INDEX`.

    Integers only: a float (``20.7``), a bool, a string or None is refused, never rounded or parsed (numpy and
    0-d torch integers pass, through ``__index__``).

    Raises:
        ValueError: naming ``where`` and what is wrong.
    """
    if isinstance(value, str | bytes) or not hasattr(value, "__len__") or len(value) != 2:
        raise ValueError(f"{where}: {value!r} is not a [layer, head] pair (two non-negative integers, e.g. [13, 6])")
    out = []
    for name, x in zip(("layer", "head"), value):
        if isinstance(x, bool):
            raise ValueError(f"{where}: {name} {x!r} is a boolean, where an integer belongs")
        try:
            i = operator.index(x)
        except TypeError:
            raise ValueError(f"{where}: {name} {x!r} is not an integer (write e.g. [13, 6])") from None
        if not 0 <= i < MAX_INDEX:
            raise ValueError(f"{where}: {name} {i} is out of range (0..{MAX_INDEX - 1})")
        out.append(i)
    return out[0], out[1]


def check_heads(heads: Iterable[object], what: str = "heads", *, required: bool = True,
                shape: tuple[int, int] | None = None) -> list[Head]:
    """``heads`` as a list of distinct ``(layer, head_index)`` pairs (see :func:`as_head`).

    Args:
        what: how messages name the list (``"--heads"``, ``"file.json: field 'heads'"``).
        required: an empty list is an error.
        shape: ``(n_layers, n_heads)`` of the model, when known: every head must exist in it.

    Raises:
        ValueError: a malformed head (naming its entry), a duplicate (naming both entries), none when required, or
            a head the model does not have.
    """
    if isinstance(heads, str | bytes | dict) or not isinstance(heads, Iterable):
        raise ValueError(f"{what}: expected a list of [layer, head] pairs, got {type(heads).__name__}")
    out: list[Head] = []
    first: dict[Head, int] = {}
    for i, h in enumerate(heads):
        head = as_head(h, f"{what}: entry {i}")
        if head in first:
            raise ValueError(f"{what}: duplicate head {list(head)}: it appears twice (entries {first[head]} and {i}); "
                             "list each head once")
        first[head] = i
        out.append(head)
    if required and not out:
        raise ValueError(f"{what}: no heads; give at least one [layer, head] pair")
    if shape is not None:
        HeadSet(tuple(out)).validate(*shape)
    return out


def kv_head_of(head_index: int, n_heads: int, n_key_value_heads: int) -> int:
    """The key/value head that query head ``head_index`` reads (HF ``repeat_kv`` order: consecutive groups)."""
    if n_heads % n_key_value_heads:
        raise ValueError(f"n_heads={n_heads} is not a multiple of n_key_value_heads={n_key_value_heads}")
    return head_index // (n_heads // n_key_value_heads)


@dataclass(frozen=True)
class HeadSet:
    """An ordered set of query heads; row ``i`` of every capture belongs to ``heads[i]``.

    Attributes:
        heads: ``(layer, head_index)`` pairs, unique, in the order the caller gave them (e.g. by score).
    """

    heads: tuple[Head, ...]

    def __post_init__(self) -> None:
        clean = tuple(check_heads(self.heads, "HeadSet", required=False))
        object.__setattr__(self, "heads", clean)

    @classmethod
    def of(cls, heads: HeadSet | Iterable[Head]) -> HeadSet:
        """A HeadSet from pairs (a HeadSet passes through unchanged)."""
        return heads if isinstance(heads, HeadSet) else cls(tuple(heads))

    @classmethod
    def all(cls, n_layers: int, n_heads: int) -> HeadSet:
        """Every query head, layer-major (the order of a ``[n_layers, n_heads]`` score tensor flattened)."""
        return cls(tuple((layer, head_index) for layer in range(n_layers) for head_index in range(n_heads)))

    def __len__(self) -> int:
        return len(self.heads)

    def __iter__(self) -> Iterator[Head]:
        return iter(self.heads)

    def __contains__(self, head: object) -> bool:
        return head in self.heads

    @property
    def layers(self) -> tuple[int, ...]:
        """The layers that hold at least one selected head, ascending."""
        return tuple(sorted({layer for layer, _ in self.heads}))

    def in_layer(self, layer: int) -> tuple[list[int], list[int]]:
        """``(rows, head_indices)``: the capture rows and query-head indices of the heads in ``layer``."""
        rows = [i for i, (lay, _) in enumerate(self.heads) if lay == layer]
        return rows, [self.heads[i][1] for i in rows]

    def validate(self, n_layers: int, n_heads: int) -> None:
        """Raise if a head does not exist in a model with ``n_layers`` x ``n_heads`` query heads."""
        bad = [h for h in self.heads if h[0] >= n_layers or h[1] >= n_heads]
        if bad:
            raise ValueError(
                f"heads {bad} do not exist in a model with {n_layers} layers x {n_heads} query heads "
                "(head_index counts query heads, 0-based)"
            )
