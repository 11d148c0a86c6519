"""Replay parity of a live session against a committed run folder (issue 44, a first measurement).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/live_parity.py RUN_FOLDER [STATES]

``Session.from_run(RUN_FOLDER, task).replay()`` over the folder's episodes, in file order, until STATES (default 50)
decisions: the recorded actions are played and the agent scores each state. Prints one JSON line: how many
states reproduce the recorded choice, how many p(action) bit for bit and within 1e-3, the largest |dp|.
"""

from __future__ import annotations

import json
import sys
import time

from workbench.eval.run_folder import read_config, read_episodes
from workbench.live import Session
from workbench.models import load_model


def main(folder: str, want: int = 50) -> dict:
    cfg = read_config(folder).run
    lm = load_model(cfg.model, dtype=cfg.dtype)
    rows: list[dict] = []
    t0 = time.time()
    for ep in read_episodes(folder):
        if len(rows) >= want:
            break
        s = Session.from_run(folder, ep.task_id, model=lm)
        rows += s.replay(to_step=min(ep.n_steps, want - len(rows)))
    dp = [abs(r["p_action"] - r["recorded_p_action"]) for r in rows if r["recorded_p_action"] is not None]
    return {"folder": folder, "model": cfg.model, "dtype": cfg.dtype, "states": len(rows),
            "same_choice": sum(r["same_choice"] for r in rows),
            "p_exact": sum(r["p_action"] == r["recorded_p_action"] for r in rows),
            "p_within_1e-3": sum(d < 1e-3 for d in dp), "max_abs_dp": max(dp, default=0.0),
            "wall_s": round(time.time() - t0, 1)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 50)))
