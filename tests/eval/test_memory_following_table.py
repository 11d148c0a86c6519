"""benchmarks/memory_following.py: the follow-the-memory table from run folders."""

import pytest

from workbench.memory.base import MemoryBase
from workbench.memory.trajectory import Step, Trajectory

TASK = "valid_unseen/pick_and_place_simple-Mug-None-Cabinet-{}/trial_T1"


@pytest.fixture(scope="module")
def table(load_benchmark):
    return load_benchmark("memory_following")


def _run(folder, episodes, entry=None):
    folder.mkdir(parents=True)
    lines = []
    for i, actions in enumerate(episodes):
        t = Trajectory(task_id=TASK.format(i), task_type="pick", goal="put a mug in cabinet.",
                       steps=tuple(Step(observation="o", action=a) for a in actions),
                       meta={"memory_entry": entry} if entry else {})
        lines.append(t.model_dump_json())
    (folder / "trajectories.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def base(tmp_path):
    memory = Trajectory(task_id="valid_train/pick_and_place_simple-Mug-None-Cabinet-9/trial_T1", task_type="pick",
                        goal="put a mug in cabinet.", success=True,
                        steps=tuple(Step(observation="o", action=a) for a in
                                    ["go to countertop 1", "take mug 1 from countertop 1", "go to cabinet 1"]))
    b = MemoryBase(tmp_path / "base")
    b.build_from_trajectories([memory])
    return b, memory.task_id


def test_table_compares_every_condition_with_the_entry_traj_retrieved(table, base, tmp_path):
    b, entry = base
    copier = ["go to countertop 1", "take mug 1 from countertop 1", "go to safe 1"]
    _run(tmp_path / "runs" / "m" / "traj", [copier, copier], entry)
    _run(tmp_path / "runs" / "m" / "none", [["go to safe 1", "go to drawer 1"]] * 2)
    found = table.rows([tmp_path / "runs"], ["none", "icl", "traj"], "traj", b)
    assert [(m, c) for m, c, _ in found] == [("m", "none"), ("m", "traj")]  # no icl folder: no row
    none, traj = found[0][2], found[1][2]
    assert traj["first_action"] == 1.0 and traj["prefix"] == 2 and traj["took_target"] == 1.0
    assert none["first_action"] == 0.0 and none["in_memory"] == 0.0
    out = tmp_path / "reports" / "tables" / "following.md"
    table.main(["--runs", str(tmp_path / "runs"), "--out", str(out), "--title", "t"], base=b)
    page = out.read_text()
    assert "| m | traj | 2 | 100.0% | 2.00 | 66.7% | 100.0% |" in page and "benchmarks/memory_following.py" in page
    assert out.with_suffix(".csv").read_text().splitlines()[1] == "m,none,2,0.0000,0.0000,0.0000,0.0000"
    assert (tmp_path / "reports" / "index.md").exists()


def test_a_reference_run_without_retrieved_entries_is_refused_naming_file_and_episode(table, base, tmp_path):
    b, _ = base
    _run(tmp_path / "runs" / "m" / "traj", [["look"]])
    out = tmp_path / "t.md"
    with pytest.raises(ValueError, match=r"traj/trajectories\.jsonl: episode .*Cabinet-0.* no meta\.memory_entry"):
        table.main(["--runs", str(tmp_path / "runs"), "--out", str(out)], base=b)
    _run(tmp_path / "runs2" / "m" / "traj", [["look"]], "valid_train/nope/trial_T0")
    with pytest.raises(ValueError, match=r"memory entry 'valid_train/nope/trial_T0' is not in the memory base"):
        table.main(["--runs", str(tmp_path / "runs2"), "--out", str(out)], base=b)
    assert not out.exists() and not out.with_suffix(".csv").exists()
