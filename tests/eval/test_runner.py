"""The runner: outputs, --resume after a kill mid-episode (nothing lost, nothing run twice), bad input."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.envs.selection import parse_task_slice
from workbench.eval.config import RunConfig
from workbench.eval.metrics import episode_metrics, success_rate_at
from workbench.eval.run import run
from workbench.memory.trajectory import (
    Step,
    Trajectory,
    TrajectoryFormatError,
    iter_jsonl_dicts,
    read_jsonl,
)
from workbench.models.registry import DEFAULT_AGENT

WB = [sys.executable, "-m", "workbench.cli"]


def _traj(tid, n, success):
    steps = tuple(Step(observation="o", action="look") for _ in range(n))
    return Trajectory(task_id=tid, goal="g", steps=steps, success=success,
                      meta={"steps": [{"memory_tokens": 10, "prompt_tokens": 100}] * n})


def test_metrics_on_constructed_runs():
    trajs = [_traj("a", 4, True), _traj("b", 12, True), _traj("c", 50, False), _traj("d", 20, True)]
    assert success_rate_at(trajs, 5) == 0.25 and success_rate_at(trajs, 15) == 0.5 and success_rate_at(trajs, 50) == 0.75
    m = episode_metrics(trajs)
    assert m["success_rate"] == 0.75 and m["avg_steps"] == 21.5 and m["memory_tokens"] == 10
    assert m["sr_at_k"]["15"] == 0.5


def test_task_slices():
    assert parse_task_slice("0:3", 10) == [0, 1, 2]
    assert parse_task_slice("all", 3) == [0, 1, 2]
    assert parse_task_slice("0:10:4", 10) == [0, 4, 8]
    with pytest.raises(ValueError, match="--tasks"):
        parse_task_slice("x:y", 10)
    assert parse_task_slice("none", 10) == []


def test_a_run_resumed_under_another_commit_keeps_the_versions_it_was_played_with(tmp_path, monkeypatch):
    import workbench.eval.run_folder as run_folder

    cfg = RunConfig(out=str(tmp_path / "r"), tasks="0:1")
    for commit in ("aaa", "aaa", "bbb", "aaa", "ccc"):
        monkeypatch.setattr(run_folder, "versions", lambda c=commit: {"python": "3.11", "git_commit": c})
        run_folder.write_run_config(cfg)
    record = json.loads((tmp_path / "r" / "config.json").read_text())
    assert record["versions"]["git_commit"] == "ccc" and record["run"] == cfg.identity()
    assert [v["git_commit"] for v in record["earlier_versions"]] == ["bbb", "aaa"]  # each earlier one once


def test_a_run_records_its_adapter_and_refuses_to_resume_on_a_retrained_one(tmp_path):
    from workbench.eval.run_folder import check_resume, write_run_config
    from workbench.models.adapters import adapter_hash
    from workbench.models.registry import get_model_spec

    adapter = tmp_path / "adapter"  # an adapter folder as training writes it (only its bytes are hashed here)
    adapter.mkdir()
    base_id = get_model_spec("smollm2-135m-instruct").hf_id
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base_id, "r": 16}))
    (adapter / "adapter_model.safetensors").write_bytes(b"weights of iteration 1")
    cfg = RunConfig(out=str(tmp_path / "r"), tasks="0:1", model=str(adapter))
    write_run_config(cfg)
    assert json.loads((tmp_path / "r" / "config.json").read_text())["model_adapter"] == adapter_hash(adapter)
    assert check_resume(cfg, resume=True) == set()  # the same weights: resumes
    (adapter / "adapter_model.safetensors").write_bytes(b"weights retrained under the same folder")
    with pytest.raises(ValueError, match="adapter of model .* changed since this run began"):
        check_resume(cfg, resume=True)
    # a registered adapter model records its hash too; a model without an adapter records none
    v1 = RunConfig(out=str(tmp_path / "v1"), tasks="0:1", model="smollm2-135m-alfworld")
    write_run_config(v1)
    assert len(json.loads((tmp_path / "v1" / "config.json").read_text())["model_adapter"]) == 10
    base = RunConfig(out=str(tmp_path / "base"), tasks="0:1", model="smollm2-135m-instruct")
    write_run_config(base)
    assert "model_adapter" not in json.loads((tmp_path / "base" / "config.json").read_text())


@pytest.mark.game
def test_teacher_forcing_only_run(tiny_model_dir, tmp_path):
    """tasks: none plays no episode; its teacher forcing is the one a run with episodes writes."""
    only = RunConfig(out=str(tmp_path / "tf"), model=str(tiny_model_dir), tasks="none", teacher_forcing_tasks="0:2",
                     memory="none", max_steps=2)
    metrics = run(only, progress=False)
    both = run(RunConfig(out=str(tmp_path / "both"), model=str(tiny_model_dir), tasks="0:2", memory="none",
                         max_steps=2), progress=False)
    assert metrics["n_episodes"] == 0 and set(metrics) == {"n_episodes", "teacher_forced", "wall_s_this_invocation"}
    assert metrics["teacher_forced"] == both["teacher_forced"] and metrics["teacher_forced"]["n_steps"] > 0
    assert not (tmp_path / "tf" / "trajectories.jsonl").read_text()
    for bad in (dict(teacher_forcing=False), dict(teacher_forcing_tasks=None), dict(teacher_forcing_tasks="none")):
        with pytest.raises(ValueError, match="teacher-forcing-only run"):
            RunConfig(out=str(tmp_path / "bad"), tasks="none", **{"teacher_forcing_tasks": "0:2", **bad})


@pytest.mark.integration
def test_run_writes_outputs_and_resume_after_kill(tmp_path, smollm):
    out = tmp_path / "run"
    cmd = WB + ["run", "--model", smollm.name, "--split", "valid_unseen", "--tasks", "0:3", "--memory", "none",
                "--max-steps", "6", "--no-teacher-forcing", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    rows = out / "trajectories.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and (not rows.exists() or rows.read_text().count("\n") < 1):
        time.sleep(0.2)
    time.sleep(1.0)  # into the second episode
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = [d["task_id"] for d in iter_jsonl_dicts(rows)]
    assert 1 <= len(first) < 3, "the kill should land mid-run"
    # a torn, half-written line (a kill during the append) must not count as a finished episode
    with rows.open("a") as fh:
        fh.write('{"task_id": "valid_unseen/torn')
    cfg = RunConfig(out=str(out), split="valid_unseen", tasks="0:3", memory="none", max_steps=6, teacher_forcing=False,
                    model=smollm.name)
    with pytest.raises(FileExistsError, match="--resume"):
        run(cfg, resume=False, progress=False, lm=smollm)
    metrics = run(cfg, resume=True, progress=False, lm=smollm)
    ids = [d["task_id"] for d in iter_jsonl_dicts(rows)]
    assert ids[: len(first)] == first and len(ids) == len(set(ids)) == 3
    assert metrics["n_episodes"] == 3
    trajs = read_jsonl(rows, Trajectory)
    assert all(t.n_steps <= 6 and t.meta["memory_policy"] == "none" for t in trajs)
    cfg_json = json.loads((out / "config.json").read_text())
    assert cfg_json["run"]["tasks"] == "0:3" and cfg_json["versions"]["transformers"] == "5.23.0"
    # resuming with other parameters is refused, naming what differs
    with pytest.raises(ValueError, match="max_steps"):
        run(RunConfig(out=str(out), split="valid_unseen", tasks="0:3", memory="none", max_steps=7,
                      teacher_forcing=False, model=smollm.name), resume=True, progress=False, lm=smollm)
    # the loaded model must be the one the config names (config.json records it; the default: DEFAULT_AGENT)
    with pytest.raises(ValueError, match=f"config says model='{DEFAULT_AGENT}'"):
        run(RunConfig(out=str(tmp_path / "other"), tasks="0:1", memory="none"), progress=False, lm=smollm)
    assert not (tmp_path / "other").exists()


def test_malformed_trajectory_file_names_file_record_field(tmp_path):
    p = tmp_path / "t.jsonl"
    good = _traj("a", 1, True).model_dump_json()
    p.write_text(good + "\n" + good.replace('"goal":"g"', '"goal":5') + "\n")
    with pytest.raises(TrajectoryFormatError, match=r"t\.jsonl: line 2: field 'goal'"):
        read_jsonl(p, Trajectory)
    p.write_text(good + "\n{not json\n" + good + "\n")
    with pytest.raises(TrajectoryFormatError, match="line 2: not valid JSON"):
        read_jsonl(p, Trajectory)


def test_cli_unknown_model_is_a_clear_error(tmp_path, capsys):
    rc = main(["run", "--model", "no-such-model", "--tasks", "0:1", "--memory", "none", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "no-such-model" in err and "looked in" in err and "smollm2-135m-instruct" in err


@pytest.mark.game
def test_adopt_episodes_reads_another_folders_episodes_and_plays_only_the_rest(tiny_model_dir, tmp_path):
    """A run with teacher forcing and one without share their episodes: the second adopts the first's and plays
    only the tasks the first lacks; a source of other parameters is refused before anything is written."""
    from workbench.eval.adoption import adopt_episodes, adopt_runs
    from workbench.eval.driver import drive
    from workbench.eval.run_folder import load_run

    common = dict(model=str(tiny_model_dir), memory="none", max_steps=2)
    source = RunConfig(out=str(tmp_path / "01" / "m" / "none"), tasks="0:2", teacher_forcing=True, **common)
    run(source, progress=False)
    src_rows = {d["task_id"]: d for d in iter_jsonl_dicts(Path(source.out) / "trajectories.jsonl")}
    target = RunConfig(out=str(tmp_path / "04" / "m" / "none"), tasks="0:3", teacher_forcing=False, **common)

    other = RunConfig(out=str(tmp_path / "04" / "m" / "other"), tasks="0:3", teacher_forcing=False,
                      **(common | {"max_steps": 3}))
    with pytest.raises(ValueError, match="max_steps"):
        adopt_episodes(other, source.out)
    assert not (tmp_path / "04" / "m" / "other").exists()
    with pytest.raises(FileNotFoundError, match="no run folder"):
        adopt_episodes(target, tmp_path / "nowhere")

    # notebook 04 adopts from notebook 01's runs root: root/<model>/<condition>, where such a folder exists
    lacking = RunConfig(out=str(tmp_path / "04" / "m" / "icl"), tasks="0:3", **(common | {"memory": "icl"}))
    assert adopt_runs([target, lacking], tmp_path / "01") == {
        target.out: f"2 episodes adopted from {tmp_path / '01' / 'm' / 'none'}"}
    assert adopt_episodes(target, source.out) == []  # nothing left to adopt: idempotent
    played = []
    drive([target], resume=True, progress=False, on_result=lambda job, result: played.append(job.task.task_id))
    trajs, metrics, config = load_run(target.out)
    assert len(played) == 1 and played[0] not in src_rows and metrics["n_episodes"] == 3
    rows = {d["task_id"]: d for d in iter_jsonl_dicts(Path(target.out) / "trajectories.jsonl")}
    assert all(rows[t] == src_rows[t] for t in src_rows)  # the adopted episodes, unchanged
    src_lines = (Path(source.out) / "trajectories.jsonl").read_text().splitlines()
    assert set(src_lines) <= set((Path(target.out) / "trajectories.jsonl").read_text().splitlines())  # byte for byte
    assert config["run"] == target.identity() and config["adopted"][0]["episodes"] == 2
    assert (Path(target.out) / config["adopted"][0]["source"]).resolve() == Path(source.out).resolve()
    # a folder of other parameters is never written into
    from workbench.eval.run_folder import write_run_config

    three = dict(tasks="0:3", teacher_forcing=False, **(common | {"max_steps": 3}))
    write_run_config(RunConfig(out=str(tmp_path / "01-3"), **three))  # a source of 3-step episodes
    before = (Path(target.out) / "trajectories.jsonl").read_text()
    with pytest.raises(ValueError, match="different parameters"):
        adopt_episodes(RunConfig(out=target.out, **three), tmp_path / "01-3")
    assert (Path(target.out) / "trajectories.jsonl").read_text() == before


@pytest.mark.game
def test_adoption_killed_between_its_two_writes_is_recorded_once_on_rerun(tiny_model_dir, tmp_path, monkeypatch):
    """``config.json`` gets the adoption record before the trajectories get the episodes; a kill between the two
    leaves a record whose episodes are missing. The rerun adopts them again and the folder says so once."""
    import workbench.eval.adoption as adoption
    from workbench.eval.adoption import adopt_episodes

    common = dict(model=str(tiny_model_dir), memory="none", max_steps=2, tasks="0:2")
    source = RunConfig(out=str(tmp_path / "src"), **common)
    run(source, progress=False)
    target = RunConfig(out=str(tmp_path / "dst"), **common)
    real = adoption.atomic_write_text

    def killed(path, text):
        if Path(path).name == "trajectories.jsonl":
            raise KeyboardInterrupt("killed between the two writes")
        real(path, text)

    monkeypatch.setattr(adoption, "atomic_write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        adopt_episodes(target, source.out)
    half = json.loads((Path(target.out) / "config.json").read_text())
    assert len(half["adopted"]) == 1 and not (Path(target.out) / "trajectories.jsonl").exists()
    monkeypatch.setattr(adoption, "atomic_write_text", real)
    assert len(adopt_episodes(target, source.out)) == 2
    config = json.loads((Path(target.out) / "config.json").read_text())
    assert [r["episodes"] for r in config["adopted"]] == [2]
    assert sorted(config["adopted"][0]["tasks"]) == sorted(
        d["task_id"] for d in iter_jsonl_dicts(Path(target.out) / "trajectories.jsonl"))


@pytest.mark.game
def test_adopt_same_memory_takes_the_episodes_whose_memory_a_refined_base_leaves_unchanged(tiny_model_dir, tmp_path):
    """Traj over a base where one entry was refined: the task that retrieves an unchanged entry reads exactly the
    default base's memory at every step, so its Traj episode is adopted; the task whose entry changed is played."""
    from workbench.envs.memory_base import default_memory_base
    from workbench.eval.adoption import adopt_episodes, adopt_same_memory
    from workbench.eval.driver import drive
    from workbench.eval.run_folder import load_run

    common = dict(model=str(tiny_model_dir), memory="traj", max_steps=2, tasks="0:134:67", teacher_forcing=False)
    source = RunConfig(out=str(tmp_path / "01" / "traj"), **common)
    run(source, progress=False)
    trajs = {t.task_id: t for t in load_run(source.out)[0]}
    first, second = sorted(trajs)
    assert trajs[first].meta["memory_entry"] != trajs[second].meta["memory_entry"]
    refined = default_memory_base().clone(tmp_path / "refined")
    entry = refined.get(trajs[second].meta["memory_entry"])
    seg = entry.segments[0]
    refined.commit(entry.model_copy(update={"segments": (seg.model_copy(update={"thought": "Key step."}),
                                                          *entry.segments[1:])}), reason="test edit")
    target = RunConfig(out=str(tmp_path / "04" / "agmr"), memory_base=str(tmp_path / "refined"), **common)
    with pytest.raises(ValueError, match="memory_base"):  # the plain adoption wants the same base
        adopt_episodes(target, source.out)
    with pytest.raises(ValueError, match="max_steps"):  # only the base may differ
        adopt_same_memory(RunConfig(out=str(tmp_path / "04" / "x"), memory_base=str(tmp_path / "refined"),
                                    **(common | {"max_steps": 3})), source.out)
    assert adopt_same_memory(target, source.out) == [first]
    played = []
    drive([target], resume=True, progress=False, on_result=lambda job, result: played.append(job.task.task_id))
    assert played == [second]
    rows = (Path(target.out) / "trajectories.jsonl").read_text().splitlines()
    assert (Path(source.out) / "trajectories.jsonl").read_text().splitlines()[0] in rows  # byte for byte
    config = json.loads((Path(target.out) / "config.json").read_text())
    assert config["adopted"][0]["rule"] == "same memory" and config["adopted"][0]["episodes"] == 1
    # the CLI: `workbench run --memory-base DIR --adopt-from RUN_DIR` does the same, then plays the rest
    assert main(["run", "--model", str(tiny_model_dir), "--memory", "traj", "--max-steps", "2", "--tasks", "0:134:67",
                 "--no-teacher-forcing", "--memory-base", str(tmp_path / "refined"), "--adopt-from", source.out,
                 "--out", str(tmp_path / "cli")]) == 0
    cli = json.loads((tmp_path / "cli" / "config.json").read_text())
    assert cli["adopted"][0]["episodes"] == 1 and cli["adopted"][0]["rule"] == "same memory"
    assert len((tmp_path / "cli" / "trajectories.jsonl").read_text().splitlines()) == 2
    assert main(["run", "--model", str(tiny_model_dir), "--memory", "traj", "--tasks", "0:1", "--adopt-from",
                 str(tmp_path / "nowhere"), "--out", str(tmp_path / "cli2")]) == 2
    # the premise: played over the refined base, the adopted task's episode is the source's, record for record
    replay = RunConfig(out=str(tmp_path / "replay"), memory_base=str(tmp_path / "refined"), **common)
    run(replay, progress=False)
    again = {d["task_id"]: d for d in iter_jsonl_dicts(Path(replay.out) / "trajectories.jsonl")}
    assert again[first] == json.loads((Path(source.out) / "trajectories.jsonl").read_text().splitlines()[0])


def test_versions_name_the_cpu_and_its_bf16_kernels():
    """bf16 results differ in the last bits between matmul kernels, so a run records which CPU played it."""
    from workbench.provenance import versions

    cpu = versions()["cpu"]
    assert cpu and any(k in cpu for k in ("amx_bf16", "avx512_bf16", "no native bf16"))


@pytest.mark.game
def test_a_budget_that_does_not_bind_adopts_the_episodes_of_another_budget(tiny_model_dir, tmp_path):
    """MemArbiter at 750 shows the same P_t as at 500 while the block fits in 500: such episodes are adopted, each
    step's policy record rewritten as the 750 policy logs it (the budget), and equal record for record to the
    episode played at 750; a budget that binds shows other memory and is played."""
    from workbench.eval.adoption import adopt_same_memory
    from workbench.eval.run_folder import load_run

    common = dict(model=str(tiny_model_dir), memory="arbiter", max_steps=3, tasks="0:134:67", teacher_forcing=False)
    source = RunConfig(out=str(tmp_path / "a500"), budget=500, **common)
    run(source, progress=False)
    assert max(s["wm"]["o200k"] for t in load_run(source.out)[0] for s in t.meta["steps"]) > 40  # 40 binds
    target = RunConfig(out=str(tmp_path / "a750"), budget=750, **common)
    assert len(adopt_same_memory(target, source.out)) == 2
    adopted = {d["task_id"]: d for d in iter_jsonl_dicts(Path(target.out) / "trajectories.jsonl")}
    assert {s["wm"]["budget"] for d in adopted.values() for s in d["meta"]["steps"]} == {750}
    assert adopt_same_memory(RunConfig(out=str(tmp_path / "a40"), budget=40, **common), source.out) == []
    played = RunConfig(out=str(tmp_path / "played750"), budget=750, **common)
    run(played, progress=False)
    assert {d["task_id"]: d for d in iter_jsonl_dicts(Path(played.out) / "trajectories.jsonl")} == adopted


@pytest.mark.game
def test_a_silent_memory_agent_adopts_react_episodes(tiny_model_dir, tmp_path):
    """A proactive memory agent that never speaks in an episode leaves ReAct's prompts untouched, so that episode
    is ReAct's: it is adopted from the `none` run, recorded as the proactive policy logs it (its tool calls,
    silence, the latency of its calls in the replay), and equals the episode the proactive run plays, record for
    record but for that wall time."""
    from workbench.eval.adoption import adopt_same_memory

    common = dict(model=str(tiny_model_dir), max_steps=6, tasks="0:28:9", teacher_forcing=False)
    react = RunConfig(out=str(tmp_path / "none"), memory="none", **common)
    run(react, progress=False)
    played = RunConfig(out=str(tmp_path / "played"), memory="proactive", **common)
    run(played, progress=False)
    episodes = {d["task_id"]: d for d in iter_jsonl_dicts(Path(played.out) / "trajectories.jsonl")}
    silent = {t for t, d in episodes.items() if not any(s.get("reminder") for s in d["meta"]["steps"])}
    assert silent and silent != set(episodes)  # both cases occur on these tasks
    target = RunConfig(out=str(tmp_path / "proactive"), memory="proactive", **common)
    assert set(adopt_same_memory(target, react.out)) == silent
    adopted = {d["task_id"]: d for d in iter_jsonl_dicts(Path(target.out) / "trajectories.jsonl")}
    def timeless(d):  # the memory agent's latency is a wall time: it differs between any two plays
        return {**d, "meta": {**d["meta"], "steps": [{**s, "proactive": {k: v for k, v in s["proactive"].items()
                                                                         if k != "latency_ms"}}
                                                     for s in d["meta"]["steps"]]}}

    assert {t: timeless(d) for t, d in adopted.items()} == {t: timeless(episodes[t]) for t in silent}
    assert all(d["meta"]["memory_policy"] == "proactive" and "proactive" in d["meta"]["steps"][0]
               for d in adopted.values())
