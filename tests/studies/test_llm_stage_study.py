"""The LLM-stage study: Cohen's kappa, the judge against the rule, the reply table, stage inputs read back from a
refinement, and the ledgers of arbiter and proactive episodes played with a (scripted) model."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "methods" / "agmr"))

from agmr_builders import RIGHT, TASK, WRONG, ScriptedRefiner, make_base  # noqa: E402

from workbench.llm import ScriptedBackend  # noqa: E402
from workbench.memory.trajectory import append_jsonl  # noqa: E402
from workbench.methods.agmr.refine_config import RefineConfig  # noqa: E402
from workbench.methods.agmr.refine_folder import prepare, refine_paths  # noqa: E402
from workbench.studies.llm_stages import (  # noqa: E402
    agreement,
    cohen_kappa,
    judge,
    judge_payloads,
    refinement_calls,
    replay,
    replay_payloads,
    reply_table,
)


def test_cohen_kappa_on_known_tables() -> None:
    a = ["x", "x", "y", "y"]
    assert cohen_kappa(a, a) == 1.0
    assert cohen_kappa(a, ["y", "y", "x", "x"]) == -1.0
    assert cohen_kappa(["x"] * 4, ["x"] * 4) is None  # chance agreement is 1: undefined
    # 20 items: 15 agreements, marginals 10/10 and 12/8 -> pe = (10*12 + 10*8) / 400 = 0.5, kappa = (0.75-0.5)/0.5
    r = ["a"] * 10 + ["b"] * 10
    j = ["a"] * 8 + ["b"] * 2 + ["a"] * 4 + ["b"] * 6
    assert sum(x == y for x, y in zip(r, j)) == 14
    assert cohen_kappa(r, j) == pytest.approx((0.7 - 0.5) / 0.5)


def _refinement(tmp_path, backend=None):
    make_base(tmp_path)
    root = tmp_path / "refined"
    cfg = RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source"))
    base, _ = prepare(root, cfg)
    _, log, exec_path = refine_paths(root)
    r = ScriptedRefiner(base, [(False, WRONG, None), (False, WRONG, None), (True, RIGHT, None)],
                        source=str(tmp_path / "source"), backend=backend)
    r.on_execution = lambda e: (r.executions.append(e), append_jsonl(exec_path, e))
    append_jsonl(log, r.refine_task(TASK, "put a apple in fridge."))
    return root


def test_the_offline_judge_is_the_rule_on_every_diagnosis_read_back(tmp_path) -> None:
    from workbench.llm import get_backend

    root = _refinement(tmp_path)
    items = judge_payloads(root)
    assert [s for s, _, _ in items] == [f"{TASK.task_id} attempt 1", f"{TASK.task_id} attempt 2"]
    rows = judge(get_backend("offline-alfworld"), items)
    ag = agreement(rows)
    assert ag["labelled"] == 2 and ag["agreement"] == 1.0 and [r["judge"] for r in rows] == [r for _, r, _ in items]


def test_a_rejected_judgement_is_counted_and_left_out_of_kappa(tmp_path) -> None:
    root = _refinement(tmp_path)
    items = judge_payloads(root)
    rows = judge(ScriptedBackend(['{"pattern": "missed_relevant"}', "?", "?"]), items)
    assert [r["fate"] for r in rows] == ["valid", "rejected"] and rows[1]["judge"] is None
    ag = agreement(rows)
    assert (ag["items"], ag["labelled"], ag["rejected"]) == (2, 1, 1)
    assert ag["confusion"][items[0][1]]["missed_relevant"] == 1


def test_replay_reads_the_recorded_inputs_and_counts_each_reply(tmp_path) -> None:
    root = _refinement(tmp_path)
    payloads = replay_payloads(root, per_stage=5)
    assert [p.stage for p in payloads] == ["reflector_failure", "refiner_failure", "pattern_judge"]
    good = json.dumps({"critical_step": 1, "wrong_action": "go to fridge 1", "correct_action": "take apple 1 from "
                       "countertop 1", "supporting_segment": 1})
    recs = replay(ScriptedBackend([good, "x", "x", '{"pattern": "missed_relevant"}']), payloads)
    assert [r["fate"] for r in recs] == ["valid", "rejected", "valid"] and recs[0]["source"] == TASK.task_id
    t = reply_table(recs, by=("stage",))
    assert t.loc["refiner_failure", "rejected"] == 1.0 and t.loc["pattern_judge", "valid as sent"] == 1.0


def test_a_model_backed_refinement_keeps_its_calls(tmp_path) -> None:
    refl = json.dumps({"critical_step": 1, "wrong_action": "go to fridge 1",
                       "correct_action": "take apple 1 from countertop 1", "supporting_segment": 1})
    edit = json.dumps({"pattern": "attended_but_wrong", "edits": [
        {"index": 1, "op": "replace", "text": "Thought: take the apple first.\nAction: take apple 1 from countertop 1"}]})
    edit2 = edit.replace("take the apple first", "the apple is on countertop 1: take it")
    root = _refinement(tmp_path, backend=ScriptedBackend([refl, edit, refl, edit2]))
    calls = refinement_calls(root)
    assert [c["stage"] for c in calls] == ["reflector_failure", "refiner_failure"] * 2
    assert {c["fate"] for c in calls} == {"valid"} and all(c["task_id"] == TASK.task_id for c in calls)


def test_an_attempt_that_erred_leaves_the_next_one_diagnosing_the_same_run(tmp_path) -> None:
    refl = json.dumps({"critical_step": 1, "wrong_action": "go to fridge 1",
                       "correct_action": "take apple 1 from countertop 1", "supporting_segment": 1})
    unusable = json.dumps({"pattern": "attended_but_wrong", "edits": [{"index": 99, "op": "delete"}]})
    edit = json.dumps({"pattern": "attended_but_wrong", "edits": [
        {"index": 1, "op": "replace", "text": "Thought: take the apple first.\nAction: take apple 1 from countertop 1"}]})
    make_base(tmp_path)
    root = tmp_path / "refined"
    cfg = RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source"))
    base, _ = prepare(root, cfg)
    _, log, exec_path = refine_paths(root)
    r = ScriptedRefiner(base, [(False, WRONG, None), (True, RIGHT, None)], source=str(tmp_path / "source"),
                        backend=ScriptedBackend([refl, unusable, refl, edit]))
    r.on_execution = lambda e: (r.executions.append(e), append_jsonl(exec_path, e))
    rec = r.refine_task(TASK, "put a apple in fridge.")
    append_jsonl(log, rec)
    assert rec.attempts[0].error and rec.attempts[0].execution is None and rec.attempts[1].execution
    items = judge_payloads(root)
    assert [s for s, _, _ in items] == [f"{TASK.task_id} attempt 1", f"{TASK.task_id} attempt 2"]
    first_run = r.executions[0].memory
    assert items[0][2].memory == first_run and items[1][2].memory == first_run  # both diagnosed m*'s run
    assert [c["fate"] for c in refinement_calls(root)] == ["valid", "rejected", "valid", "valid"]


def test_the_report_pages_of_a_measurement_with_only_a_refinement(tmp_path) -> None:
    from workbench.studies.llm_stages import StageRuns, outcomes_table, stage_pages

    root = _refinement(tmp_path)
    s = StageRuns(model="m", refinement=str(root), refinement_offline=str(root), oracle=str(root),
                  plan_free=str(root), runs=(("arbiter", str(tmp_path / "none"), str(tmp_path / "none")),))
    t = outcomes_table(s)
    assert t.loc[("agmr (refinement)", 1, "committed"), "served"] == t.loc[("agmr (refinement)", 1, "committed"),
                                                                          "offline"] == 1
    names = [n for n, _, _ in stage_pages(s)]
    # offline calls leave no served records; no Table 1 runs, no Table 1 page
    assert names == ["llm_stage_outcomes", "agmr_reflector_oracle_share", "agmr_reflector_foreign_objects"]


def test_reflector_rows_pair_table_1s_committed_runs_on_their_common_tasks() -> None:
    """On the committed paper-scale runs: each row's success is its run's, and each pair's discordant counts
    give the difference of the two rates (the McNemar cells)."""
    from workbench.eval.run_folder import read_episodes
    from workbench.studies.llm_stages import reflector_rows

    root = Path(__file__).parents[2] / "runs/full-bfloat16/04_agmr/smollm2-135m-alfworld-v2"
    runs = [("traj", str(root / "traj")), ("agmr", str(root / "agmr")), ("agmr-no-agr", str(root / "agmr-no-agr"))]
    t = reflector_rows(runs)
    assert list(t.index) == ["traj", "agmr", "agmr-no-agr"] and set(t["episodes"]) == {134}
    for name, folder in runs:
        eps = read_episodes(folder)
        assert t.loc[name, "success %"] == pytest.approx(100 * sum(e.success for e in eps) / len(eps))
    for a, b in (("agmr", "traj"), ("agmr-no-agr", "traj"), ("agmr-no-agr", "agmr")):
        diff = t.loc[a, f"won only here vs {b}"] - t.loc[a, f"won only by {b}"]
        assert t.loc[a, "success %"] - t.loc[b, "success %"] == pytest.approx(100 * diff / 134)
        assert 0 < t.loc[a, f"p vs {b}"] <= 1


def test_foreign_objects_of_the_committed_bases_are_absent_from_their_entries_rooms() -> None:
    """Every commit is counted once, and an object counted as foreign is named nowhere in the entry's first
    version (read independently, as plain text) and somewhere in the refinement task's expert trajectory."""
    from workbench.envs.memory_base import expert_trajectories_for
    from workbench.memory.base import MemoryBase
    from workbench.studies.llm_stages import foreign_objects

    root = Path(__file__).parents[2] / "runs/full-bfloat16/04_agmr/smollm2-135m-alfworld-v2/bases"
    experts = {t.task_id: t for t in expert_trajectories_for("valid_seen")}
    for name in ("agmr", "agmr-plan-free"):
        mb = MemoryBase(root / name)
        commits = sum(1 for e in mb.entries() for r in mb.history(e.entry_id)[1:]
                      if (r.provenance or {}).get("refinement_task"))
        d = foreign_objects(root / name)
        assert d["commits"] == commits > 0
        assert d["from the task's room"] <= d["with foreign objects"] <= d["commits"]
        assert d["room objects"] >= len(d["examples"]) > 0
        for ex in d["examples"]:
            first = mb.history(ex["entry"])[0].entry.model_dump_json().lower()
            room = experts[ex["refinement_task"]].model_dump_json().lower()
            for obj in ex["objects added"]:
                assert re.search(rf"\b{obj}\b", first) is None
                assert obj in room
