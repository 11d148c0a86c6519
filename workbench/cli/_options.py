"""Options that several commands share, so each means one thing and is spelled one way everywhere.

Conventions every command follows:

- ``--out`` names a folder (created when missing; an existing *file* there is an argparse error). Commands that
  write one file write it inside the folder under a fixed name; the file path they used to take (``--out
  scores.json``) still works, with a note on stderr (see :func:`out_file`).
- A closed set of names is an argparse ``choices`` read from the library's registry or constant when the parser
  is built (a policy or backend registered by a method is offered as soon as it is registered).
- ``--tasks`` takes a slice of the split's sorted tasks (``0:20``, ``10:``, ``0:134:2``, ``all``) and has one
  default per meaning:

  ==================  =========  ===================================================================
  meaning             default    commands
  ==================  =========  ===================================================================
  episodes to play    ``0:20``   ``run`` (a first look at a split; ``all`` for a paper-scale run)
  teacher forcing     ``0:20``   ``heads ablate``, ``utilization`` (cheap, low-variance steps)
  supervision source  ``0:40``   ``heads score`` (pairs are filtered: more tasks than an evaluation)
  the whole set       ``all``    ``refine``, ``experts``, ``merge-runs`` (they build or cover it all)
  ==================  =========  ===================================================================
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from workbench.agents.loop import DECODES
from workbench.attention import HeadScores
from workbench.attention.head_set import check_heads
from workbench.eval.config import DTYPES
from workbench.llm.registry import list_backends
from workbench.memory.retrieval import list_retrievers
from workbench.models.device import DEVICE_HELP
from workbench.models.registry import DEFAULT_AGENT

__all__ = ["EPISODE_TASKS", "TF_TASKS", "SUPERVISION_TASKS", "ALL_TASKS", "MODEL_HELP", "SCORES_FILE", "out_dir",
           "names_file", "out_file",
           "add_out", "add_tasks", "add_model", "add_dtype", "add_device", "add_decode", "add_retriever", "add_backend",
           "add_executor", "add_progress", "add_heads", "add_head_experiment", "scores_file", "parse_heads",
           "heads_or_top_k", "print_summary"]

EPISODE_TASKS = "0:20"
TF_TASKS = "0:20"
SUPERVISION_TASKS = "0:40"
ALL_TASKS = "all"
SCORES_FILE = "head_scores.json"  # what `heads score --out DIR` writes, and what --scores DIR reads

MODEL_HELP = (f"a registered name ({DEFAULT_AGENT}: the default agent; smollm2-135m-alfworld: agent v1, "
              "behaviour-cloned on expert states; smollm2-135m-instruct: the untrained model; `workbench list "
              "models`), a local HF folder, or an id in the HF cache")
_SLICE = "a slice of the split's sorted tasks (START:STOP[:STEP], e.g. 0:20, 10:, 0:134:2; all)"
_SUMMARY = ("n_episodes", "success_rate", "avg_score", "avg_steps", "memory_tokens")  # what run / merge-runs print


def out_dir(value: str) -> str:
    """The argparse ``type`` of every ``--out``: a folder, refused when a file is there.

    Args:
        value: the path as given.

    Returns:
        ``value`` unchanged (the library takes plain strings and creates the folder itself).

    Raises:
        argparse.ArgumentTypeError: ``value`` is an existing file (the command would fail only later, or
            write beside it under another name).
    """
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is a file, but --out names a folder (the command writes "
                                         "its files inside it): pass a folder, or remove the file")
    return value


def names_file(out: str, suffixes: tuple[str, ...]) -> bool:
    """Whether ``--out`` is the older file form of a one-file command: a path ending in one of ``suffixes`` that
    is not a folder."""
    return Path(out).suffix in suffixes and not Path(out).is_dir()


def _out_dir_or(*suffixes: str):
    """``out_dir``, except that the older file form (``names_file``) passes as it is."""
    def check(value: str) -> str:
        return value if names_file(value, suffixes) else out_dir(value)
    return check


def out_file(out: str, name: str, command: str, suffixes: tuple[str, ...]) -> Path:
    """The file a one-file command writes: ``OUT/name``, or ``out`` itself in the legacy file form.

    Args:
        out: the ``--out`` value.
        name: the file's fixed name inside the folder.
        command: how the note on stderr names the command.
        suffixes: the file suffixes that mark the legacy form (``--out scores.json``).

    Returns:
        The file's path; its folder exists.
    """
    path = Path(out)
    if names_file(out, suffixes):
        # the Makefile and older notes pass a file: keep writing exactly there rather than under a new name
        print(f"workbench {command}: note: --out {out} names a file; --out takes a folder now "
              f"(the file is then FOLDER/{name})", file=sys.stderr)
    else:
        path = path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def add_out(p: argparse.ArgumentParser, what: str, *aliases: str, required: bool = True, default: str | None = None,
            file_suffixes: tuple[str, ...] = ()) -> None:
    """``--out DIR`` (and ``aliases``, the flag's older names); ``file_suffixes``: see :func:`out_file`."""
    kw = {"dest": aliases[0].lstrip("-").replace("-", "_")} if aliases else {}  # the dest the command reads
    older = f" ({' or '.join(aliases)}: the older name)" if aliases else ""
    shown = f" (default: {default})" if default is not None else ""
    p.add_argument("--out", *aliases, metavar="DIR", type=_out_dir_or(*file_suffixes) if file_suffixes else out_dir,
                   required=required and default is None, default=default, help=f"folder: {what}{shown}{older}",
                   **kw)


def add_tasks(p: argparse.ArgumentParser, default: str, meaning: str, extra: str = "") -> None:
    """``--tasks``, with the default of its meaning (the table in this module's docstring)."""
    p.add_argument("--tasks", default=default, metavar="SLICE",
                   help=f"{meaning}: {_SLICE}{extra} (default: {default})")


def add_model(p: argparse.ArgumentParser, help: str = MODEL_HELP) -> None:
    p.add_argument("--model", default=DEFAULT_AGENT, help=help)


def add_dtype(p: argparse.ArgumentParser, default: str | None = "float32",
              help: str = "the model's weights and activations") -> None:
    p.add_argument("--dtype", default=default, choices=DTYPES, help=help if default is None else
                   f"{help} (default: {default})")


def add_device(p: argparse.ArgumentParser, compiled: bool = False) -> None:
    """``--device``: where this command's models run (checked before anything is loaded or written); ``--forward``:
    how a step that no instrument hooks, or only the attention capture watches, runs (inherited by worker processes,
    as the device is). ``compiled``: offer ``--forward compiled`` (the commands that play episodes in batch only: a
    study that compares scores, a re-score or a head mask, must not mix compiled and eager arithmetic)."""
    from workbench.models.scoring import FORWARDS

    p.add_argument("--device", default=None, help=DEVICE_HELP)
    p.add_argument("--forward", default=None, choices=FORWARDS if compiled else tuple(f for f in FORWARDS
                                                                                       if f != "compiled"),
                   help="a step no instrument hooks, or only the attention capture watches (its read-only taps), "
                   "through the plain transformers model on the bridge's weights (auto, the default: the same scores "
                   "and rows, faster) or through the TransformerLens bridge (bridge); a head mask or a hook_pattern "
                   "reader always uses the bridge" + (
                       "; compiled: an unhooked step on the plain model with its decoder stack through torch.compile "
                       "(faster after a one-off compile per process, not eager's scores: the same bf16 action at "
                       "97.8%% of measured states; a run of its own, which a run folder played otherwise refuses to "
                       "resume)" if compiled else ""))


def add_decode(p: argparse.ArgumentParser, help: str, default: str | None = "score") -> None:
    p.add_argument("--decode", default=default, choices=DECODES, help=help)


def add_retriever(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retriever", default="minilm", choices=list_retrievers(),
                   help="how a memory base is searched (default: minilm)")


def add_backend(p: argparse.ArgumentParser, help: str, default: str | None = None) -> None:
    """``--backend NAME`` (a registered LLM backend) and its repeatable ``--backend-arg KEY=VALUE``."""
    p.add_argument("--backend", default=default, choices=list_backends(), help=help)
    p.add_argument("--backend-arg", action="append", metavar="KEY=VALUE",
                   help="an argument of --backend, e.g. base_url=http://127.0.0.1:8080/v1 (repeatable)")


def add_executor(p: argparse.ArgumentParser) -> None:
    """Where episodes are played: this process, N local worker processes, or a Ray cluster."""
    p.add_argument("--workers", type=int, help="play episodes in N worker processes (one torch thread and one "
                   "loaded model each; a local Ray instance, started and stopped here, unless --ray-address)")
    p.add_argument("--ray-address", help="run the workers on this existing Ray cluster (HOST:PORT or auto); "
                   "with --workers N, N of them (default: one per cluster CPU)")
    p.add_argument("--gpus-per-worker", type=float, default=None, metavar="N",
                   help="GPUs each Ray worker reserves (1: one 7-8B model per GPU; 0.5: two small ones); the workers "
                   "then load models on cuda")
    add_device(p, compiled=True)


def add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bar on stderr (jobs done / left, and the last episode's result)")


def add_heads(p: argparse.ArgumentParser, heads_help: str, neither: str = "") -> None:
    """Which heads: ``--heads L.H ...``, or the top ``--k`` of ``--scores``; ``neither``: what neither given means."""
    p.add_argument("--scores", metavar="FILE", help=f"{SCORES_FILE} of this model, or the folder `workbench heads "
                   f"score --out` wrote it into{neither}")
    p.add_argument("--heads", nargs="*", metavar="L.H",
                   help=f"{heads_help} as LAYER.HEAD (instead of the top --k of --scores)")
    p.add_argument("--k", type=int, default=5, help="how many of --scores' top heads (default: 5)")


def scores_file(scores: str) -> str:
    """``--scores``: a head scores file, or the folder ``heads score --out`` wrote it into."""
    return str(Path(scores) / SCORES_FILE) if Path(scores).is_dir() else scores


_HEAD_ARG = re.compile(r"^([0-9]+)\.([0-9]+)$", re.ASCII)  # LAYER.HEAD in ASCII digits (no 1_0, no Arabic-Indic)


def parse_heads(a: argparse.Namespace, shape: tuple[int, int] | None = None) -> list[tuple[int, int]] | None:
    """Heads of ``--heads L.H ...`` (None: take them from ``--scores``); checked before any model loads.

    Each head is ``LAYER.HEAD``, two non-negative decimal integers in ASCII digits below
    :data:`~workbench.attention.head_set.MAX_INDEX`; none twice; at least one when ``--heads`` is given.

    Args:
        shape: ``(n_layers, n_heads)`` of the model, when known: every head must exist in it.

    Raises:
        ValueError: a head not written LAYER.HEAD, out of range or given twice, ``--heads`` with no head, or
            neither option given.
    """
    if a.heads is not None:
        if not a.heads:
            raise ValueError("--heads: no head given; write each head as LAYER.HEAD, e.g. --heads 13.6 20.3 "
                             "(or leave --heads out)")
        heads = []
        for h in a.heads:
            m = _HEAD_ARG.match(h)
            if not m:
                raise ValueError(f"--heads {h}: write each head as LAYER.HEAD in decimal digits, e.g. 13.6")
            heads.append((int(m.group(1)), int(m.group(2))))
        return check_heads(heads, f"--heads {' '.join(a.heads)}", shape=shape)
    if not a.scores:
        raise ValueError("pass --scores (a head_scores.json from `workbench heads score`) or --heads LAYER.HEAD ...")
    return None


def heads_or_top_k(heads: list[tuple[int, int]] | None, a: argparse.Namespace,
                   model_name: str, shape: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """The parsed ``--heads``, or the top ``--k`` of ``--scores`` (which must belong to ``model_name``).

    Args:
        shape: ``(n_layers, n_heads)`` of the loaded model, when known: every head must exist in it.

    Raises:
        ValueError: ``--k`` below 1, a scores file that is malformed or of another model (naming the file and
            field), or a head the model does not have.
    """
    if heads is None:
        if a.k < 1:
            raise ValueError(f"--k {a.k}: take at least one head")
        heads = HeadScores.load(scores_file(a.scores), model_name=model_name).top_k(a.k)
    if shape is not None:
        check_heads(heads, "--heads" if a.heads else f"--scores {a.scores}", shape=shape)
    return heads


def print_summary(metrics: Mapping, first: Mapping | None = None, accuracy_only: bool = False) -> None:
    """One JSON line: ``first``, a run's headline metrics (those it has: a teacher-forcing-only run has no success
    rate) and its teacher-forced result (``accuracy_only``: just the accuracy, one number per line of a sweep)."""
    tf = metrics.get("teacher_forced")
    if accuracy_only:
        tf = (tf or {}).get("accuracy")
    print(json.dumps(dict(first or {}) | {k: metrics[k] for k in _SUMMARY if k in metrics} | {"teacher_forced": tf}))


def add_head_experiment(p: argparse.ArgumentParser, heads_help: str) -> None:
    """The options ``heads ablate`` and ``utilization`` share: the model, its tasks, and which heads."""
    add_model(p)
    add_dtype(p)
    add_device(p)
    p.add_argument("--split", default="valid_unseen")
    add_tasks(p, TF_TASKS, "the teacher-forced tasks")
    p.add_argument("--episode-tasks", default="", metavar="SLICE",
                   help=f"the episode tasks: {_SLICE} (default: none, teacher forcing only)")
    p.add_argument("--max-steps", type=int, default=50)
    add_heads(p, heads_help)
