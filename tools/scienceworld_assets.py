"""Write ``workbench/assets/scienceworld/variations.json``: every task type's train / dev / test variation ids as
the installed ``scienceworld`` wheel numbers them, and the step limits of the 6 types ETO's protocol leaves out
(1.5x the longest gold path of the type's first 10 test variations, rounded up to a multiple of 10).

    OMP_NUM_THREADS=1 .venv/bin/python tools/scienceworld_assets.py     # ~2 min (one JVM)
"""

from __future__ import annotations

import json
import math
from importlib.metadata import version
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "workbench" / "assets" / "scienceworld" / "variations.json"


def main() -> None:
    from scienceworld import ScienceWorldEnv

    from workbench.envs.scienceworld import _ETO_LIMITS

    sim = ScienceWorldEnv("", envStepLimit=10**6)
    types, gold = {}, {}
    try:
        for t in sim.get_task_names():
            sim.load(t, 0, "easy")
            types[t] = {"train": list(sim.get_variations_train()), "dev": list(sim.get_variations_dev()),
                        "test": list(sim.get_variations_test())}
            if t not in _ETO_LIMITS:
                lengths = []
                for v in types[t]["test"][:10]:
                    sim.load(t, v, "easy", True)
                    lengths.append(len(sim.get_gold_action_sequence()))
                gold[t] = lengths
                print(t, lengths, flush=True)
    finally:
        sim.close()
    limits = {t: int(math.ceil(1.5 * max(g) / 10) * 10) for t, g in gold.items()}
    from workbench.memory.trajectory import atomic_write_text

    OUT.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(OUT, json.dumps({
        "wheel": f"scienceworld {version('scienceworld')}", "simplifications": "easy",
        "our_step_limits": limits, "our_step_limits_rule": "ceil(1.5 * longest gold path of the first 10 test "
        "variations / 10) * 10", "gold_lengths": gold, "types": types}, indent=1) + "\n")  # whole or not at all
    print(f"wrote {OUT}: {len(types)} types; our limits {limits}")


if __name__ == "__main__":
    main()
