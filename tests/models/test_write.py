"""The constrained decode: writing an action along the candidates' token trie (a beam search) ranks candidates as
scoring them all does, and leaves the KV cache as scoring does."""

import pytest

from workbench.models.scoring import ActionScorer


def _prompt(tok):
    prefix = tok("You are in a kitchen. Your task is to: put a clean apple in fridge.").input_ids
    suffix = tok("<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False).input_ids
    return prefix, suffix


CANDS = ["go to fridge 1", "go to fridge 10", "go to countertop 1", "take apple 1 from countertop 1", "look",
         "open fridge 1", "go to sinkbasin 1", "examine countertop 1"]


def test_a_beam_as_wide_as_the_candidates_scores_every_candidate_as_score_does(tiny_lm):
    prefix, suffix = _prompt(tiny_lm.tokenizer)
    scorer = ActionScorer(tiny_lm)
    ref = scorer.score(prefix, suffix, CANDS)
    w = scorer.write(prefix, suffix, CANDS, beam=len(CANDS))
    assert sorted(w.scores) == list(range(len(CANDS)))
    assert max(abs(w.scores[k] - ref.scores[k]) for k in w.scores) < 1e-5
    assert w.best == ref.best
    # one forward per depth of the deepest candidate (its tokens and end token)
    assert w.forwards == max(len(scorer.encode_candidate(c)) for c in CANDS)


@pytest.mark.parametrize("beam", [1, 2, 3])
def test_a_narrow_beam_writes_a_candidate_and_scores_what_it_finished(tiny_lm, beam):
    prefix, suffix = _prompt(tiny_lm.tokenizer)
    scorer = ActionScorer(tiny_lm)
    ref = scorer.score(prefix, suffix, CANDS)
    w = scorer.write(prefix, suffix, CANDS, beam=beam)
    assert w.best in w.scores and 1 <= len(w.scores) <= len(CANDS)
    for k, s in w.scores.items():  # a finished candidate's score is its full score
        assert s == pytest.approx(ref.scores[k], abs=1e-5)
    assert w.scores[w.best] == max(w.scores.values())


def test_a_candidate_that_is_a_prefix_of_another_is_scored_with_its_end_token(tiny_lm):
    prefix, suffix = _prompt(tiny_lm.tokenizer)
    scorer = ActionScorer(tiny_lm)
    cands = ["go to fridge 1", "go to fridge 1 then look"]
    ref = scorer.score(prefix, suffix, cands)
    w = scorer.write(prefix, suffix, cands, beam=2)
    assert w.scores[0] == pytest.approx(ref.scores[0], abs=1e-5)
    assert w.scores[1] == pytest.approx(ref.scores[1], abs=1e-5)


def test_writing_keeps_the_prompt_prefix_cached_as_scoring_does(tiny_lm):
    prefix, suffix = _prompt(tiny_lm.tokenizer)
    scorer, fresh = ActionScorer(tiny_lm), ActionScorer(tiny_lm, reuse_cache=False)
    first = scorer.write(prefix, suffix, CANDS, beam=2)
    again = scorer.write(prefix, suffix, CANDS, beam=2)
    assert again.reused_tokens == len(prefix) - 1 and first.reused_tokens == 0
    assert again.best == first.best
    longer = prefix + tiny_lm.tokenizer(" You open the fridge 1.", add_special_tokens=False).input_ids
    a = scorer.score(longer, suffix, CANDS)
    b = fresh.score(longer, suffix, CANDS)
    assert a.reused_tokens == len(prefix)
    assert max(abs(x - y) for x, y in zip(a.scores, b.scores)) < 1e-5


def test_hooks_watch_the_first_forward_only(tiny_lm):
    prefix, suffix = _prompt(tiny_lm.tokenizer)
    scorer = ActionScorer(tiny_lm)
    layouts, calls = [], []
    hook = ("blocks.0.attn.hook_pattern", lambda x, hook: calls.append(x.shape) or x)
    w = scorer.write(prefix, suffix, CANDS, beam=2, hooks=[hook], on_layout=layouts.append)
    assert len(layouts) == 1 and len(calls) == 1 and w.forwards > 1
    assert layouts[0].query_index == len(prefix) + len(suffix) - 1


def test_bad_arguments_are_clear_errors(tiny_lm):
    prefix, suffix = _prompt(tiny_lm.tokenizer)
    scorer = ActionScorer(tiny_lm)
    with pytest.raises(ValueError, match="no candidate"):
        scorer.write(prefix, suffix, [])
    with pytest.raises(ValueError, match="beam 0"):
        scorer.write(prefix, suffix, CANDS, beam=0)
    with pytest.raises(ValueError, match="suffix"):
        scorer.write(prefix, [], CANDS)
