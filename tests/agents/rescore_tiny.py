"""Builders for the re-score tests: a tiny random Llama with SmolLM2's tokenizer and a planted memory-copying head,
a working-memory policy that can re-assemble its block, a scripted room and a recorded episode in it.

The planted head (layer 0, query head ``PLANTED``) attends from every query to the tokens of the place words
(`` safe``, `` box``, ... as they appear inside a sentence) and copies *which* word it found: its value reads the
word's one-hot code in the residual stream and its output writes the code back, where the unembedding row of the
bare word (``safe``: what a candidate command starts with) reads it. So a memory item that names a place raises
the candidate of that place, and nothing else in the prompt names one. The query and key use the slowest RoPE pair
(dims d/2-1 and d-1 of the head: ~3e-4 rad per position), so the plant holds at every position of these prompts.
Every other weight keeps its small random init (std 0.02), which moves the candidates' scores far less.
"""

from __future__ import annotations

import os
from dataclasses import replace

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from workbench.agents.policy import MemoryBlock
from workbench.envs.base import StepResult, Task
from workbench.memory.trajectory import Step, Trajectory
from workbench.prompts.working_memory import WMPiece

N_LAYERS, N_HEADS, N_KV_HEADS, D_MODEL = 2, 4, 2, 64
D_HEAD = D_MODEL // N_HEADS
PLANTED = (0, 2)  # (layer, head_index); key/value head 1
PLACES = ("safe", "box", "bed", "table", "door")  # one token each, bare and after a space, in SmolLM2's vocabulary
CODE0 = 4  # residual dims CODE0..CODE0+len(PLACES)-1: the place words' one-hot codes
GAIN = 0.6  # unembedding weight on the code: how strongly a copied place raises its candidate

ROOM = "You are in a small room."
GOAL = "find the key."
TASK = Task(task_id="valid_unseen/key/t1", split="valid_unseen", task_type="find", path="/nonexistent")
ANSWER = "safe"

# (bank, id, focal text, ambient text, gate band); only R1 names a place, and only in its focal text
ITEMS = (
    ("reference", "R1", "The key is in the safe.", "The key is hidden somewhere.", "F"),
    ("reference", "R2", "The room has a window.", "One window.", "A"),
    ("episodic", "E1", "You are carrying nothing.", "Hands empty.", "F"),
    ("episodic", "E2", "You looked around once.", "Looked around.", "H"),
)


def place_ids(tokenizer) -> tuple[list[int], list[int]]:
    """(bare ids, spaced ids) of :data:`PLACES`."""
    bare = [tokenizer(w, add_special_tokens=False).input_ids for w in PLACES]
    spaced = [tokenizer(" " + w, add_special_tokens=False).input_ids for w in PLACES]
    assert all(len(t) == 1 for t in bare + spaced), "each place must be one token, bare and spaced"
    return [t[0] for t in bare], [t[0] for t in spaced]


def _plant(model, tokenizer) -> None:
    layer, head = PLANTED
    kv = head // (N_HEADS // N_KV_HEADS)
    j = D_HEAD // 2 - 1  # slowest RoPE pair: (j, j + d/2)
    bare, spaced = place_ids(tokenizer)
    attn = model.model.layers[layer].self_attn
    with torch.no_grad():
        emb = model.model.embed_tokens.weight  # [vocab, d_model]
        emb[:, 0] = 1.0  # a direction every token carries: the planted query reads it
        emb[:, 1] = 0.0
        emb[:, CODE0:CODE0 + len(PLACES)] = 0.0
        for i, t in enumerate(spaced):
            emb[t, 1] = 1.0  # the flag the planted key reads
            emb[t, CODE0 + i] = 1.0  # which place: the planted value reads it
        attn.q_proj.weight[head * D_HEAD:(head + 1) * D_HEAD] = 0.0
        attn.q_proj.weight[head * D_HEAD + j, 0] = 2.0
        attn.k_proj.weight[kv * D_HEAD:(kv + 1) * D_HEAD] = 0.0
        attn.k_proj.weight[kv * D_HEAD + j, 1] = 1.0
        attn.v_proj.weight[kv * D_HEAD:(kv + 1) * D_HEAD] = 0.0
        attn.o_proj.weight[:, head * D_HEAD:(head + 1) * D_HEAD] = 0.0
        for i in range(len(PLACES)):
            attn.v_proj.weight[kv * D_HEAD + i, CODE0 + i] = 1.0
            attn.o_proj.weight[CODE0 + i, head * D_HEAD + i] = 1.0
        unembed = model.lm_head.weight  # [vocab, d_model]
        unembed[:, CODE0:CODE0 + len(PLACES)] = 0.0
        for i, t in enumerate(bare):
            unembed[t, CODE0 + i] = GAIN  # the bare word (a candidate's first token) reads its code


def build_copy_lm():
    """The tiny Llama with SmolLM2's tokenizer and chat template, head ``PLANTED`` copying places to the answer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from workbench.models.loading import _dequantized_dir, wrap
    from workbench.models.registry import get_model_spec

    tok = AutoTokenizer.from_pretrained(_dequantized_dir(get_model_spec("smollm2-135m-instruct")))
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=D_MODEL, intermediate_size=2 * D_MODEL,
                      num_hidden_layers=N_LAYERS, num_attention_heads=N_HEADS, num_key_value_heads=N_KV_HEADS,
                      max_position_embeddings=4096)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    _plant(model, tok)
    return wrap(model, tok, name="tiny-copy", hf_id="meta-llama/Llama-3.2-1B")


class ToyWorkingMemory:
    """A working-memory policy with fixed items and gate bands that can re-assemble its block (``reassemble``).

    Shown: F items with their focal text, then A items with their ambient text, bank by bank; H items are out and a
    bank with nothing shown loses its header. ``budget`` (items) cuts the last shown items, as a token budget would.
    """

    name = "toy-wm"

    def __init__(self, items=ITEMS, reminder: str | None = None, budget: int = 10) -> None:
        self.items, self.reminder, self.budget = items, reminder, budget
        self._decided: int | None = None

    def begin(self, task, goal: str, room: str) -> None:
        self._decided = None

    def memory(self, step: int, history) -> MemoryBlock:
        self._decided = step
        return self._assemble({})

    def observe(self, step, next_observation: str) -> None:
        self._decided = None

    def reassemble(self, bands) -> MemoryBlock:
        if self._decided is None:
            raise RuntimeError("reassemble() needs a decided step")
        known = {i for _, i, *_ in self.items}
        for item in bands:
            if item not in known:
                raise KeyError(f"no active item {item} at this step")
        return replace(self._assemble(dict(bands)), reminder=None)  # the working memory only, as MemArbiter's

    def _assemble(self, moved: dict) -> MemoryBlock:
        shown = []
        for bank, item, focal, ambient, band in self.items:
            band = moved.get(item, band)
            if band != "H":
                shown.append((bank, item, focal if band == "F" else ambient, band))
        shown = shown[:self.budget]
        pieces = [WMPiece("wm_open", "Working memory:\n")]
        for bank in dict.fromkeys(b for b, *_ in self.items):
            mine = sorted((s for s in shown if s[0] == bank), key=lambda s: s[3] != "F")
            if mine:
                pieces.append(WMPiece("wm_bank", f"{bank.capitalize()}:\n", bank=bank))
                pieces += [WMPiece("wm_item", f"- {text}\n", item=i, bank=b, band=band) for b, i, text, band in mine]
        pieces.append(WMPiece("wm_close", "(End of working memory.)\n"))
        return MemoryBlock(layout="working_memory", working_memory=tuple(pieces), reminder=self.reminder)


class Shows:
    """A policy that shows one given block and cannot re-assemble it."""

    name = "shows"

    def __init__(self, block: MemoryBlock) -> None:
        self.block = block

    def begin(self, task, goal, room):
        pass

    def memory(self, step, history):
        return self.block

    def observe(self, step, next_observation):
        pass


class KeyRoom:
    """A room where nothing the agent does changes anything (every candidate admissible at every step)."""

    name = "key-room"

    def __init__(self, max_steps: int = 3) -> None:
        self.max_steps = max_steps

    def reset(self, task) -> StepResult:
        self.turn = 0
        return StepResult(f"{ROOM}\n\nYour task is to: {GOAL}", 0.0, False, False, PLACES)

    def step(self, action: str) -> StepResult:
        self.turn += 1
        return StepResult(_nothing(self.turn), 0.0, False, False, PLACES)

    def close(self) -> None:
        pass


def _nothing(turn: int) -> str:
    return f"Nothing happens at turn {turn}."  # a different o_t at every step: a replay one step off shows


def episode(n_steps: int = 3) -> Trajectory:
    """A recorded episode in :class:`KeyRoom` (built directly: no agent played it)."""
    steps = tuple(Step(observation=f"{ROOM}\n\nYour task is to: {GOAL}" if k == 0 else _nothing(k),
                       action=PLACES[(k + 1) % len(PLACES)]) for k in range(n_steps))
    return Trajectory(task_id=TASK.task_id, task_type=TASK.task_type, goal=GOAL, initial_observation=ROOM,
                      steps=steps, success=False, source="test", split=TASK.split,
                      meta={"final_observation": _nothing(n_steps), "admissible": [list(PLACES)] * n_steps})
