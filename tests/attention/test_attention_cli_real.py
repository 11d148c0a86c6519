"""The ``workbench heads`` / ``workbench utilization`` commands on the real model and real game files (small)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import workbench.attention.heads as heads_module
from workbench.attention import (
    HeadScores,
    SupervisionRecord,
    default_retrieval_heads,
    save_supervision,
)
from workbench.cli import main
from workbench.methods.agmr.recording import load_utilization
from workbench.studies.head_masking import HeadAblationResult

pytestmark = pytest.mark.integration


def test_heads_score_from_a_user_file_then_ablate_and_utilization(tmp_path, capsys, smollm, monkeypatch):
    text = "Memory: > take apple 1 from countertop 1\nNow: go to countertop 1 and take the apple."
    ids = smollm.tokenizer(text, add_special_tokens=False).input_ids
    rec = SupervisionRecord(task_id="user/1", step=0, key_context="take apple 1 from countertop 1",
                            formatted_prompt=text, token_ids=ids, key_spans=[(2, 10)], target_action="take",
                            source="user", analyzer="hand", model_name=smollm.name)
    sup = save_supervision(tmp_path / "sup.jsonl", [rec, rec])
    scored = tmp_path / "scored"  # --out is a folder: head_scores.json is written inside it
    assert main(["heads", "score", "--model", smollm.name, "--supervision", str(sup), "--out", str(scored),
                 "--k", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    scores_path = scored / "head_scores.json"
    assert out["n_pairs"] == 2 and len(out["top_heads"]) == 3 and out["sources"] == {"user": 2}
    assert out["out"] == str(scores_path)
    scores = HeadScores.load(scores_path, model_name="smollm2-135m-instruct")
    assert scores.scores.shape == (30, 9) and json.loads(scores_path.read_text())["top_heads"][:3] == out["top_heads"]
    # the older form, --out FILE.json (the Makefile's), still writes exactly that file
    assert main(["heads", "score", "--model", smollm.name, "--supervision", str(sup), "--out",
                 str(tmp_path / "mine.json"), "--k", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["out"] == str(tmp_path / "mine.json")
    assert json.loads((tmp_path / "mine.json").read_text())["top_heads"][:3] == out["top_heads"]

    # --save-default: the top k become the model's committed heads (here in a temporary assets folder), with the
    # command that chose them; the same scoring again leaves the file as it is, other heads need --replace
    monkeypatch.setattr(heads_module, "HEADS_ASSETS", tmp_path / "heads")
    assert main(["heads", "score", "--model", smollm.name, "--supervision", str(sup), "--out", str(scored),
                 "--k", "2", "--save-default"]) == 0
    saved = json.loads(capsys.readouterr().out)["saved_default"]
    assert saved == str(tmp_path / "heads" / "smollm2-135m-instruct.json")
    assert default_retrieval_heads("smollm2-135m-instruct") == [tuple(h) for h in out["top_heads"][:2]]
    assert "--supervision" in json.loads(Path(saved).read_text())["source"]
    assert main(["heads", "score", "--model", smollm.name, "--supervision", str(sup), "--out", str(scored),
                 "--k", "3", "--save-default"]) == 2
    assert "--replace" in capsys.readouterr().err
    assert default_retrieval_heads("smollm2-135m-instruct") == [tuple(h) for h in out["top_heads"][:2]]

    ablate = tmp_path / "ablate"
    assert main(["heads", "ablate", "--model", smollm.name, "--scores", str(scored), "--k", "2", "--n-random", "1",
                 "--tasks", "0:1", "--out", str(ablate)]) == 0  # --scores may name the folder heads score wrote
    out = json.loads(capsys.readouterr().out)
    assert set(out["summary"]) == {"none", "icl", "traj", "top", "random"}
    acc = {arm: out["summary"][arm]["tf_accuracy"] for arm in ("none", "icl", "traj")}
    assert all(0.0 <= a <= 1.0 for a in acc.values())
    # the printed gains are the arms' printed accuracies, subtracted (a gain computed from other arms fails here)
    assert out["tf_accuracy_memory_gain"] == pytest.approx(acc["traj"] - acc["icl"])
    assert out["tf_accuracy_memory_gain_vs_none"] == pytest.approx(acc["traj"] - acc["none"])
    assert len(HeadAblationResult.load(ablate / "ablation.json").rows) == 5

    util = tmp_path / "util"
    assert main(["utilization", "--model", smollm.name, "--heads", "3.1", "10.4", "--tasks", "0:1", "--out", str(util)]) == 0
    out = json.loads(capsys.readouterr().out)
    (record,) = load_utilization(util / "utilization.jsonl")
    assert record.utilization.heads == [(3, 1), (10, 4)] and record.mode == "teacher_forced"
    # the full arm's accuracy is the share of teacher-forced steps whose choice is the expert's, as recorded
    right = sum(a == b for a, b in zip(record.actions, record.expert_actions))
    assert out["n_tasks"] == 1 and out["tf_accuracy_full"] == pytest.approx(right / len(record.expert_actions))


def test_heads_commands_explain_bad_input(tmp_path, capsys):
    assert main(["heads", "ablate", "--tasks", "0:1", "--out", str(tmp_path)]) == 2
    assert "--scores" in capsys.readouterr().err
    assert main(["utilization", "--heads", "3-1", "--out", str(tmp_path)]) == 2
    assert "LAYER.HEAD" in capsys.readouterr().err
    # a path is not a name committed heads can be looked up by: refused before any model loads
    assert main(["heads", "score", "--model", str(tmp_path / "my-model"), "--save-default", "--out",
                 str(tmp_path / "s")]) == 2
    assert "not a registered model name" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a closed set: argparse refuses it before anything runs
        main(["utilization", "--heads", "3.1", "--carriers", "some", "--out", str(tmp_path)])
    assert "argument --carriers: invalid choice: 'some' (choose from 'none', 'all')" in capsys.readouterr().err
