"""Replay parity of a live session against committed run folders (issue 44's parity measurement).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/live_parity.py [--states 50] RUN_FOLDER...

``workbench.live.replay_parity`` per folder (one model load per folder, one at a time): the recorded actions are
played and the agent scores each state. Prints one JSON line per folder: how many states reproduce the recorded
choice, how many p(action) bit for bit and within 1e-3, the largest |dp|, and the CPUs that played and replayed.
"""

from __future__ import annotations

import argparse
import json

from workbench.live.session import replay_parity

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--states", type=int, default=50)
    a = ap.parse_args()
    for folder in a.folders:
        print(json.dumps(replay_parity(folder, a.states)), flush=True)
