"""Training data: the agent's exact layout, a loss mask on the action tokens only, packing that changes
nothing, and memory that never comes from the trajectory's own game."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from training_builders import make_memory, make_traj, tiny_llama

from workbench.memory import MemoryBase
from workbench.memory.render import render_pieces
from workbench.memory.retrieval import get_retriever
from workbench.memory.task_info import game_key
from workbench.models.scoring import ActionScorer
from workbench.prompts.layout import PromptBuilder
from workbench.training.data import (
    IGNORE,
    MemorySampler,
    build_examples,
    pack,
    training_trajectories,
    unpacked_step,
)
from workbench.training.trainer import example_loss


@pytest.fixture(scope="module")
def builder(smol_tokenizer):
    return PromptBuilder(smol_tokenizer, 8192)


@pytest.mark.parametrize("with_memory", [True, False])
def test_each_step_is_exactly_the_agent_prompt_plus_the_scored_action(builder, smol_tokenizer, with_memory):
    traj, mem = make_traj(), make_memory()
    exs = build_examples(traj, builder, mem if with_memory else None)
    assert len(exs) == 1 and len(exs[0].steps) == traj.n_steps
    scorer = ActionScorer(SimpleNamespace(tokenizer=smol_tokenizer))
    pieces = tuple(render_pieces(mem)) if with_memory else None  # what RetrievedTrajectory puts in the prompt
    for k, step in enumerate(traj.steps):
        # the agent loop's call (workbench/agents/loop.py): history so far, the last observation
        prompt = builder.build(traj.initial_observation, traj.goal, list(traj.steps[:k]), memory=pieces,
                               final_observation=step.observation if k else None)
        toks, labels = unpacked_step(exs[0], k)
        target = scorer.encode_candidate(step.action)
        assert toks == prompt.tokens + target
        assert smol_tokenizer.decode(target[-1:]) == "<|im_end|>"
        assert [t for t in labels if t != IGNORE] == target
    text = smol_tokenizer.decode(unpacked_step(exs[0], 3)[0])
    assert ("Here is a solved example" in text) == with_memory and text.endswith("<|im_end|>")


def test_loss_mask_covers_exactly_the_action_tokens_and_im_end(builder, smol_tokenizer):
    traj = make_traj()
    ex = build_examples(traj, builder, make_memory())[0]
    b = pack(ex)
    ids, labels = b.input_ids[0].tolist(), b.labels[0].tolist()
    marked = [i for i, t in enumerate(labels) if t != IGNORE]
    assert len(marked) == ex.n_target_tokens == sum(len(s.target) for s in ex.steps)
    assert [labels[i] for i in marked] == [t for s in ex.steps for t in s.target]
    # a labelled position predicts the very next token of its branch, and only action/<|im_end|> tokens are
    # labelled: the decoded labels are the actions, each closed by <|im_end|>
    assert all(ids[i + 1] == labels[i] for i in marked)
    decoded = smol_tokenizer.decode([labels[i] for i in marked])
    assert decoded == "".join(f"{s.action}<|im_end|>" for s in traj.steps)
    assert len(ids) == ex.n_tokens


def test_packed_forward_equals_one_forward_per_step(builder, smol_tokenizer):
    """Every branch sees exactly its own prompt: packed NLL per step = the NLL of the step alone."""
    traj = make_traj()
    ex = build_examples(traj, builder, make_memory())[0]
    for attn in ("eager", "sdpa"):
        model = tiny_llama(smol_tokenizer, attn)
        with torch.no_grad():
            packed, n = example_loss(model, ex)
            alone = 0.0
            for k in range(len(ex.steps)):
                toks, labels = unpacked_step(ex, k)
                logits = model(torch.tensor([toks])).logits[0]
                lab = torch.tensor(labels)
                sel = lab != IGNORE
                alone += torch.nn.functional.cross_entropy(logits[sel], lab[sel], reduction="sum").item()
        assert n == ex.n_target_tokens
        assert abs(packed.item() - alone) < 1e-4 * n, (attn, packed.item(), alone)


def test_long_trajectories_are_split_into_packs_that_fit(builder):
    traj = make_traj()
    one = build_examples(traj, builder, make_memory())[0]
    exs = build_examples(traj, builder, make_memory(), max_pack_tokens=one.n_tokens - 60)
    assert len(exs) >= 2 and all(e.n_tokens <= one.n_tokens - 60 for e in exs)
    assert [s for e in exs for s in e.steps] == list(one.steps)


def test_memory_is_never_the_trajectorys_own_game(tmp_path):
    own = "valid_train/pick_clean_then_place_in_recep-Apple-None-Fridge-1/trial_T1"
    base = MemoryBase(tmp_path / "mb")
    entries = [make_memory(own)]  # the same game: must never be shown
    entries.append(make_memory(own.replace("valid_train", "json_2.1.1/valid_train")).model_copy(
        update={"entry_id": "same-game-other-prefix"}))
    for i in range(4):
        entries.append(make_memory(f"valid_train/pick_clean_then_place_in_recep-Mug-None-Shelf-{i}/trial_T{i}"))
    other = make_memory("valid_train/pick_heat_then_place_in_recep-Egg-None-Fridge-3/trial_T7")
    entries.append(other.model_copy(update={"task_type": "heat", "goal": "put a clean apple in fridge."}))
    base.add_many([e.model_copy(update={"entry_id": e.entry_id or e.task_id}) for e in entries])
    sampler = MemorySampler(get_retriever("bm25", base), p_no_memory=0.25, top_k=3, seed=0)
    traj = make_traj(own)
    picks = [sampler(traj, epoch) for epoch in range(200)]
    shown = [m for m in picks if m is not None]
    assert all(game_key(m.task_id) != game_key(own) for m in shown)
    assert all(m.task_type == "clean" for m in shown)
    assert 0.15 < 1 - len(shown) / len(picks) < 0.35
    assert len({m.task_id for m in shown}) == 3  # drawn among the top 3
    assert picks == [sampler(traj, epoch) for epoch in range(200)]  # a pure function of (seed, task, epoch)


def test_training_data_is_valid_train_only():
    with pytest.raises(ValueError, match="valid_train only"):
        training_trajectories([make_traj("valid_unseen/pick_clean_then_place_in_recep-Apple-None-Fridge-1/t1")],
                              handcoded_path=None)
    assert len(training_trajectories([make_traj(), make_traj(success=False)], handcoded_path=None)) == 1


def test_search_noise_stays_in_the_history_but_is_not_imitated(builder):
    from workbench.memory import Step

    traj = make_traj()
    steps = list(traj.steps)
    steps.insert(1, Step(observation=steps[1].observation, action="look"))
    steps.insert(2, Step(observation="You are facing the countertop 1.", action="close drawer 1"))
    noisy = traj.model_copy(update={"steps": tuple(steps), "source": "handcoded"})
    ex = build_examples(noisy, builder, None)[0]
    assert [s.action for s in ex.steps] == traj.actions()
    assert "> look\n" in builder.tokenizer.decode(ex.prefix) and "> close drawer 1\n" in builder.tokenizer.decode(ex.prefix)


def test_negatives_are_scored_exactly_as_the_agent_scores_candidates(builder, smol_tokenizer):
    """Candidate scores from the packed forward = ActionScorer's mean log-prob per token, step by step."""
    from workbench.models.loading import wrap
    from workbench.training.trainer import example_losses

    traj = make_traj()
    ex = build_examples(traj, builder, make_memory(), negatives=4, seed=0)[0]
    assert all(len(s.negatives) == 4 for s in ex.steps)
    lm = wrap(tiny_llama(smol_tokenizer), smol_tokenizer, name="tiny", hf_id="meta-llama/Llama-3.2-1B")
    scorer = ActionScorer(lm, reuse_cache=False)
    with torch.no_grad():
        out = example_losses(lm.hf_model, ex)
    assert out.n_cand_steps == len(ex.steps)
    for k, (s, packed) in enumerate(zip(ex.steps, out.scores)):
        names = [s.action] + [smol_tokenizer.decode(n[:-1]) for n in s.negatives]
        assert all(n in traj.meta["admissible"][k] for n in names)
        alone = scorer.score(list(ex.prefix[: s.prefix_len]), list(ex.suffix), names).scores
        assert max(abs(a - b) for a, b in zip(alone, packed)) < 1e-4, (k, alone, packed)
    # the negatives change nothing for the expert tokens' loss
    plain = build_examples(traj, builder, make_memory())[0]
    with torch.no_grad():
        assert abs(example_losses(lm.hf_model, plain).nll.item() - out.nll.item()) < 1e-3


def test_negatives_are_other_admissible_commands_drawn_per_step(builder):
    traj = make_traj()
    from workbench.training.data import sample_negatives

    for k, step in enumerate(traj.steps):
        negs = sample_negatives(traj, k, 3, seed=(0, 1))
        assert len(negs) == 3 and step.action not in negs and set(negs) <= set(traj.meta["admissible"][k])
        assert negs == sample_negatives(traj, k, 3, seed=(0, 1))
    assert sample_negatives(traj.model_copy(update={"meta": {}}), 0, 3) == []
    assert any(sample_negatives(traj, k, 3, seed=(0, 1)) != sample_negatives(traj, k, 3, seed=(0, 2))
               for k in range(traj.n_steps))
