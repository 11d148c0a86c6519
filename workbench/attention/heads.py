"""Retrieval-head scoring (AGMR section 2.1, appendix C.2).

    score[layer, head_index] = sum over supervision pairs  sum over key-context tokens t
                               Attention_{layer, head_index}(last prompt token -> t)

A supervision pair is ``(token_ids, key_positions)``: the complete prompt right before a key decision step and
the key positions of the memory snippet that should support it. Every head of every layer is read in the same
forward (one forward per pair, stopped before the unembedding) by :class:`AttentionCapture`, so a prompt of
any length costs ``n_layers x n_heads x n_tokens`` floats, never a full pattern.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import torch
from jaxtyping import Float
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from torch import Tensor
from tqdm.auto import tqdm

from workbench.attention.capture import AttentionCapture
from workbench.attention.head_set import MAX_INDEX, Head, HeadSet, check_heads
from workbench.files import FormatError, read_json_model
from workbench.memory.trajectory import atomic_write_text
from workbench.models.loading import LoadedModel
from workbench.models.registry import get_model_spec, list_models

__all__ = ["HeadScores", "HeadScoresRecord", "RetrievalHeadsFile", "SupervisionPair", "score_heads",
           "default_retrieval_heads", "read_retrieval_heads", "save_default_retrieval_heads", "require_registered_name",
           "HEADS_ASSETS"]

HEADS_ASSETS = Path(__file__).resolve().parents[1] / "assets" / "heads"


_Index = Annotated[int, Field(ge=0, lt=MAX_INDEX)]  # a layer or a head index
_HeadPair = tuple[_Index, _Index]


def _distinct(heads: list[tuple[int, int]]) -> list[tuple[int, int]]:
    first: dict[tuple[int, int], int] = {}
    for i, h in enumerate(heads):
        if h in first:
            raise ValueError(f"duplicate head {list(h)}: it appears twice (entries {first[h]} and {i}); "
                             "list each head once")
        first[h] = i
    return heads


class RetrievalHeadsFile(BaseModel):
    """A committed retrieval-heads file (``assets/heads/<model>.json``): the model, its heads and where they
    came from. Each head is ``[layer, head]``, two JSON integers in ``0..MAX_INDEX-1``; at least one, none twice."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    model: str = Field(min_length=1)
    heads: list[_HeadPair] = Field(min_length=1)
    source: str = Field(min_length=1)  # the command (and commit) that chose them
    note: str = ""

    @field_validator("heads")
    @classmethod
    def _distinct_heads(cls, heads: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return _distinct(heads)


_HEADS_FIX = ("write it as {\"model\": NAME, \"heads\": [[LAYER, HEAD], ...], \"source\": HOW} (or re-save it with "
              "`workbench heads score --save-default`)")


def read_retrieval_heads(path: str | Path, model_name: str | None = None) -> list[Head]:
    """The heads of a retrieval-heads file (:class:`RetrievalHeadsFile`), checked strictly.

    Raises:
        FileNotFoundError: no such file.
        FormatError: not such a file (naming the file and field), or it names another model than ``model_name``.
    """
    record = read_json_model(path, RetrievalHeadsFile, "retrieval-heads file", fix=_HEADS_FIX)
    if model_name is not None and record.model != model_name:
        raise FormatError(path, f"field 'model' is {record.model!r}, expected {model_name!r}",
                          fix=f"the file must be named after the model it belongs to ({record.model}.json)")
    return [(layer, head) for layer, head in record.heads]


def default_retrieval_heads(model_name: str, shape: tuple[int, int] | None = None) -> list[Head]:
    """The committed retrieval heads of a registered model (``assets/heads/<name>.json``, with where they came from).

    Args:
        shape: ``(n_layers, n_heads)`` of the model, when known: every head must exist in it.

    Raises:
        FileNotFoundError: none committed for this model; the message says how to score them.
        FormatError: the file is malformed (naming the file and field), or belongs to another model.
        ValueError: a head the model (of ``shape``) does not have.
    """
    path = HEADS_ASSETS / f"{model_name}.json"
    if not path.exists() and not path.is_symlink():
        known = sorted(p.stem for p in HEADS_ASSETS.glob("*.json"))
        raise FileNotFoundError(
            f"no committed retrieval heads for model '{model_name}' (committed: {', '.join(known) or 'none'}); "
            f"score them with `workbench heads score --model {model_name} --split valid_seen --out F` and pass "
            "--scores F, or pass --heads LAYER.HEAD ...")
    heads = read_retrieval_heads(path, model_name)
    if shape is not None:
        try:
            HeadSet(tuple(heads)).validate(*shape)
        except ValueError as e:
            raise FormatError(path, str(e), where="field 'heads'",
                              fix="score the heads of this model again and re-save them") from None
    return heads


def require_registered_name(model_name: str) -> None:
    """Committed heads are looked up by registry name: anything else (a folder, an HF id) is refused.

    Raises:
        ValueError: not a registered name; the message lists the registered ones.
    """
    if get_model_spec(model_name) is None:
        raise ValueError(f"'{model_name}' is not a registered model name, and committed heads are looked up by name "
                         f"(registered: {', '.join(list_models())}); pass --heads or --scores to the commands instead")


def save_default_retrieval_heads(model_name: str, heads: Sequence[Head], source: str, *, replace: bool = False,
                                 folder: str | Path | None = None) -> Path:
    """Make ``heads`` the committed retrieval heads of a registered model (``assets/heads/<name>.json``): what
    AGMR's refinement, C and the explorers use when no heads are passed.

    Args:
        source: how they were obtained (command, supervision set, commit), kept in the file.
        replace: overwrite a file that names other heads (without it such a file is left as it is).
        folder: where to write (default: the package's ``assets/heads``).

    Raises:
        ValueError: not a registered name (the file is looked up by name), no heads, or other heads are already
            committed for this model and ``replace`` is not set.
    """
    require_registered_name(model_name)
    heads = check_heads(heads, "heads to save")
    if not source.strip():
        raise ValueError("source: say how the heads were obtained (command, supervision set, commit)")
    path = Path(folder or HEADS_ASSETS) / f"{model_name}.json"
    if path.exists() and not replace:
        old = read_retrieval_heads(path, model_name)
        if old != heads:
            raise ValueError(f"{path} already names other heads for '{model_name}' ({old}); pass --replace to "
                             "overwrite it (the old file stays in git history)")
    record = {"model": model_name, "heads": [list(h) for h in heads], "source": source,
              "note": "AGMR, C and the explorers read these when no heads are passed; valid_unseen, the evaluation "
                      "split, must never choose them."}
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    return path


SupervisionPair = tuple[Sequence[int], Sequence[int]]  # (token_ids, key_positions of the key context)


class HeadScoresRecord(BaseModel):
    """On-disk form of :class:`HeadScores` (JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    model_name: str = Field(min_length=1)
    n_layers: int = Field(ge=1, le=MAX_INDEX)
    n_heads: int = Field(ge=1, le=MAX_INDEX)
    n_pairs: int = Field(ge=0)
    # [n_layers][n_heads]; bounded so float32 (the tensor they load into) holds them
    scores: list[list[Annotated[float, Field(allow_inf_nan=False, ge=-1e6, le=1e6)]]]
    top_heads: list[_HeadPair] = []  # (layer, head_index) by descending score, for readers without torch

    @field_validator("top_heads")
    @classmethod
    def _distinct_heads(cls, heads: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return _distinct(heads)

    @model_validator(mode="after")
    def _shape(self) -> HeadScoresRecord:
        if len(self.scores) != self.n_layers or any(len(row) != self.n_heads for row in self.scores):
            raise ValueError(
                f"scores must be {self.n_layers} rows of {self.n_heads} floats (n_layers x n_heads); "
                f"got {len(self.scores)} rows of lengths {sorted({len(r) for r in self.scores})}"
            )
        HeadSet(tuple(self.top_heads)).validate(self.n_layers, self.n_heads)
        return self


@dataclass(frozen=True)
class HeadScores:
    """Retrieval scores of every head of one model.

    Attributes:
        model_name: the name the model was loaded by (scores of one model mean nothing for another).
        scores: summed attention from the last prompt token to the key context, per head.
        n_pairs: how many supervision pairs were summed.
    """

    model_name: str
    scores: Float[Tensor, "layer head"]
    n_pairs: int

    def top_k(self, k: int) -> list[Head]:
        """The ``k`` highest-scoring ``(layer, head_index)``; ties go to the lower layer, then head."""
        n_layers, n_heads = self.scores.shape
        order = sorted(
            ((layer, head) for layer in range(n_layers) for head in range(n_heads)),
            key=lambda lh: (-float(self.scores[lh]), lh[0], lh[1]),
        )
        return order[:k]

    def head_set(self, k: int) -> HeadSet:
        """The top ``k`` heads as a :class:`HeadSet` (rows in score order), ready for capture or masking."""
        return HeadSet(tuple(self.top_k(k)))

    def to_record(self, top: int = 10) -> HeadScoresRecord:
        n_layers, n_heads = self.scores.shape
        return HeadScoresRecord(model_name=self.model_name, n_layers=n_layers, n_heads=n_heads,
                                n_pairs=self.n_pairs, scores=self.scores.tolist(),
                                top_heads=self.top_k(min(top, n_layers * n_heads)))

    @classmethod
    def from_record(cls, record: HeadScoresRecord) -> HeadScores:
        return cls(model_name=record.model_name, scores=torch.tensor(record.scores, dtype=torch.float32),
                   n_pairs=record.n_pairs)

    def save(self, path: str | Path, top: int = 10) -> Path:
        """Write the scores as JSON (:class:`HeadScoresRecord`), with the model name and the ``top`` heads."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_record(top).model_dump_json(indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path, model_name: str | None = None) -> HeadScores:
        """Read scores written by :meth:`save`.

        Args:
            path: the JSON file.
            model_name: when given, the scores must belong to this model.

        Raises:
            FileNotFoundError: no such file.
            FormatError: the file is not a strict HeadScoresRecord (naming the field), or belongs to another model.
        """
        record = read_json_model(path, HeadScoresRecord, "head-scores file",
                                 fix="it is not a head-scores file: write one with `workbench heads score --out F`")
        if model_name is not None and record.model_name != model_name:
            raise FormatError(path, f"field 'model_name' is '{record.model_name}' but scores of '{model_name}' were "
                                    "asked for", fix="score the heads of this model with `workbench heads score`")
        return cls.from_record(record)


def score_heads(
    lm: LoadedModel,
    pairs: Iterable[SupervisionPair],
    progress: bool = True,
) -> HeadScores:
    """Score every head by the attention its last prompt token pays to the key context.

    Args:
        lm: the loaded model.
        pairs: ``(token_ids, key_positions)`` per supervision example; key positions index ``token_ids``.
        progress: show a tqdm bar over the pairs.

    Returns:
        :class:`HeadScores` with a ``[n_layers, n_heads]`` tensor.

    Raises:
        ValueError: a pair has no tokens, no key positions, or positions outside its prompt.
    """
    capture = AttentionCapture(lm, "all", keep_steps=False)
    total: Float[Tensor, "layer head"] = torch.zeros(lm.n_layers, lm.n_heads)
    pairs = list(pairs)
    n = 0
    for i, (token_ids, key_positions) in enumerate(tqdm(pairs, desc="scoring heads", disable=not progress)):
        positions = sorted(set(int(p) for p in key_positions))
        if not token_ids or not positions:
            raise ValueError(f"supervision pair {i}: token_ids and key_positions must both be non-empty")
        if positions[0] < 0 or positions[-1] >= len(token_ids):
            raise ValueError(
                f"supervision pair {i}: key_positions span {positions[0]}..{positions[-1]} but the prompt has "
                f"{len(token_ids)} tokens (positions index token_ids, 0-based)"
            )
        rows = capture.capture_prompt(token_ids)  # [n_layers * n_heads, key_pos], layer-major
        total += rows[:, positions].sum(dim=-1).view(lm.n_layers, lm.n_heads)
        n += 1
    return HeadScores(model_name=lm.name, scores=total, n_pairs=n)
