"""The refined base as a user audits it: `workbench memory log|diff|rollback|stats`, errors that name the store and
the entry, non-UTF-8 files, `workbench run --memory-base` checks."""

from __future__ import annotations

import json
import shutil

import pytest
from agmr_builders import RIGHT, TASK, WRONG, ScriptedRefiner, entry, make_base

from workbench.cli import main
from workbench.eval.config import RunConfig
from workbench.memory import MemoryBase, TrajectoryFormatError, import_eto
from workbench.memory.trajectory import Trajectory, read_jsonl
from workbench.methods.agmr.refine_config import RefineConfig
from workbench.methods.agmr.refine_folder import (
    load_log,
    prepare,
    refine_paths,
    refine_stats,
)

EID = "valid_train/tomato/t1"


@pytest.fixture
def refined(tmp_path):
    """A refined base with one committed failure edit, as `workbench refine` leaves it."""
    make_base(tmp_path)
    root = tmp_path / "refined"
    base, _ = prepare(root, RefineConfig(heads=((0, 0),), retriever="bm25", source=str(tmp_path / "source")))
    r = ScriptedRefiner(base, [(False, WRONG, None), (True, RIGHT, None)])
    _, log_path, _ = refine_paths(root)
    from workbench.memory.trajectory import append_jsonl

    append_jsonl(log_path, r.refine_task(TASK, "put a apple in fridge."))
    return root


def test_log_diff_and_rollback_read_and_revert_a_refined_base(refined, capsys):
    assert main(["memory", "log", str(refined)]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    rec = json.loads(line)
    assert (rec["entry"], rec["version"], rec["task"], rec["branch"], rec["pattern"]) == (
        EID, 1, TASK.task_id, "failure", "attended_but_wrong")
    assert main(["memory", "diff", str(refined), EID]) == 0
    out = capsys.readouterr().out
    assert f"--- {EID}@v0" in out and f"+++ {EID}@v1" in out and "+thought: Do exactly" in out
    assert main(["memory", "rollback", str(refined), EID]) == 0
    assert json.loads(capsys.readouterr().out) == {"entry": EID, "rolled_back_to": 0, "version": 2}
    base = MemoryBase(refined)
    assert base.get(EID).segments == entry().segments and len(base.history(EID)) == 3  # the log keeps all three
    assert main(["memory", "diff", str(refined), EID, "--from", "1", "--to", "2"]) == 0
    assert "-thought: Do exactly" in capsys.readouterr().out
    stats = refine_stats(refined)
    assert (stats["tasks"], stats["commits"], stats["entries_before"], stats["entries_after"]) == (1, 1, 2, 2)
    assert stats["commits_by_branch_pattern"] == {"failure/attended_but_wrong": 1}
    assert load_log(refined)[0].committed_version == 1


@pytest.mark.parametrize("argv, message", [
    (["memory", "diff", "{root}", "valid_train/nope"], "no entry 'valid_train/nope'"),
    (["memory", "rollback", "{root}", EID, "--to", "7"], "has no version 7 (versions: [0, 1])"),
    (["memory", "rollback", "{root}"], "name the entry"),
    (["memory", "log", "{root}/missing"], "no memory base there"),
])
def test_bad_arguments_are_clear_errors_and_change_nothing(refined, capsys, argv, message):
    before = (refined / "entries.jsonl").read_bytes(), (refined / "history.jsonl").read_bytes()
    assert main([a.format(root=refined) for a in argv]) == 2
    assert message in capsys.readouterr().err
    assert ((refined / "entries.jsonl").read_bytes(), (refined / "history.jsonl").read_bytes()) == before


def test_run_checks_its_memory_base_before_anything_is_written(tmp_path, refined):
    cfg = RunConfig(out=str(tmp_path / "o"), memory="traj", memory_base=str(refined))
    assert cfg.method == "traj[refined]" and cfg.policy_key()[-1] == str(refined)
    with pytest.raises(ValueError, match="no memory base there"):
        RunConfig(out=str(tmp_path / "o"), memory="traj", memory_base=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="does not apply to --memory none"):
        RunConfig(out=str(tmp_path / "o"), memory="none", memory_base=str(refined))
    assert not (tmp_path / "o").exists()


def test_a_resumed_evaluation_refuses_a_base_that_changed_since_it_began(tmp_path, refined):
    from workbench.eval.run_folder import check_resume, write_run_config

    cfg = RunConfig(out=str(tmp_path / "o"), memory="traj", memory_base=str(refined))
    write_run_config(cfg)
    recorded = json.loads((tmp_path / "o" / "config.json").read_text())["memory_base_digest"]
    assert recorded == MemoryBase(refined).digest()
    assert check_resume(cfg, resume=True) == set()  # the same base: resumes
    # ... also read through another path (a sweep's relative path, a notebook's absolute one, another checkout):
    # a base is compared by its content
    copy = tmp_path / "checkout-2" / "refined"
    shutil.copytree(refined, copy)
    assert check_resume(RunConfig(out=str(tmp_path / "o"), memory="traj", memory_base=str(copy)), resume=True) == set()
    assert main(["memory", "rollback", str(refined), EID]) == 0  # the base changes under the run
    with pytest.raises(ValueError, match="changed since this run began"):
        check_resume(cfg, resume=True)


def test_the_policy_reads_the_refined_base(refined):
    from workbench.agents.policy import build_policy

    policy = build_policy("traj", "bm25", memory_base=str(refined))
    policy.begin(TASK, "put a apple in fridge.", "room")
    block = policy.memory(0, [])
    assert block.entry.entry_id == EID and block.entry.version == 1
    assert any("Do exactly" in p.text for p in block.pieces)


def _latin1(path, text):
    path.write_bytes(text.encode("latin-1"))
    return path


def test_files_that_are_not_utf8_name_the_file_and_the_fix(tmp_path):
    traj = Trajectory(task_id="t", goal="put a caf\u00e9 mug in desk.")
    bad = _latin1(tmp_path / "trajs.jsonl", traj.model_dump_json() + "\n")
    with pytest.raises(TrajectoryFormatError, match=r"trajs.jsonl: line 1: not UTF-8 text .*re-save it as UTF-8"):
        read_jsonl(bad, Trajectory)
    eto = _latin1(tmp_path / "eto.json", json.dumps([{"id": "x", "conversations": [
        {"from": "human", "value": "caf\u00e9"}]}], ensure_ascii=False))
    with pytest.raises(TrajectoryFormatError, match="eto.json: line 1: not UTF-8"):
        import_eto(eto)
    store = tmp_path / "store"
    MemoryBase(store).add(entry())
    history = (store / "history.jsonl").read_text()
    _latin1(store / "history.jsonl", history.replace("tomato", "tom\u00e1to"))
    with pytest.raises(TrajectoryFormatError, match="history.jsonl: line 1: not UTF-8"):
        MemoryBase(store)
