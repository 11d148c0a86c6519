"""Builders for the training tests: ALFWorld-like trajectories and a tiny trainable Llama."""

from __future__ import annotations

from typing import Any

import torch

from workbench.memory import MemoryEntry, Step, Trajectory

ROOM = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, "
        "a fridge 1, and a sinkbasin 1.")
STEPS = [
    ("go to countertop 1", "On the countertop 1, you see a apple 1, and a knife 2."),
    ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
    ("go to sinkbasin 1", "On the sinkbasin 1, you see nothing."),
    ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
    ("go to fridge 1", "The fridge 1 is closed."),
    ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see nothing."),
    ("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1."),
]


def make_traj(task_id: str = "valid_train/pick_clean_then_place_in_recep-Apple-None-Fridge-1/trial_T1",
              n_steps: int = 7, source: str = "planner", **overrides: Any) -> Trajectory:
    obs = [ROOM] + [o for _, o in STEPS[:n_steps]]
    steps = tuple(Step(observation=obs[k], action=a) for k, (a, _) in enumerate(STEPS[:n_steps]))
    places = ["go to cabinet 1", "go to countertop 1", "go to fridge 1", "go to sinkbasin 1", "look", "inventory"]
    admissible = [sorted(set(places + [a, "examine countertop 1", "take knife 2 from countertop 1"]))
                  for a, _ in STEPS[:n_steps]]
    fields: dict[str, Any] = dict(task_id=task_id, task_type="clean", goal="put a clean apple in fridge.",
                                  initial_observation=ROOM, steps=steps, success=True, source=source,
                                  split=task_id.split("/")[0],
                                  meta={"final_observation": obs[-1], "admissible": admissible})
    fields.update(overrides)
    return Trajectory(**fields)


def make_memory(task_id: str = "valid_train/pick_clean_then_place_in_recep-Tomato-None-Fridge-2/trial_T9"):
    t = make_traj(task_id=task_id, n_steps=7)
    return MemoryEntry.from_trajectory(t)


def tiny_llama(tokenizer, attn: str = "eager", seed: int = 0):
    """A 2-layer random Llama over the real vocabulary (fast enough to train for a few steps)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      tie_word_embeddings=True, initializer_range=0.2, attn_implementation=attn)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()
