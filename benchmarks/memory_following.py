"""Does an agent follow the trajectory in its memory? A table from run folders, no model needed.

For every model folder under ``--runs`` and every memory condition, the episodes are compared with the trajectory
that the ``--reference`` condition (Traj) retrieved for the same task: for the Traj runs that is the memory the
agent saw; for the others (no memory, ICL) the same numbers are the level an agent reaches without it. Measures:
``workbench.eval.metrics.memory_following``.

    python benchmarks/memory_following.py --runs runs/full/01_baselines \\
        --out reports/full-bfloat16/tables/memory_following_valid_unseen.md --title "valid_unseen, all 134 tasks"
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.eval.metrics import memory_following  # noqa: E402
from workbench.memory.trajectory import Trajectory, atomic_write_text, read_jsonl  # noqa: E402

COLUMNS = ("episodes", "first action", "same leading actions", "actions in memory", "took target")


def memory_actions(reference: list[Trajectory], base, where: Path) -> dict[str, list[str]]:
    """Task id → the actions of the memory entry the reference run retrieved for it (``meta.memory_entry``)."""
    out = {}
    for t in reference:
        entry_id = t.meta.get("memory_entry")
        if not entry_id:
            raise ValueError(f"{where}: episode {t.task_id!r} has no meta.memory_entry (not a retrieval run?)")
        try:
            entry = base.get(entry_id)
        except KeyError as e:
            raise ValueError(f"{where}: episode {t.task_id!r}: memory entry {entry_id!r} is not in the memory base "
                             f"{base.root}") from e
        out[t.task_id] = [s.action for s in entry.segments]
    return out


def rows(roots: list[Path], conditions: list[str], reference: str, base) -> list[tuple[str, str, dict]]:
    """(model, condition, memory_following) for each model folder, under any root, with the reference condition."""
    found = []
    model_dirs = [p for runs in roots for p in sorted(runs.iterdir())
                  if (p / reference / "trajectories.jsonl").exists()]
    for model_dir in model_dirs:
        ref_file = model_dir / reference / "trajectories.jsonl"
        ref_episodes = read_jsonl(ref_file, Trajectory)
        mem = memory_actions(ref_episodes, base, ref_file)
        for cond in conditions:
            path = model_dir / cond / "trajectories.jsonl"
            if path.exists():
                episodes = ref_episodes if cond == reference else read_jsonl(path, Trajectory)
                found.append((model_dir.name, cond, memory_following(episodes, mem)))
    if not found:
        raise SystemExit(f"{', '.join(map(str, roots))}: no model folder with {reference}/trajectories.jsonl")
    return found


def render(found: list[tuple[str, str, dict]], title: str, command: str, reference: str) -> tuple[str, str]:
    """The markdown page and the csv of the table."""
    md = [f"# Following the memory: {title}", "",
          f"Measured with: `{command}` ({date.today().isoformat()})", "",
          f"Each episode is compared with the trajectory the `{reference}` run retrieved for its task (for "
          f"`{reference}` the memory the agent saw; for the other conditions the same measures without it). "
          "first action = episodes whose first action is the memory's first; same leading actions = mean number of "
          "leading actions equal to the memory's; actions in memory = share of an episode's distinct actions "
          "that stand verbatim in the memory; took target = episodes that pick up the object the task is about.", "",
          "| model | memory | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    csv = ["model,memory,episodes,first_action,prefix,in_memory,took_target"]
    for model, cond, m in found:
        md.append(f"| {model} | {cond} | {m['n_episodes']} | {m['first_action']:.1%} | {m['prefix']:.2f} | "
                  f"{m['in_memory']:.1%} | {m['took_target']:.1%} |")
        csv.append(f"{model},{cond},{m['n_episodes']},{m['first_action']:.4f},{m['prefix']:.4f},"
                   f"{m['in_memory']:.4f},{m['took_target']:.4f}")
    return "\n".join(md) + "\n", "\n".join(csv) + "\n"


def main(argv: list[str] | None = None, base=None) -> None:
    """The command line; ``base``: the memory base the runs retrieved from (default: ``--memory-split``'s)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, nargs="+", required=True, help="folders of MODEL/CONDITION run folders")
    ap.add_argument("--out", type=Path, required=True, help="NAME.md (a NAME.csv is written beside it)")
    ap.add_argument("--title", default="")
    ap.add_argument("--conditions", nargs="+", default=["none", "icl", "traj"])
    ap.add_argument("--reference", default="traj", help="the condition whose retrieved entries are the memory")
    ap.add_argument("--memory-split", default="valid_train", help="split of the memory base the runs retrieved from")
    args = ap.parse_args(argv)
    if base is None:
        from workbench.envs.memory_base import default_memory_base

        base = default_memory_base(args.memory_split)
    found = rows(args.runs, args.conditions, args.reference, base)
    command = "python benchmarks/memory_following.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    md, csv = render(found, args.title or " + ".join(map(str, args.runs)), command, args.reference)
    atomic_write_text(args.out.with_suffix(".csv"), csv)
    atomic_write_text(args.out, md)
    if args.out.parent.name == "tables":
        from workbench.reporting.save import Reports

        Reports(args.out.parent.parent, section="memory_following").add(args.out)  # listed in the set's index
    print(md)


if __name__ == "__main__":
    main()
