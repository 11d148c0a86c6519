"""Experiment grids: checked before anything runs (file, configuration and key named), one job list, each
configuration's folder exactly what `workbench run` writes, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.eval.config import RunConfig
from workbench.eval.run import run
from workbench.eval.sweep import GridError, load_grid, run_sweep


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "grid.yaml"
    p.write_text(text)
    return p


GRID = """
out: {out}
defaults: {{model: {model}, split: valid_unseen, tasks: "0:134:134", max_steps: 3}}
configurations:
  - {{name: none, memory: none, teacher_forcing: false}}
  - {{name: traj, memory: traj}}
grid:
  retriever: [minilm, bm25]
"""


def test_grid_expands_configurations_times_grid(tmp_path):
    grid = load_grid(_write(tmp_path, GRID.format(out=tmp_path / "o", model="smollm2-135m-alfworld")))
    assert grid.names == ["none-minilm", "none-bm25", "traj-minilm", "traj-bm25"]
    cfg = grid.configs[3]
    assert cfg == RunConfig(out=str(tmp_path / "o" / "traj-bm25"), model="smollm2-135m-alfworld", tasks="0:134:134",
                            max_steps=3, memory="traj", retriever="bm25")


@pytest.mark.parametrize("body, message", [
    ("configurations: [{name: a, memory: none, memroy: x}]", "configuration 'a': unknown key 'memroy'"),
    ("configurations: [{name: a, memory: arbiter9}]", "configuration 'a': key 'memory': unknown memory policy 'arbiter9'"),
    ("configurations: [{name: a, memory: none, tasks: '0:x'}]", "configuration 'a': key 'tasks'"),
    ("configurations: [{name: a, memory: none, tasks: '500'}]", "configuration 'a': key 'tasks': tasks 500: out of range"),
    ("configurations: [{name: a, memory: none, max_steps: ten}]", "configuration 'a': key 'max_steps': expected an integer"),
    ("configurations: [{name: a, memory: none, dtype: fp8}]", "configuration 'a': key 'dtype'"),
    ("configurations: [{name: a, memory: none, model: /no/such/model}]", "configuration 'a': key 'model': model '/no/such/model' not found"),
    ("configurations: [{name: a, memory: none, split: valid_nowhere}]", "configuration 'a': key 'split'"),
    ("configurations: [{name: a, memory: none, out: x}]", "configuration 'a': unknown key 'out' (the folder is OUT/NAME)"),
    ("configurations: [{name: a, memory: none}, {name: a, memory: traj}]", "two configurations are named 'a'"),
    ("configurations: [{name: a/b, memory: none}]", "configuration 'a/b': key 'name'"),
    ("grid: {memory: none}", "grid: key 'memory': expected a non-empty list"),
    ("grid: {memroy: [none]}", "grid: unknown key 'memroy'"),
    ("configurations: []", "key 'configurations': expected a non-empty list"),
    ("defaults: {}", "no configurations"),
    ("confgurations: [{memory: none}]", "unknown top-level key 'confgurations'"),
    ("order: random\nconfigurations: [{name: a, memory: none}]", "key 'order': 'random' is not one of configs, interleaved"),
    ("configurations: [{name: a, memory: traj}]\nadopt_same_memory: {a: trj}",
     "adopt_same_memory: reference 'trj' is not a configuration of this grid (known: a)"),
    ("configurations: [{name: a, memory: traj}]\nadopt_same_memory: [a]", "key 'adopt_same_memory': expected a mapping"),
])
def test_bad_grids_name_file_configuration_and_key(tmp_path, body, message):
    path = _write(tmp_path, f"out: {tmp_path / 'o'}\n{body}\n")
    with pytest.raises(GridError) as err:
        load_grid(path)
    assert str(path) in str(err.value) and message in str(err.value)
    assert not (tmp_path / "o").exists()


def test_set_overrides_a_field_on_every_configuration(tmp_path):
    from workbench.eval.sweep import parse_overrides

    path = _write(tmp_path, GRID.format(out=tmp_path / "o", model="smollm2-135m-alfworld"))
    grid = load_grid(path, overrides=parse_overrides(["max_steps=7", "teacher_forcing=false"]))
    assert {c.max_steps for c in grid.configs} == {7} and not any(c.teacher_forcing for c in grid.configs)
    for items, message in ((["max_step=7"], "--set max_step: unknown key"),
                           (["retriever=bm25"], "--set retriever: the grid varies 'retriever'"),
                           (["max_steps"], "--set max_steps: expected KEY=VALUE"),
                           (["max_steps=ten"], "key 'max_steps': expected an integer")):
        with pytest.raises(GridError, match=message):
            load_grid(path, overrides=parse_overrides(items))


def test_cli_refuses_a_bad_grid_before_running(tmp_path, capsys):
    path = _write(tmp_path, f"out: {tmp_path / 'o'}\nconfigurations: [{{name: a, memory: nope}}]\n")
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert "grid.yaml: configuration 'a': key 'memory'" in err and not (tmp_path / "o").exists()
    assert main(["sweep", str(tmp_path / "missing.yaml")]) == 2
    assert "no such grid file" in capsys.readouterr().err


_A = "configurations: [{name: a, memory: none, %s}]"


@pytest.mark.parametrize("body, message", [
    # task slices, checked against the split's 134 tasks
    (_A % "tasks: ''", "configuration 'a': key 'tasks': tasks '': expected a slice"),
    (_A % "tasks: '::'", "key 'tasks': tasks '::': expected a slice"),
    (_A % "tasks: '-1:'", "key 'tasks': tasks '-1:': expected a slice"),
    (_A % "tasks: '0:99999'", "key 'tasks': tasks '0:99999': stop 99999 is past the split's 134 tasks"),
    (_A % "tasks: '134:'", "key 'tasks': tasks '134:': start 134 is past the split's 134 tasks"),
    (_A % "tasks: '5:5'", "key 'tasks': tasks '5:5' selects no task of 134"),
    (_A % "tasks: '0:20:0'", "key 'tasks': tasks '0:20:0': the step must be at least 1"),
    (_A % "tasks: '1_0:20'", "key 'tasks': tasks '1_0:20': expected a slice"),
    (_A % "tasks: '١:٢'", "key 'tasks': tasks '١:٢': expected a slice"),
    (_A % "tasks: 5", "key 'tasks': expected a task slice as a string, got 5; quote it"),
    (_A % "tasks: 10:20", None),  # YAML 1.1 would read 620 (base 60): here it is the string "10:20"
    (_A % "teacher_forcing_tasks: [0, 20]", "key 'teacher_forcing_tasks': expected a task slice as a string"),
    # numbers
    (_A % "max_steps: 1e30", "key 'max_steps': expected an integer, got 1e+30"),
    (_A % "max_steps: 1.0e+30", "key 'max_steps': expected an integer, got 1e+30"),
    (_A % "max_steps: 0", "key 'max_steps': 0 is out of range (1..1000)"),
    (_A % "max_steps: 5000", "key 'max_steps': 5000 is out of range (1..1000)"),
    (_A % "max_steps: .inf", "key 'max_steps': expected an integer, got '.inf'"),
    (_A % "max_steps: 1_0", "key 'max_steps': expected an integer, got '1_0'"),
    (_A % "max_steps: true", "key 'max_steps': expected an integer, got True"),
    (_A % "seed: -1", "key 'seed': -1 is out of range"),
    (_A % "teacher_forcing: yes", "key 'teacher_forcing': expected true or false, got 'yes'"),
    # lists
    (_A % "task_types: pick", "key 'task_types': expected a list of task types, got 'pick'"),
    (_A % "task_types: [pick, pik]", "key 'task_types': 'pik' is not a task type"),
    (_A % "task_types: [pick, pick]", "key 'task_types': ['pick', 'pick'] names one value twice"),
    (_A % "task_types: [1]", "key 'task_types': expected a list of task types"),
    # strings, names, the file's own keys
    (_A % "model: ''", "key 'model': empty"),
    (_A % "dtype: null", "key 'dtype': expected a string, got None"),
    ("configurations: [{name: 1.10, memory: none}]", "configuration #1: key 'name': expected a non-empty string, "
                                                      "got 1.1 (quote it)"),
    ("configurations: [{name: a, memory: none}]\ndescription: [x]", "key 'description': expected a string"),
    ("configurations: [{name: a, memory: none}]\norder: [configs]", "key 'order': ['configs'] is not one of"),
    ("configurations: [{name: a, memory: none}]\n1: x", "unknown top-level key 1"),
    ("grid: {max_steps: [3, 3]}", "grid: key 'max_steps': a value is listed twice"),
    ("grid: {max_steps: [3, 1e30]}", "grid: key 'max_steps': expected an integer"),
    (f"grid: {{seed: {list(range(30))}, max_steps: {list(range(1, 31))}, budget: {list(range(1, 31))}}}",
     "the grid expands to 27000 configurations (at most 10000)"),
    ("configurations: [{name: a, memory: traj}, {name: b, memory: traj}]\nadopt_same_memory: {a: a}",
     "adopt_same_memory: 'a' names itself"),
    ("configurations: [{name: a, memory: traj}]\nadopt_same_memory: {a: [b]}", "expected NAME: REFERENCE"),
    # duplicate keys: YAML would keep the last silently
    ("configurations: [{name: a, memory: none, max_steps: 3, max_steps: 4}]",
     "line 2 column 56: not valid YAML (key 'max_steps' appears twice in one mapping (first on line 2)"),
    ("configurations:\n  - name: a\n    memory: none\n    memory: traj", "line 5 column 5: not valid YAML (key "
                                                                       "'memory' appears twice in one mapping "
                                                                       "(first on line 4)"),
    ("configurations: [{name: a, memory: none}]\nconfigurations: [{name: b, memory: none}]",
     "key 'configurations' appears twice"),
    # deep nesting: a RecursionError in the YAML parser, before
    ("configurations: " + "[" * 5000 + "]" * 5000, "nested too deep"),
])
def test_malformed_grid_values_are_named(tmp_path, body, message):
    path = _write(tmp_path, f"out: {tmp_path / 'o'}\n{body}\n")
    if message is None:
        assert load_grid(path).configs[0].tasks == "10:20"
        return
    with pytest.raises(GridError) as err:
        load_grid(path)
    assert str(path) in str(err.value) and message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_a_grid_file_that_is_not_a_readable_text_file(tmp_path):
    folder = tmp_path / "grid.yaml"
    folder.mkdir()
    with pytest.raises(GridError, match=r"grid\.yaml: is a directory, where the grid file belongs"):
        load_grid(folder)
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    with pytest.raises(GridError, match=r"loop\.yaml: a symlink loop"):
        load_grid(loop)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(f"out: {tmp_path / 'o'}\n# caf\xe9\nconfigurations: [{{memory: none}}]\n".encode("latin-1"))
    with pytest.raises(GridError, match=r"latin\.yaml: line 2: not UTF-8 text \(byte 0xe9"):
        load_grid(latin)


def test_set_reads_slices_as_strings_and_refuses_bad_values(tmp_path):
    from workbench.eval.sweep import parse_overrides

    assert parse_overrides(["tasks=10:20", "max_steps=017", "teacher_forcing=false"]) == {
        "tasks": "10:20", "max_steps": 17, "teacher_forcing": False}
    with pytest.raises(GridError, match="--set max_steps: given twice"):
        parse_overrides(["max_steps=3", "max_steps=4"])
    with pytest.raises(GridError, match=r"--set x=\[: line 1 column 2: not valid YAML"):
        parse_overrides(["x=["])
    path = _write(tmp_path, GRID.format(out=tmp_path / "o", model="smollm2-135m-alfworld"))
    for items, message in ((["tasks=-1:"], "key 'tasks': tasks '-1:'"), (["max_steps=1e30"], "expected an integer"),
                           (["task_types=pick"], "expected a list of task types")):
        with pytest.raises(GridError, match=message):
            load_grid(path, overrides=parse_overrides(items))


def test_the_cli_names_the_grid_for_a_directory_and_a_deep_file(tmp_path, capsys):
    (tmp_path / "dir.yaml").mkdir()
    assert main(["sweep", str(tmp_path / "dir.yaml"), "--dry-run"]) == 2
    assert "dir.yaml: is a directory" in capsys.readouterr().err
    deep = _write(tmp_path, "out: o\nconfigurations: " + "[" * 5000 + "]" * 5000 + "\n")
    assert main(["sweep", str(deep), "--dry-run"]) == 2
    assert "grid.yaml: nested too deep" in capsys.readouterr().err


def test_sweep_records_and_metrics_are_read_strictly(tmp_path):
    from workbench.eval.sweep import _status, state_path
    from workbench.files import FormatError

    grid = load_grid(_write(tmp_path, GRID.format(out=tmp_path / "o", model="smollm2-135m-alfworld")))
    out = Path(grid.out)
    out.mkdir()
    assert state_path(grid) == out / "sweep.json"
    (out / "sweep.json").write_text('{"grid": "other.yaml", "invocations": []}')
    assert state_path(grid) == out / "sweep.grid.json"  # another grid's record: this one keeps its own
    for text, message in (('{"grid": "g", "grid": "h"}', "key 'grid' appears twice"),
                          ("[]", "holds a JSON list"),
                          ('{"grid": 3}', "field 'grid': Input should be a valid string"),
                          ('{"grid": "g", "invocations": [{"started": "yesterday", "configurations": []}]}',
                           "invocation 0: field 'started'"),
                          ("", "empty")):
        (out / "sweep.json").write_text(text)
        with pytest.raises(FormatError) as err:
            state_path(grid)
        assert str(out / "sweep.json") in str(err.value) and message in str(err.value)
    (out / "sweep.json").unlink()
    cfg = grid.configs[0]
    Path(cfg.out).mkdir()
    metrics = Path(cfg.out) / "metrics.json"
    assert _status(cfg) == {"complete": False}
    metrics.write_text('{"n_episodes": 1, "success_rate": 1.0, "teacher_forced": {"accuracy": 0.5}}')
    assert _status(cfg) == {"complete": True, "n_episodes": 1, "success_rate": 1.0, "teacher_forced": 0.5}
    for text, message in (('{"n_episodes": 1, "success_rate": NaN}', "NaN"), ("[1]", "holds a JSON list"),
                          ('{"n_episodes": "1"}', "field 'n_episodes': expected int"),
                          ('{"teacher_forced": 0.5}', "field 'teacher_forced': expected dict")):
        metrics.write_text(text)
        with pytest.raises(FormatError) as err:
            _status(cfg)
        assert str(metrics) in str(err.value) and message in str(err.value)
    metrics.unlink()
    metrics.mkdir()
    with pytest.raises(FormatError, match="is a directory"):
        _status(cfg)


def test_every_committed_grid_loads(tmp_path):
    root = Path(__file__).resolve().parents[2]
    paths = sorted((root / "grids").glob("*.yaml"))
    assert paths
    for path in paths:
        assert load_grid(path, out=str(tmp_path / path.stem)).configs


@pytest.mark.game
def test_sweep_folders_are_what_run_writes_and_it_resumes(tiny_model_dir, tmp_path):
    grid = load_grid(_write(tmp_path, GRID.format(out=tmp_path / "grid", model=tiny_model_dir)))
    report = run_sweep(grid, only=["none-minilm", "traj-minilm"], progress=False)
    assert report.jobs == {"episode": 2, "teacher_forcing": 1}
    # the same configuration played by `workbench run` writes the same files
    ref = tmp_path / "ref"
    run(RunConfig(out=str(ref), model=str(tiny_model_dir), tasks="0:134:134", max_steps=3, memory="traj"), progress=False)
    for name in ("trajectories.jsonl", "teacher_forced.json"):
        assert (tmp_path / "grid" / "traj-minilm" / name).read_bytes() == (ref / name).read_bytes()
    assert (json.loads((tmp_path / "grid" / "traj-minilm" / "config.json").read_text())["run"]
            == json.loads((ref / "config.json").read_text())["run"])
    # again: nothing left to play for those two; the others are played now
    again = run_sweep(grid, progress=False)
    assert again.jobs == {"episode": 2, "teacher_forcing": 1}
    state = json.loads((tmp_path / "grid" / "sweep.json").read_text())
    assert len(state["invocations"]) == 2 and all(s["complete"] for s in state["status"].values())
    folders = [f for f in (tmp_path / "grid").iterdir() if f.is_dir()]
    before = {f / n: (f / n).read_bytes() for f in folders for n in ("config.json", "metrics.json")}
    import workbench.eval.run_folder as run_folder

    played_with = run_folder.versions()
    with pytest.MonkeyPatch.context() as mp:  # a later commit resumes them
        mp.setattr(run_folder, "versions", lambda: {**played_with, "git_commit": "later"})
        assert run_sweep(grid, progress=False).jobs == {"episode": 0, "teacher_forcing": 0}
    # nothing played: the folders say what the invocations that played wrote (versions, wall time), byte for byte
    assert {p: p.read_bytes() for p in before} == before
    # a configuration changed under the same name is refused, naming what differs, before anything runs
    changed = _write(tmp_path, GRID.format(out=tmp_path / "grid", model=tiny_model_dir).replace("max_steps: 3",
                                                                                               "max_steps: 4"))
    with pytest.raises(ValueError, match="max_steps"):
        run_sweep(load_grid(changed), progress=False)
    with pytest.raises(GridError, match="--only nope: no such configuration"):
        run_sweep(grid, only=["nope"], progress=False)
    # an invocation that fails says so in sweep.json (what it wrote stays)
    with pytest.raises(ValueError, match="--workers 0"):
        run_sweep(grid, workers=0, progress=False)
    last = json.loads((tmp_path / "grid" / "sweep.json").read_text())["invocations"][-1]
    assert "--workers 0" in last["error"] and last["finished"]


@pytest.mark.game
def test_interleaved_order_plays_the_fewest_done_configuration_next(tiny_model_dir, tmp_path):
    """A grid stopped early is balanced: the next job is always of a configuration with the fewest jobs done,
    earlier invocations included; the folders are the same in either order."""
    from workbench.eval.driver import _ordered, _plan

    text = (f"out: {tmp_path / 'g'}\norder: interleaved\n"
            f"defaults: {{model: {tiny_model_dir}, split: valid_unseen, max_steps: 2, teacher_forcing: false}}\n"
            "configurations:\n  - {name: a, memory: none, tasks: '0:4'}\n  - {name: b, memory: none, tasks: '4:6'}\n")
    grid = load_grid(_write(tmp_path, text))
    assert grid.order == "interleaved" and load_grid(_write(tmp_path, text.replace("order: interleaved\n", ""))).order == "configs"
    names = lambda jobs: [Path(j.config.out).name for j in jobs]
    plans = [_plan(c, True) for c in grid.configs]
    assert names(_ordered(plans, "interleaved")) == ["a", "b", "a", "b", "a", "a"]
    assert names(_ordered(plans, "configs")) == ["a", "a", "a", "a", "b", "b"]
    # b played alone first: a catches up before b goes again
    run_sweep(grid, only=["b"], progress=False)
    plans = [_plan(c, True) for c in grid.configs]
    assert names(_ordered(plans, "interleaved")) == ["a", "a", "a", "a"]
    report = run_sweep(grid, progress=False)
    assert report.jobs == {"episode": 4, "teacher_forcing": 0}
    ref = tmp_path / "ref"
    run(RunConfig(out=str(ref), model=str(tiny_model_dir), tasks="0:4", max_steps=2, memory="none",
                  teacher_forcing=False), progress=False)
    assert (tmp_path / "g" / "a" / "trajectories.jsonl").read_bytes() == (ref / "trajectories.jsonl").read_bytes()


@pytest.mark.game
def test_sweep_adopts_the_episodes_another_root_played_with_the_same_parameters(tiny_model_dir, tmp_path):
    """`--adopt-from ROOT`: a grid's `none` reads the episodes notebook 01's `none` played (teacher forcing aside)
    and plays only the tasks they lack; sweep.json and config.json say so."""
    run(RunConfig(out=str(tmp_path / "01" / "m" / "none"), model=str(tiny_model_dir), tasks="0:134:134",
                  max_steps=3, memory="none"), progress=False)
    text = (f"out: {tmp_path / '06' / 'm'}\ndefaults: {{model: {tiny_model_dir}, split: valid_unseen, "
            "tasks: \"0:134:67\", max_steps: 3, teacher_forcing: false}\nconfigurations:\n  - {name: none, memory: none}\n")
    report = run_sweep(load_grid(_write(tmp_path, text)), progress=False, adopt_from=tmp_path / "01")
    assert report.jobs == {"episode": 1, "teacher_forcing": 0}  # 2 tasks: 1 adopted, 1 played
    state = json.loads((tmp_path / "06" / "m" / "sweep.json").read_text())
    assert state["invocations"][-1]["adopted"]["none"].startswith("1 episode adopted from")
    assert state["status"]["none"]["complete"]
    config = json.loads((tmp_path / "06" / "m" / "none" / "config.json").read_text())
    assert config["adopted"][0]["episodes"] == 1 and config["run"]["teacher_forcing"] is False


@pytest.mark.game
def test_two_grids_in_one_folder_keep_their_own_records(tiny_model_dir, tmp_path):
    """MemArbiter's written-action grid plays beside its main grid in one model folder: the first grid keeps
    OUT/sweep.json, the second records itself in OUT/sweep.<its stem>.json, each invocation in its own file."""
    from workbench.eval.sweep import state_path

    out = tmp_path / "model"
    text = ("out: {out}\ndefaults: {{model: {model}, split: valid_unseen, tasks: '0:1', max_steps: 2, "
            "teacher_forcing: false}}\nconfigurations:\n  - {{name: {name}, memory: none}}\n")
    first, second = tmp_path / "main.yaml", tmp_path / "main_verbatim.yaml"
    first.write_text(text.format(out=out, model=tiny_model_dir, name="a"))
    second.write_text(text.format(out=out, model=tiny_model_dir, name="b").replace("max_steps: 2", "max_steps: 1"))
    run_sweep(load_grid(first), progress=False)
    assert state_path(load_grid(first)) == out / "sweep.json"
    run_sweep(load_grid(second), progress=False)
    assert state_path(load_grid(second)) == out / "sweep.main_verbatim.json"
    main_state = json.loads((out / "sweep.json").read_text())
    side_state = json.loads((out / "sweep.main_verbatim.json").read_text())
    assert list(main_state["configurations"]) == ["a"] and len(main_state["invocations"]) == 1
    assert list(side_state["configurations"]) == ["b"] and side_state["status"]["b"]["complete"]
    run_sweep(load_grid(first), progress=False)  # the first grid again: its own file, one more invocation
    assert len(json.loads((out / "sweep.json").read_text())["invocations"]) == 2
    assert json.loads((out / "sweep.main_verbatim.json").read_text()) == side_state


@pytest.mark.game
def test_a_grid_defers_what_a_configuration_may_adopt_until_its_reference_played_it(tiny_model_dir, tmp_path):
    """`adopt_same_memory: {a750: a500, a40: a500}`: the 750 budget never binds on these short episodes, so a750
    plays nothing -- it waits for a500's episodes and adopts them; a40's memory differs, so it plays its own."""
    text = (f"out: {tmp_path / 'o'}\ndefaults: {{model: {tiny_model_dir}, split: valid_unseen, tasks: '0:134:67', "
            "max_steps: 3, teacher_forcing: false, memory: arbiter}\norder: interleaved\nconfigurations:\n"
            "  - {name: a750, budget: 750}\n  - {name: a40, budget: 40}\n  - {name: a500, budget: 500}\n"
            "adopt_same_memory: {a750: a500, a40: a500}\n")
    played = []
    report = run_sweep(load_grid(_write(tmp_path, text)), progress=False,
                       on_result=lambda job, result: played.append(Path(job.config.out).name))
    assert sorted(played) == ["a40", "a40", "a500", "a500"] and report.jobs["episode"] == 4
    assert all(json.loads((tmp_path / "o" / n / "metrics.json").read_text())["n_episodes"] == 2
               for n in ("a750", "a40", "a500"))
    state = json.loads((tmp_path / "o" / "sweep.json").read_text())["invocations"][-1]
    assert state["adopted_same_memory"] == {"a750": 2} and state["finished"] and "error" not in state
