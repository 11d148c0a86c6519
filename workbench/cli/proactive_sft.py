"""``workbench proactive-sft``: the proactive memory agent's records of run folders as a chat SFT set."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.cli._options import add_out, out_file
from workbench.eval.run_folder import CONFIG_FILE, EPISODES_FILE, load_run, read_config
from workbench.files import FormatError, read_jsonl_models
from workbench.memory.trajectory import Trajectory
from workbench.methods.proactive import LEGACY_WINDOW, WINDOW, export_sft
from workbench.methods.proactive.sft import sft_examples

__all__ = ["add_parser", "cmd_proactive_sft", "SFT_FILE"]

SFT_FILE = "sft.jsonl"


def cmd_proactive_sft(a: argparse.Namespace) -> int:
    """Export the memory agent's prompts, tool calls and replies of ``a.runs`` to ``OUT/sft.jsonl``.

    Args:
        a: the parsed ``workbench proactive-sft`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    path = out_file(a.out, SFT_FILE, "proactive-sft", (".jsonl",))
    trajs, windows = [], set()
    for run in a.runs:
        rows = Path(run) / EPISODES_FILE
        load_run(run)  # every file of the folder, strictly
        # what its memory agent read (a folder without config.json predates the option: 10)
        window = (read_config(run).run.window if (Path(run) / CONFIG_FILE).exists() else LEGACY_WINDOW) or WINDOW
        for line, traj in read_jsonl_models(rows, Trajectory, torn_ok=True) if rows.exists() else []:
            try:
                sft_examples(traj, window)
            except (ValueError, TypeError) as e:
                raise FormatError(rows, str(e), where=f"line {line} (task {traj.task_id})",
                                  fix="it is no episode of `workbench run --memory proactive`") from None
            trajs.append(traj)
            windows.add(window)
    if len(windows) > 1:
        raise ValueError(f"the runs' memory agents read different windows ({', '.join(map(str, sorted(windows)))} "
                         "steps): export each window's runs to its own --out")
    print(json.dumps(export_sft(trajs, path, windows.pop() if windows else WINDOW) | {"out": str(path)}))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench proactive-sft``."""
    ps = sub.add_parser("proactive-sft", help="the proactive memory agent's records of run folders as a chat SFT set "
                        "(prompts, tool calls, reminder or null) for TRL's SFTTrainer")
    ps.add_argument("runs", nargs="+", help="run folders played with --memory proactive*")
    add_out(ps, f"writes {SFT_FILE} there (a path ending in .jsonl: that file, the older form)",
            file_suffixes=(".jsonl",))
    ps.set_defaults(fn=cmd_proactive_sft)
