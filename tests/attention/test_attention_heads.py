"""Retrieval-head scoring: the planted head scores highest; scores round-trip through JSON."""

from __future__ import annotations

import random

import pytest
import torch
from attention_tiny import MARKERS, N_HEADS, N_LAYERS, PLANTED, plain_tokens

from workbench.attention import HeadScores, score_heads


def _supervision_pairs(n: int, rng: random.Random) -> list[tuple[list[int], list[int]]]:
    pairs = []
    for _ in range(n):
        tokens = plain_tokens(rng.randrange(20, 40), rng)
        positions = sorted(rng.sample(range(len(tokens) - 1), 3))
        for p in positions:
            tokens[p] = rng.choice(MARKERS)
        pairs.append((tokens, positions))
    return pairs


def test_planted_head_scores_highest(tiny_lm):
    scores = score_heads(tiny_lm, _supervision_pairs(6, random.Random(0)), progress=False)
    assert scores.scores.shape == (N_LAYERS, N_HEADS)
    assert scores.n_pairs == 6 and scores.model_name == "tiny-llama"
    assert scores.top_k(1) == [PLANTED]
    assert scores.scores[PLANTED] > 0.99 * 6  # nearly all of its attention, on every pair
    runner_up = scores.scores.flatten().sort(descending=True).values[1]
    assert scores.scores[PLANTED] > 2 * runner_up
    assert scores.head_set(3).heads[0] == PLANTED


def test_top_k_breaks_ties_by_layer_then_head():
    s = HeadScores("m", torch.tensor([[1.0, 3.0, 3.0], [3.0, 0.0, 2.0]]), n_pairs=1)
    assert s.top_k(4) == [(0, 1), (0, 2), (1, 0), (1, 2)]


def test_save_load_round_trip_and_model_check(tmp_path):
    s = HeadScores("smollm2-135m-instruct", torch.rand(3, 4), n_pairs=7)
    path = s.save(tmp_path / "heads" / "scores.json")
    back = HeadScores.load(path, model_name="smollm2-135m-instruct")
    torch.testing.assert_close(back.scores, s.scores)
    assert back.n_pairs == 7 and back.top_k(5) == s.top_k(5)
    with pytest.raises(ValueError, match="model_name"):
        HeadScores.load(path, model_name="qwen2.5-7b")
    (tmp_path / "bad.json").write_text('{"model_name": "m", "n_layers": 2, "n_heads": 2, "n_pairs": 1, '
                                       '"scores": [[1.0, 2.0]]}')
    with pytest.raises(ValueError, match="bad.json"):
        HeadScores.load(tmp_path / "bad.json")


def test_pairs_are_validated(tiny_lm):
    with pytest.raises(ValueError, match="pair 0"):
        score_heads(tiny_lm, [([6, 7, 8], [3])], progress=False)
    with pytest.raises(ValueError, match="non-empty"):
        score_heads(tiny_lm, [([6, 7, 8], [])], progress=False)


# ---- strict heads files and --heads (issue 43) ----

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

from workbench.attention import heads as heads_module  # noqa: E402
from workbench.attention.head_set import MAX_INDEX, HeadSet, check_heads  # noqa: E402
from workbench.attention.heads import (  # noqa: E402
    HEADS_ASSETS,
    default_retrieval_heads,
    read_retrieval_heads,
    save_default_retrieval_heads,
)
from workbench.cli._options import heads_or_top_k, parse_heads  # noqa: E402
from workbench.files import FormatError  # noqa: E402


def test_every_committed_heads_file_loads():
    files = sorted(HEADS_ASSETS.glob("*.json"))
    assert files
    for path in files:
        heads = default_retrieval_heads(path.stem)
        assert heads and len(set(heads)) == len(heads)
        assert all(isinstance(x, int) and not isinstance(x, bool) for h in heads for x in h)


def _heads_file(tmp_path, text: str, name: str = "smollm2-135m-alfworld"):
    folder = tmp_path / "heads"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(text)
    return path


def _good(**changes) -> str:
    return json.dumps({"model": "smollm2-135m-alfworld", "heads": [[20, 5], [24, 1]], "source": "test"} | changes)


@pytest.mark.parametrize(("text", "expected"), [
    ('[[20, 5]]', "holds a JSON list"),
    ('{"model": "smollm2-135m-alfworld", "source": "s"}', "field 'heads': Field required"),
    (_good(heads=None), "field 'heads'"),
    (_good(heads=[[20, None]]), "field 'heads.0.1'"),
    ('{"model": "smollm2-135m-alfworld", "source": "s", "heads": [[20, Infinity]]}', "Infinity"),
    ('{"model": "smollm2-135m-alfworld", "source": "s", "heads": [[20, NaN]]}', "NaN"),
    (_good(heads=[]), "field 'heads': List should have at least 1 item"),
    (_good(heads=[[-1, -5]]), "field 'heads.0.0': Input should be greater than or equal to 0"),
    (_good(heads=[[1e9, 1e9]]), "field 'heads.0.0'"),
    (_good(heads=[[10**9, 3]]), "field 'heads.0.0': Input should be less than 4096"),
    (_good(heads=[[20.7, 3.2]]), "field 'heads.0.0': Input should be a valid integer"),
    (_good(heads=[[20.0, 3]]), "field 'heads.0.0': Input should be a valid integer"),
    (_good(heads=[["20", "3"]]), "field 'heads.0.0': Input should be a valid integer"),
    (_good(heads=[[True, False]]), "field 'heads.0.0': Input should be a valid integer"),
    (_good(heads=[[20, 3, 1]]), "field 'heads.0'"),
    (_good(heads=[[20, 3], [24, 1], [20, 3]]), "duplicate head [20, 3]: it appears twice (entries 0 and 2)"),
    (_good(extra=1), "field 'extra': Extra inputs are not permitted"),
    (_good(model="qwen"), "field 'model' is 'qwen', expected 'smollm2-135m-alfworld'"),
    ('{"model": "smollm2-135m-alfworld", "model": "x", "heads": [[1, 2]], "source": "s"}', "appears twice"),
    ("", "empty"),
])
def test_malformed_heads_files_name_file_and_field(tmp_path, monkeypatch, text, expected):
    path = _heads_file(tmp_path, text)
    monkeypatch.setattr(heads_module, "HEADS_ASSETS", path.parent)
    with pytest.raises(FormatError) as info:
        default_retrieval_heads("smollm2-135m-alfworld")
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_heads_file_that_is_a_directory_loop_or_bad_utf8(tmp_path, monkeypatch):
    folder = tmp_path / "heads"
    folder.mkdir()
    monkeypatch.setattr(heads_module, "HEADS_ASSETS", folder)
    (folder / "a.json").mkdir()
    with pytest.raises(FormatError, match=r"a\.json: is a directory"):
        default_retrieval_heads("a")
    os.symlink(folder / "b.json", folder / "b.json")
    with pytest.raises(FormatError, match=r"b\.json: a symlink loop"):
        default_retrieval_heads("b")
    (folder / "c.json").write_bytes(b'{"model": "c\xff"}')
    with pytest.raises(FormatError, match=r"c\.json: line 1: not UTF-8"):
        default_retrieval_heads("c")
    with pytest.raises(FileNotFoundError, match="no committed retrieval heads"):
        default_retrieval_heads("d")


def test_default_heads_are_checked_against_the_model_shape(tmp_path, monkeypatch):
    path = _heads_file(tmp_path, _good())
    monkeypatch.setattr(heads_module, "HEADS_ASSETS", path.parent)
    assert default_retrieval_heads("smollm2-135m-alfworld", shape=(30, 9)) == [(20, 5), (24, 1)]
    with pytest.raises(FormatError, match=r"smollm2-135m-alfworld\.json: field 'heads': heads \[\(24, 1\)\] do not "):
        default_retrieval_heads("smollm2-135m-alfworld", shape=(24, 9))


def test_save_default_refuses_bad_heads_and_reads_the_old_file_strictly(tmp_path):
    name = "smollm2-135m-alfworld"
    with pytest.raises(ValueError, match="no heads"):
        save_default_retrieval_heads(name, [], "s", folder=tmp_path)
    with pytest.raises(ValueError, match="appears twice"):
        save_default_retrieval_heads(name, [(1, 2), (1, 2)], "s", folder=tmp_path)
    with pytest.raises(ValueError, match="not an integer"):
        save_default_retrieval_heads(name, [(1.5, 2)], "s", folder=tmp_path)
    path = save_default_retrieval_heads(name, [(1, 2)], "how", folder=tmp_path)
    assert read_retrieval_heads(path, name) == [(1, 2)]
    path.write_text(_good(heads=[[1, 2.5]]))
    with pytest.raises(FormatError, match=r"field 'heads\.0\.1'"):
        save_default_retrieval_heads(name, [(3, 4)], "s", folder=tmp_path)
    assert save_default_retrieval_heads(name, [(3, 4)], "s", folder=tmp_path, replace=True) == path


def _scores_record(**changes) -> dict:
    return {"model_name": "m", "n_layers": 2, "n_heads": 3, "n_pairs": 1,
            "scores": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], "top_heads": [[1, 2], [1, 1]]} | changes


@pytest.mark.parametrize(("text", "expected"), [
    (json.dumps([_scores_record()]), "holds a JSON list"),
    (json.dumps(_scores_record(top_heads=[[1, 2], [1, 2]])), "duplicate head [1, 2]: it appears twice"),
    (json.dumps(_scores_record(top_heads=[[2, 0]])), "do not exist in a model with 2 layers"),
    (json.dumps(_scores_record(top_heads=[[1.0, 0]])), "field 'top_heads.0.0'"),
    (json.dumps(_scores_record(n_layers=2.0)), "field 'n_layers'"),
    (json.dumps(_scores_record(n_pairs=-1)), "field 'n_pairs'"),
    (json.dumps(_scores_record(model_name="")), "field 'model_name'"),
    (json.dumps(_scores_record(scores=[[0.1, None, 0.3], [0.4, 0.5, 0.6]])), "field 'scores.0.1'"),
    (json.dumps(_scores_record()).replace("0.5", "Infinity"), "Infinity"),
    (json.dumps(_scores_record()).replace("0.5", "[" * 5000 + "]" * 5000), "nested"),
])
def test_malformed_scores_files_name_file_and_field(tmp_path, text, expected):
    path = tmp_path / "head_scores.json"
    path.write_text(text)
    with pytest.raises(FormatError) as info:
        HeadScores.load(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_scores_file_reads_ints_as_scores_and_names_the_model(tmp_path):
    path = tmp_path / "head_scores.json"
    path.write_text(json.dumps(_scores_record(scores=[[0, 1, 2], [3, 4, 5]])))
    assert HeadScores.load(path).top_k(1) == [(1, 2)]
    with pytest.raises(FormatError, match=r"head_scores\.json: field 'model_name' is 'm'"):
        HeadScores.load(path, model_name="other")


def _ns(heads=None, scores=None, k=5):
    return argparse.Namespace(heads=heads, scores=scores, k=k)


@pytest.mark.parametrize(("given", "expected"), [
    (["-1.-1"], "write each head as LAYER.HEAD"),
    (["99999.99999"], "layer 99999 is out of range"),
    (["1.99999"], "head 99999 is out of range"),
    (["١.٢"], "write each head as LAYER.HEAD"),
    (["1_0.3"], "write each head as LAYER.HEAD"),
    ([" 1.3"], "write each head as LAYER.HEAD"),
    (["1.3.4"], "write each head as LAYER.HEAD"),
    (["1.3", "2.4", "1.3"], "duplicate head [1, 3]: it appears twice (entries 0 and 2)"),
    (["3-1"], "write each head as LAYER.HEAD"),
    ([], "no head given"),
])
def test_bad_heads_option_is_refused(given, expected):
    with pytest.raises(ValueError) as info:
        parse_heads(_ns(heads=given))
    assert "--heads" in str(info.value) and expected in str(info.value)


def test_heads_option_parses_and_checks_the_model_shape(tmp_path):
    assert parse_heads(_ns(heads=["13.6", "0.0", f"{MAX_INDEX - 1}.1"])) == [(13, 6), (0, 0), (MAX_INDEX - 1, 1)]
    assert parse_heads(_ns(scores="x")) is None
    with pytest.raises(ValueError, match="pass --scores"):
        parse_heads(_ns())
    with pytest.raises(ValueError, match=r"heads \[\(30, 1\)\] do not exist"):
        parse_heads(_ns(heads=["30.1"]), shape=(30, 9))
    with pytest.raises(ValueError, match=r"heads \[\(3, 1\)\] do not exist"):
        heads_or_top_k([(3, 1)], _ns(heads=["3.1"]), "m", shape=(2, 2))
    path = tmp_path / "head_scores.json"
    path.write_text(json.dumps(_scores_record()))
    assert heads_or_top_k(None, _ns(scores=str(tmp_path), k=2), "m", shape=(2, 3)) == [(1, 2), (1, 1)]
    with pytest.raises(ValueError, match="--k 0"):
        heads_or_top_k(None, _ns(scores=str(tmp_path), k=0), "m")


def test_head_set_refuses_floats_bools_and_out_of_range():
    assert HeadSet(((torch.tensor(1), 2),)).heads == ((1, 2),)
    for bad, expected in [((20.7, 3), "not an integer"), ((True, 1), "boolean"), ((-1, 0), "out of range"),
                          ((1, 2, 3), "not a [layer, head] pair"), (("12", 3), "not an integer"),
                          ("ab", "not a [layer, head] pair")]:
        with pytest.raises(ValueError, match=expected.replace("[", r"\[")):
            HeadSet((bad,))
    with pytest.raises(ValueError, match="appears twice"):
        HeadSet(((1, 2), (1, 2)))
    assert HeadSet(()).heads == ()
    with pytest.raises(ValueError, match="no heads"):
        check_heads([], "x")
