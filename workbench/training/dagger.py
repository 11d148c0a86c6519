"""On-policy data for the memory-literate agent (DAgger, issue 14 item 2): roll the current agent out on
valid_train games, label every state it visits with the expert for any state, keep the labelled trajectories.

One iteration i:

1. **Roll out**: ``rollout_grid`` writes a grid (``workbench sweep``) that plays the current model on every
   valid_train game once, each game under one layout (``LAYOUTS``; game j gets layout j mod L, budgets
   alternating), with ``record_admissible`` so each state keeps its commands. Resumable like any grid.
2. **Label**: :func:`label_trajectory` replays each episode's states into the oracle
   (:mod:`workbench.envs.oracle`) over that game's planner plan. The agent's actions stay in the history — the
   failed ones ("Nothing happens."), the loops — and each state gets the expert's next action as its target; a
   state where the oracle has no answer is kept in the history and not trained on.
3. **Aggregate**: ``labelled.jsonl`` of every iteration plus the expert trajectories form the next training set.

The stored record is the agent's trajectory with ``meta["labels"]`` (one action or null per step) and
``meta["rollout"]`` (``dagger-<i>/<layout>``): the training sequence of a labelled trajectory is rendered under a
layout drawn anew (``LayoutSampler``), not necessarily the one it was played under.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from workbench.agents.policy import predated_options
from workbench.envs.alfworld import load_alfworld_tasks
from workbench.envs.memory_base import expert_trajectories_for
from workbench.envs.oracle import label_trajectory_states
from workbench.eval.compare import paired_outcomes
from workbench.eval.metrics import action_patterns
from workbench.eval.run_folder import read_episodes
from workbench.eval.sweep import load_grid, run_sweep
from workbench.memory.trajectory import Trajectory, atomic_write_text
from workbench.training.data import admissible_at
from workbench.training.layouts import BUDGETS, LAYOUTS, Layout

__all__ = ["label_trajectory", "label_run", "rollout_grid", "label_report", "write_labelled", "run_rollouts",
           "label_iteration", "iteration_dir", "parse_per_layout", "compare_iterations"]


def label_trajectory(traj: Trajectory, plan: Sequence[str]) -> list[str | None]:
    """The oracle's action at each state of ``traj`` (None where it has no answer or no admissible list)."""
    labels = label_trajectory_states(plan, [s.observation for s in traj.steps], traj.actions(),
                                     [admissible_at(traj, k) for k in range(traj.n_steps)],
                                     initial_observation=traj.initial_observation)
    return [lab.action for lab in labels]


def label_run(run_dir: str | Path, plans: dict[str, Sequence[str]], tag: str) -> list[Trajectory]:
    """Label every episode of a run folder (episodes of games without a planner plan are skipped)."""
    out = []
    for t in read_episodes(run_dir):
        if t.task_id not in plans:
            continue
        labels = label_trajectory(t, plans[t.task_id])
        out.append(t.model_copy(update={"meta": {**t.meta, "labels": labels, "rollout": tag}}))
    return out


def label_report(trajs: Sequence[Trajectory]) -> dict:
    """How the labelled states look: states, share with no answer, share where the agent's action was not the
    expert's (what on-policy data adds), failed actions and loops in the histories."""
    states = none = differ = failed = 0
    for t in trajs:
        after = [s.observation for s in t.steps[1:]] + [t.meta.get("final_observation", "")]
        for s, lab, o in zip(t.steps, t.meta["labels"], after):
            states += 1
            none += lab is None
            differ += lab is not None and lab != s.action
            failed += o.strip().lower().startswith("nothing happens")
    return {"episodes": len(trajs), "states": states, "no_answer": none / states if states else 0.0,
            "agent_differs": differ / states if states else 0.0, "failed_actions": failed,
            "by_rollout": dict(Counter(t.meta.get("rollout", "") for t in trajs))}


def config_name(layout: Layout) -> str:
    """The rollout grid's configuration (and folder) name of a layout: its family, '/' as '-'."""
    return layout.family.replace("/", "-")


def parse_per_layout(spec: str | None) -> tuple[int | None, dict[str, int]]:
    """``--per-layout`` ``K`` or ``K,NAME=K2,...`` -> (K for every layout, {layout name: its own K})."""
    if spec is None:
        return None, {}
    default, own = None, {}
    for part in (p.strip() for p in str(spec).split(",") if p.strip()):
        name, _, k = part.rpartition("=")
        if not k.isdigit() or int(k) < 1:
            raise ValueError(f"--per-layout '{spec}': '{part}' is not K or NAME=K with K >= 1")
        if name:
            known = [config_name(lay) for lay in LAYOUTS]
            if name not in known:
                raise ValueError(f"--per-layout '{spec}': no layout '{name}' (known: {', '.join(known)})")
            own[name] = int(k)
        else:
            default = int(k)
    return default, own


def rollout_grid(path: str | Path, out: str, model: str, iteration: int, n_games: int,
                 layouts: Sequence[Layout] = LAYOUTS, max_steps: int = 50, per_layout: str | None = None,
                 dtype: str = "float32", decode: str = "score") -> Path:
    """Write the grid of iteration ``iteration``'s rollouts: game j of valid_train under layout j mod L.

    Each layout is one configuration over the slice ``j0:n_games:L`` of the sorted games; budgeted layouts
    alternate 500 and 750 from one iteration to the next. ``per_layout`` (``K`` or ``K,NAME=K2,...``) keeps only
    the first K games of each layout's slice (of the named ones, their own K): a smaller iteration whose games
    still spread over the whole split. ``dtype`` is the rollouts' inference dtype: DAgger needs the states the
    current policy visits, and the expert labels them whatever the dtype, so an iteration may play in bfloat16
    where the CPU has native bf16 kernels (the grid records it; a resumed folder refuses another). ``decode``
    (``workbench.agents.loop.DECODES``): ``score`` picks among the admissible commands, so its rollouts never fail
    an action; ``generate-verbatim`` executes what the agent writes, so an iteration's states include failed
    actions ("Nothing happens.") and what the expert does after them -- the data an agent needs to recover from
    its own invalid commands (MemArbiter's Table 5 (a) setting).
    """
    L = len(layouts)
    default_k, own_k = parse_per_layout(per_layout)
    configs = []
    for j, lay in enumerate(layouts):
        if j >= n_games:
            break  # fewer games than layouts: the first n_games layouts get one game each
        name = config_name(lay)
        k = own_k.get(name, default_k)
        stop = n_games if k is None or k >= len(range(j, n_games, L)) else j + L * (k - 1) + 1
        cfg = {"name": name, "memory": lay.memory, "tasks": f"{j}:{stop}:{L}"}
        # options added since agent v2's layouts were fixed, at the value training renders them with
        # (layout_policy): the states are visited under the prompts the expert's labels are trained on
        cfg |= predated_options(lay.memory)
        if lay.ablation:
            cfg["ablation"] = lay.ablation
        if lay.budgeted:
            cfg["budget"] = BUDGETS[(iteration + j) % len(BUDGETS)]
        configs.append(cfg)
    grid = {"description": f"DAgger iteration {iteration}: {model} on valid_train, one layout per game",
            "out": out, "defaults": {"model": model, "dtype": dtype, "split": "valid_train", "max_steps": max_steps,
                                     "teacher_forcing": False, "record_admissible": True,
                                     **({"decode": decode} if decode != "score" else {})},
            "configurations": configs, "order": "interleaved"}  # stopped early, every layout has its share
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(grid, sort_keys=False))
    return path


def write_labelled(trajs: Sequence[Trajectory], path: str | Path) -> None:
    """All labelled trajectories of an iteration, written at once (atomic: a kill leaves the old file)."""
    atomic_write_text(path, "".join(json.dumps(t.model_dump(mode="json")) + "\n" for t in trajs))


def iteration_dir(root: str | Path, iteration: int) -> Path:
    return Path(root) / f"it{iteration}"


def run_rollouts(root: str | Path, iteration: int, model: str, workers: int | None = None,
                 ray_address: str | None = None, n_games: int | None = None, max_steps: int = 50,
                 per_layout: str | None = None, dtype: str = "float32", decode: str = "score") -> dict:
    """Step 1 of an iteration: write its grid and play it (resumable: run it again after a kill)."""
    it = iteration_dir(root, iteration)
    n = n_games or len(load_alfworld_tasks("valid_train"))
    grid = load_grid(rollout_grid(it / "grid.yaml", str(it / "runs"), model, iteration, n, max_steps=max_steps,
                                  per_layout=per_layout, dtype=dtype, decode=decode))
    report = run_sweep(grid, workers=workers, ray_address=ray_address)
    return {"grid": str(it / "grid.yaml"), "wall_s": report.wall_s, "played": report.jobs}


def label_iteration(root: str | Path, iteration: int) -> dict:
    """Step 2: label every finished rollout of the iteration into ``labelled.jsonl`` (+ ``label_report.json``)."""
    it = iteration_dir(root, iteration)
    plans = {e.task_id: e.actions() for e in expert_trajectories_for("valid_train") if e.source == "planner"}
    runs = _rollout_runs(it)
    if not runs:
        raise FileNotFoundError(f"{it / 'runs'}: no rollouts yet; run `workbench dagger rollout --iteration {iteration}`")
    trajs = [t for run in runs for t in label_run(run, plans, f"dagger-{iteration}/{run.name}")]
    write_labelled(trajs, it / "labelled.jsonl")
    report = label_report(trajs)
    atomic_write_text(it / "label_report.json", json.dumps(report, indent=1))
    return report


def _rollout_runs(it: Path) -> list[Path]:
    """An iteration's run folders (one per layout) that hold episodes."""
    return sorted(p for p in (it / "runs").iterdir() if (p / "trajectories.jsonl").exists())


def _episodes(it: Path) -> dict[tuple[str, str], Trajectory]:
    """(layout configuration, task id) -> episode, over an iteration's finished rollouts."""
    out = {}
    for run in _rollout_runs(it):
        for t in read_episodes(run):
            out[(run.name, t.task_id)] = t
    return out


def compare_iterations(root: str | Path, a: int, b: int) -> dict:
    """Iteration ``b``'s rollouts against iteration ``a``'s on the (layout, game) pairs both played, paired.

    Both iterations play each layout's share of the games from its start (``--per-layout`` keeps the first K), so a
    smaller iteration's pairs are all in a larger one's; budgeted layouts alternate 500 / 750 between iterations.
    Returns the paired outcome counts with the exact McNemar p-value, the same per layout, and
    :func:`workbench.eval.metrics.action_patterns` of each side over the paired episodes (does the newer policy
    still loop where it fails?). The two iterations' policies may differ in dtype: each grid records its own.
    """
    ea, eb = (_episodes(iteration_dir(root, i)) for i in (a, b))
    common = sorted(set(ea) & set(eb))
    if not common:
        raise ValueError(f"{root}: iterations {a} and {b} share no (layout, game) pair with a finished episode")
    by_layout = {}
    for lay in sorted({k[0] for k in common}):
        keys = [k for k in common if k[0] == lay]
        by_layout[lay] = paired_outcomes({k: ea[k].success for k in keys}, {k: eb[k].success for k in keys})
    return {"a": a, "b": b, "pairs": len(common),
            "paired": paired_outcomes({k: ea[k].success for k in common}, {k: eb[k].success for k in common}),
            "by_layout": by_layout,
            "action_patterns": {f"it{a}": action_patterns([ea[k] for k in common]),
                                f"it{b}": action_patterns([eb[k] for k in common])}}
