"""Behaviour-cloning examples in exactly the agent's prompt layout, packed so one forward trains every step.

At step k of an expert trajectory the agent sees ``prefix_k + suffix`` (:class:`~workbench.prompts.layout.
PromptBuilder`) and is scored on ``action_k + <|im_end|>`` (``ActionScorer.encode_candidate``). Within one
episode the prefix only grows (memory and task fixed, history appended), so ``prefix_k`` is a prefix of
``prefix_K``. One :class:`PackedExample` holds the longest prefix once, then one *branch*
``suffix + target_k`` per step::

    [ prefix_K ............................ | suffix target_0 | suffix target_1 | ... ]
      branch k sees prefix_K[:len(prefix_k)] and itself (causally), at positions len(prefix_k), len(prefix_k)+1, ...

A 4-D attention mask and position ids make every branch see exactly what it would see alone (the same trick
the scorer uses for candidates), so a single forward gives the loss of every step for about the cost of the
last step alone. Loss is taken on the target tokens only (action tokens + ``<|im_end|>``).

Memory: most examples carry a trajectory of a *different* game of the same task type, retrieved from the
valid_train memory base as the ``traj`` policy would (MiniLM, own game excluded), picked among the top
``memory_top_k`` so the model learns to read a procedure, not one pairing; a fraction ``p_no_memory`` carry
none, so the ReAct condition stays in distribution.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from workbench.agents.loop import build_prompt
from workbench.agents.policy import MemoryBlock, replay
from workbench.memory.render import render_pieces
from workbench.memory.trajectory import MemoryEntry, Trajectory, read_jsonl
from workbench.prompts.layout import PromptBuilder

__all__ = [
    "StepTarget", "PackedExample", "PackedBatch", "MemorySampler", "encode_target", "build_examples",
    "build_policy_examples", "admissible_at",
    "pack", "unpacked_step", "imitated", "sample_negatives", "training_trajectories", "handcoded_report", "epoch_order", "HANDCODED_FILE",
]

HANDCODED_FILE = Path(__file__).resolve().parents[1] / "assets" / "alfworld" / "handcoded_valid_train.jsonl"
IGNORE = -100  # label of positions that are not trained on (torch cross_entropy's ignore_index)
# Actions kept in the history but never imitated: the handcoded searcher's "look" is its fallback when its
# proposal maps to no admissible command, "close" only undoes an "open", "inventory" changes nothing; no
# ALFWorld task needs them and each one spends a step of the 50-step budget.
NOT_IMITATED = frozenset({"look", "inventory"})
NOT_IMITATED_PREFIXES = ("close ",)


def imitated(action: str) -> bool:
    """Whether ``action`` is a training target (see ``NOT_IMITATED``)."""
    return action not in NOT_IMITATED and not action.startswith(NOT_IMITATED_PREFIXES)


@dataclass(frozen=True)
class StepTarget:
    """One supervised decision: its prompt is ``prefix[:prefix_len] + suffix``, its target the action tokens.

    ``negatives`` are other admissible commands of that step (tokens + ``<|im_end|>``), scored like the target
    for the candidate loss, which trains the agent's actual decision rule (see :func:`pack`).
    """

    prefix_len: int
    target: tuple[int, ...]  # action tokens + <|im_end|>
    action: str = ""
    negatives: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class PackedExample:
    """Every step of one trajectory (or of a run of its steps) that shares one growing prefix.

    Attributes:
        task_id: the trajectory's game.
        prefix: the longest prefix (system, memory, task, history up to the last packed step).
        suffix: end of user turn + assistant header (the same for every step).
        steps: the supervised steps, in order; ``steps[i].prefix_len <= len(prefix)``.
        memory_task_id: the game whose trajectory is the memory block (None: no memory).
        source: the expert that produced the trajectory (planner, handcoded).
    """

    task_id: str
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    steps: tuple[StepTarget, ...]
    memory_task_id: str | None = None
    source: str = ""

    @property
    def n_tokens(self) -> int:
        return len(self.prefix) + sum(_branch_len(self.suffix, s) for s in self.steps)

    @property
    def n_target_tokens(self) -> int:
        return sum(len(s.target) for s in self.steps)


def _branch_len(suffix: tuple[int, ...], s: StepTarget) -> int:
    # a negative's last token (<|im_end|>) predicts nothing, so it is not an input
    return len(suffix) + len(s.target) + sum(len(n) - 1 for n in s.negatives)


@dataclass(frozen=True)
class PackedBatch:
    """Tensors of one packed example (batch of one)."""

    input_ids: torch.Tensor  # Int[Tensor, "1 pos"]
    position_ids: torch.Tensor  # Int[Tensor, "1 pos"]
    attention_mask: torch.Tensor  # Float[Tensor, "1 1 query_pos key_pos"], additive (0 or finfo.min)
    labels: torch.Tensor  # Int[Tensor, "1 pos"]: the token position i must predict, IGNORE elsewhere
    # per step with negatives: ((positions predicting each token, tokens) of the target, then of each negative)
    candidates: tuple[tuple[tuple[tuple[int, ...], tuple[int, ...]], ...], ...] = ()


def encode_target(tokenizer: Any, action: str, end_token: str = "<|im_end|>") -> tuple[int, ...]:
    """The tokens the agent scores for ``action``: exactly ``ActionScorer.encode_candidate``."""
    ids = tokenizer(action, add_special_tokens=False).input_ids
    if end_token in tokenizer.get_vocab():
        ids = ids + [tokenizer.convert_tokens_to_ids(end_token)]
    elif tokenizer.eos_token_id is not None:
        ids = ids + [tokenizer.eos_token_id]
    return tuple(ids)


def _stable_seed(*parts: object) -> int:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:12], 16)


class MemorySampler:
    """Chooses the memory entry of one (trajectory, epoch): none, or one of the top-k retrieved.

    Args:
        retriever: a :class:`~workbench.memory.retrieval.Retriever` over the valid_train memory base; it
            never returns the query's own game and (by default) only entries of the same task type.
        p_no_memory: probability of no memory block.
        top_k: pick uniformly among this many best retrieved entries (1: always the ``traj`` policy's pick).
        seed: the choice is a pure function of (seed, task, epoch), so a resumed run sees the same data.
    """

    def __init__(self, retriever: Any, p_no_memory: float = 0.25, top_k: int = 3, seed: int = 0):
        self.retriever = retriever
        self.p_no_memory = p_no_memory
        self.top_k = top_k
        self.seed = seed

    def __call__(self, traj: Trajectory, epoch: int) -> MemoryEntry | None:
        rng = random.Random(_stable_seed(self.seed, traj.task_id, traj.source, epoch))
        if rng.random() < self.p_no_memory:
            return None
        hits = self.retriever.retrieve(traj.goal, traj.task_id, traj.task_type or None, k=self.top_k)
        return rng.choice(hits)[0] if hits else None


def admissible_at(traj: Trajectory, k: int) -> list[str]:
    """The commands admissible at step ``k``: an expert replay's ``meta["admissible"]``, or an on-policy
    rollout's per-step records (``workbench run --record-admissible``)."""
    adm = traj.meta.get("admissible")
    if adm is not None:
        return list(adm[k]) if k < len(adm) else []
    steps = traj.meta.get("steps") or []
    return list(steps[k].get("admissible", [])) if k < len(steps) else []


def sample_negatives(traj: Trajectory, k: int, n: int, seed: object = 0, target: str | None = None) -> list[str]:
    """Up to ``n`` admissible commands of step ``k`` other than the target (the expert's action by default;
    uniform, seeded per step)."""
    adm = admissible_at(traj, k)
    if n <= 0 or not adm:
        return []
    pool = sorted(set(adm) - {target or traj.steps[k].action})
    rng = random.Random(_stable_seed(seed, traj.task_id, traj.source, k))
    return rng.sample(pool, min(n, len(pool)))


def build_examples(
    traj: Trajectory,
    builder: PromptBuilder,
    memory: MemoryEntry | None = None,
    max_pack_tokens: int = 4096,
    negatives: int = 0,
    seed: object = 0,
) -> list[PackedExample]:
    """Pack the imitated steps of ``traj`` into as few examples as fit ``max_pack_tokens`` each.

    Each step is built by ``builder.build`` with the arguments the agent loop passes, so the layout is the
    agent's by construction. A step whose prefix does not extend the current example's prefix (the
    builder dropped history to fit the context) starts a new example. ``negatives`` other admissible
    commands per step (from ``traj.meta["admissible"]``, drawn with ``seed``) ride along for the candidate loss.
    """
    pieces = tuple(render_pieces(memory)) if memory is not None else ()
    return build_policy_examples(traj, builder, _FixedMemory(pieces), None, max_pack_tokens, negatives, seed,
                                 memory_id=memory.task_id if memory is not None else None)


class _FixedMemory:
    """The v1 recipe's memory as a policy: one entry's pieces (or none) at every step."""

    name = "fixed"

    def __init__(self, pieces: tuple) -> None:
        self._block = MemoryBlock(pieces=pieces)

    def begin(self, task, goal: str, room: str) -> None:
        pass

    def memory(self, step: int, history) -> Any:
        return self._block

    def observe(self, step, next_observation: str) -> None:
        pass


def build_policy_examples(
    traj: Trajectory,
    builder: PromptBuilder,
    policy: Any,
    targets: Sequence[str | None] | None = None,
    max_pack_tokens: int = 4096,
    negatives: int = 0,
    seed: object = 0,
    memory_id: str | None = None,
) -> list[PackedExample]:
    """Like :func:`build_examples`, for any memory policy: the policy is replayed along ``traj`` (as teacher
    forcing does) and each step's prompt is built by :func:`workbench.agents.loop.build_prompt`.

    Args:
        targets: the action to train at each step (an on-policy state's expert label; None: not trained);
            by default the trajectory's own (expert) actions.

    Steps whose prompts extend the previous step's prefix (ReAct-style layouts) share one packed example; a
    working-memory layout or a reminder starts a new one at each step.
    """
    # lazy: layouts.py imports this module
    from workbench.training.layouts import task_of

    tok = builder.tokenizer
    out: list[PackedExample] = []
    cur_prefix: tuple[int, ...] = ()
    cur_steps: list[StepTarget] = []
    suffix: tuple[int, ...] = ()

    def flush() -> None:
        if cur_steps:
            out.append(PackedExample(traj.task_id, cur_prefix, suffix, tuple(cur_steps), memory_id, traj.source))

    for k, step, history, block in replay(policy, task_of(traj), traj):
        action = (targets[k] if targets is not None else (step.action if imitated(step.action) else None))
        if action is not None:
            built = build_prompt(builder, block, traj.initial_observation, traj.goal, history, step.observation)
            suffix = built.suffix
            negs = tuple(encode_target(tok, a) for a in sample_negatives(traj, k, negatives, seed, target=action))
            target = StepTarget(len(built.prefix), encode_target(tok, action), action, negs)
            extends = built.prefix[: len(cur_prefix)] == cur_prefix
            branch = sum(_branch_len(suffix, s) for s in cur_steps + [target])
            if cur_steps and (not extends or len(built.prefix) + branch > max_pack_tokens):
                flush()
                cur_steps = []
            cur_prefix = built.prefix
            cur_steps.append(target)
    flush()
    return out


def pack(ex: PackedExample) -> PackedBatch:
    """The tensors of ``ex``: tokens, per-branch positions, the branch mask, labels on target tokens only."""
    P = len(ex.prefix)
    toks = list(ex.prefix)
    pos = list(range(P))
    labels = [IGNORE] * P
    n = ex.n_tokens
    allowed = torch.zeros(n, n, dtype=torch.bool)  # [query_pos, key_pos]
    allowed[:P, :P] = torch.ones(P, P, dtype=torch.bool).tril()
    cands = []
    for s in ex.steps:
        branch = list(ex.suffix) + list(s.target)
        start, L = len(toks), len(branch)
        allowed[start:start + L, : s.prefix_len] = True
        allowed[start:start + L, start:start + L] = torch.ones(L, L, dtype=torch.bool).tril()
        toks.extend(branch)
        pos.extend(range(s.prefix_len, s.prefix_len + L))
        # position i predicts token i+1: the last suffix token (q_t) predicts target[0], ..., target[-2]
        # predicts target[-1] (<|im_end|>); target[-1] predicts nothing.
        lab = [IGNORE] * L
        for j, t in enumerate(s.target):
            lab[len(ex.suffix) - 1 + j] = t
        labels.extend(lab)
        if not s.negatives:
            continue
        q = start + len(ex.suffix) - 1  # q_t of this step, shared by every candidate
        step_cands = [(tuple(range(q, q + len(s.target))), s.target)]
        for neg in s.negatives:
            # a negative hangs off this step's suffix like a trie branch: it sees prefix_k, the suffix and
            # itself, at the positions it would have alone (what the scorer does for every candidate)
            nstart, nL = len(toks), len(neg) - 1
            allowed[nstart:nstart + nL, : s.prefix_len] = True
            allowed[nstart:nstart + nL, start:start + len(ex.suffix)] = True
            allowed[nstart:nstart + nL, nstart:nstart + nL] = torch.ones(nL, nL, dtype=torch.bool).tril()
            toks.extend(neg[:-1])
            pos.extend(range(s.prefix_len + len(ex.suffix), s.prefix_len + len(ex.suffix) + nL))
            labels.extend([IGNORE] * nL)
            step_cands.append(((q,) + tuple(range(nstart, nstart + nL)), neg))
        cands.append(tuple(step_cands))
    mask = torch.zeros(n, n)
    mask.masked_fill_(~allowed, torch.finfo(torch.float32).min)
    return PackedBatch(
        input_ids=torch.tensor([toks]), position_ids=torch.tensor([pos]),
        attention_mask=mask[None, None], labels=torch.tensor([labels]), candidates=tuple(cands),
    )


def unpacked_step(ex: PackedExample, i: int) -> tuple[list[int], list[int]]:
    """(tokens, labels) of step ``i`` alone, ``prefix_i + suffix + target_i``: what packing must equal."""
    s = ex.steps[i]
    toks = list(ex.prefix[: s.prefix_len]) + list(ex.suffix) + list(s.target)
    labels = [IGNORE] * len(toks)
    base = s.prefix_len + len(ex.suffix) - 1
    for j, t in enumerate(s.target):
        labels[base + j] = t
    return toks, labels


def training_trajectories(
    planner: Sequence[Trajectory], handcoded_path: str | Path | None = HANDCODED_FILE
) -> list[Trajectory]:
    """Successful planner trajectories plus successful handcoded-search ones (when the file exists).

    Both come from the valid_train split only; the handcoded runs add realistic search (opening and looking
    into receptacles) that the omniscient planner never shows.
    """
    out = [t for t in planner if t.success and t.steps]
    if handcoded_path is not None and Path(handcoded_path).exists():
        out += [t for t in read_jsonl(handcoded_path, Trajectory) if t.success and t.steps]
    bad = sorted({t.split for t in out} - {"valid_train", ""})
    if bad:
        raise ValueError(f"training trajectories must come from valid_train only, got split(s) {bad}")
    return out


def handcoded_report(path: str | Path = HANDCODED_FILE) -> dict:
    """Success of the handcoded expert over every task of its file: won, total, rate, first-try wins."""
    trajs = read_jsonl(path, Trajectory)
    won = sum(t.success for t in trajs)
    first = sum(t.success and t.meta.get("seed") == 0 for t in trajs)
    return {"won": won, "total": len(trajs), "success_rate": round(won / max(1, len(trajs)), 4),
            "first_try_won": first, "mean_steps_won": round(sum(t.n_steps for t in trajs if t.success) / max(1, won), 2)}


def epoch_order(n: int, epoch: int, seed: int) -> list[int]:
    """The order in which epoch ``epoch`` visits ``n`` trajectories (a pure function, for resuming)."""
    order = list(range(n))
    random.Random(_stable_seed(seed, "order", epoch)).shuffle(order)
    return order

