"""Reproduction profiles: the parameters each report notebook runs with.

``smoke`` is what the notebooks' own ``parameters`` cells default to (what ``make test`` runs under nbval);
``default`` takes about 70 min on 2 CPU cores (70.5 min from an empty runs/default on 2026-12-06, other jobs
sharing the machine at times; 60 min on a fresh machine on 2026-12-05): over the hour it should take, see the
changelog; ``full`` is paper scale (all 134 valid_unseen tasks).
"""

from __future__ import annotations

from workbench.models.registry import DEFAULT_AGENT

__all__ = ["PROFILES", "notebook_parameters"]

TRAINED = DEFAULT_AGENT  # the notebooks follow the default agent (v2 since 2026-12-04): `model=None`
UNTRAINED = "smollm2-135m-instruct"
# the committed paper-scale runs of the default agent that 07 replays live (MemArbiter, proactive, Traj; bf16) and
# agent v1's float32 Traj run
LIVE_PARITY_RUNS = [f"../runs/full-bfloat16/{nb}/{TRAINED}/{cond}" for nb, cond in (
    ("05_arbiter", "arbiter-500"), ("06_proactive", "proactive"), ("01_baselines", "traj"))] + [
    "../runs/full/01_baselines/smollm2-135m-alfworld/traj"]  # agent v1 in float32: a replay must be exact

# the committed ScienceWorld runs notebook 08 tabulates (bf16): agent v2 (cloned on ALFWorld alone) on test@1 of ETO's
# 24 types (grids/scienceworld_v2_slice.yaml)
SCIENCEWORLD_RUNS = {f"v2 {label}": f"../runs/scienceworld/v2-slice/{cond}"
                     for label, cond in (("ReAct", "none"), ("ICL", "icl"), ("Traj", "traj"))}
# ... and at paper scale (grids/scienceworld_test.yaml: test@2 of ETO's 24 types; a condition not played yet is left
# out by the notebook, named)
SCIENCEWORLD_TEST_RUNS = {f"v2 {label}": f"../runs/scienceworld/{TRAINED}/{cond}" for label, cond in (
    ("ReAct", "none"), ("ICL", "icl"), ("Traj", "traj"), ("AGMR", "agmr"), ("w/o AGR", "agmr-no-agr"))}
# ... and the joint ALFWorld + ScienceWorld agent, the one cloned on ScienceWorld's gold paths too, at the same scale
# (grids/scienceworld_test_joint.yaml; AGMR and w/o AGR join once its refinements exist)
JOINT = "smollm2-135m-alfworld-scienceworld"
SCIENCEWORLD_JOINT_RUNS = {f"joint {label}": f"../runs/scienceworld/{JOINT}/{cond}" for label, cond in (
    ("ReAct", "none"), ("ICL", "icl"), ("Traj", "traj"))}
# MemArbiter and the proactive agent beside ReAct on test@1 of 9 short types (grids/scienceworld_methods_slice.yaml)
SCIENCEWORLD_METHOD_RUNS = {label: f"../runs/scienceworld/methods-slice/{cond}" for label, cond in (
    ("ReAct", "none"), ("MemArbiter", "arbiter"), ("proactive", "proactive"))}
# ... their parting states re-scored under one edit (`workbench partings RUN REACT_RUN --edit E --out FILE`)
SCIENCEWORLD_PARTING_RESCORES = {
    "MemArbiter with ReAct's layout (ClearMemory)": "../runs/scienceworld/partings/arbiter-clear-memory.json",
    "proactive without its reminder (RemoveReminder)": "../runs/scienceworld/partings/proactive-remove-reminder.json"}
# AGMR's refinements on ScienceWorld (make refine-scienceworld-agmr / -no-agr / -agmr-served): dev@1 of ETO's 24
SCIENCEWORLD_REFINEMENTS = {
    "AGMR (offline-scienceworld, gold path shown)": f"../runs/scienceworld/{TRAINED}/bases/agmr",
    "w/o AGR (offline-scienceworld, gold path shown)": f"../runs/scienceworld/{TRAINED}/bases/no-agr",
    "AGMR (served SmolLM2-135M-Instruct)": f"../runs/scienceworld/{TRAINED}/bases/agmr-served",
    "joint agent: AGMR (offline-scienceworld, gold path shown)": f"../runs/scienceworld/{JOINT}/bases/agmr",
    "joint agent: w/o AGR (offline-scienceworld, gold path shown)": f"../runs/scienceworld/{JOINT}/bases/no-agr"}

PROFILES: dict[str, dict[str, dict]] = {
    "smoke": {
        "01_baselines": {"episode_tasks": "0:1", "tf_tasks": "0:2", "max_steps": 3},
        "02_retrieval_heads": {"supervision_tasks": "0:4", "max_pairs": 12, "tf_tasks": "0:2", "episode_tasks": "",
                               "max_steps": 3, "n_random": 2},
        "03_utilization": {"supervision_tasks": "0:4", "max_pairs": 12, "tf_tasks": "0:2", "episode_tasks": "",
                           "max_steps": 3, "n_examples": 2},
        "04_agmr": {"refine_tasks": "0:1", "eval_tasks": "0:1", "max_steps": 3},
        "05_arbiter": {"tasks": "0:1", "max_steps": 3, "attention_tasks": "0:1", "switch_tasks": "0:1",
                       "steps_per_task": 2, "verbatim_tasks": "0:1", "sensitivity_tasks": "0:1"},
        "06_proactive": {"tasks": "0:1", "max_steps": 3, "attention_tasks": "0:1", "verbatim_tasks": "0:1",
                         "warning_tasks": "0:1"},
        "07_live": {"steps": 3, "agmr_max_steps": 3, "agmr_attempts": 1, "parity_states": 5},
        "08_scienceworld": {"task_types": ["find-plant", "lifespan-longest-lived"], "max_steps": 3,
                            "capture_steps": 3},
    },
    "default": {
        # The default agent. Episodes on 4 tasks spread over the sorted list, teacher-forced accuracy on 20 tasks
        # (0:134:7; the low-variance metric). The untrained model (it solves nothing) joins under PROFILE=full.
        "01_baselines": {"episode_tasks": "0:134:44", "tf_tasks": "0:134:7", "max_steps": 50},
        # The behaviour-cloned agent (the untrained one joins under PROFILE=full). Supervision from teacher
        # forcing (none vs traj) on 20 valid_seen tasks, capped at 30 pairs; the TF ablation on 14 valid_unseen
        # tasks x 6 arms (none, ICL, Traj, top-20, 2 x random-20: on SmolLM2-135M's 270 heads masking 5 changes
        # little, 20 does); 03 reuses 02's heads (same supervision parameters) and runs C (top-5 heads) + the
        # segment-masking test on 13 tasks (3 arms each).
        "02_retrieval_heads": {"supervision_tasks": "0:140:7", "max_pairs": 30,
                               "tf_tasks": "0:134:10", "episode_tasks": "", "max_steps": 50, "mask_k": 20,
                               "n_random": 2},
        "03_utilization": {"supervision_tasks": "0:140:7", "max_pairs": 30,
                           "tf_tasks": "0:134:11", "episode_tasks": "", "max_steps": 50, "n_examples": 4},
        # AGMR on a slice: refine on 2 valid_seen tasks (both variants; a failure costs up to 4 episodes), evaluate
        # 7 conditions (DC-RS among them) on 3 valid_unseen tasks over two worker processes. Paper scale:
        # PROFILE=full.
        "04_agmr": {"refine_tasks": "0:140:70", "eval_tasks": "0:134:45", "max_steps": 50, "workers": 2},
        # 9 working-memory conditions and the ReAct reference (read from 01 where it played the task) on 2 tasks;
        # item attention on 1 episode, band switches at 4 steps of 2 experts;
        # no written-action runs (Table 5 (a) in the paper's setting: PROFILE=full, 3 x 20 episodes), no
        # budget-sensitivity runs (PROFILE=full: 2 methods x 2 budgets x 34 tasks, those the budget cuts played).
        "05_arbiter": {"tasks": "0:134:67", "max_steps": 50, "workers": 2, "attention_tasks": "0:1",
                       "switch_tasks": "0:134:67", "steps_per_task": 4, "verbatim_tasks": None,
                       "sensitivity_tasks": None},
        # the action agent alone and 5 proactive conditions on 2 tasks; reminder attention on 1 episode.
        "06_proactive": {"tasks": "0:134:67", "max_steps": 50, "workers": 2, "attention_tasks": "0:1",
                         "verbatim_tasks": None, "warning_tasks": "0:134:67"},
        # the player 6 decisions in, one live AGMR attempt at the full step limit (a failure, then a verified edit:
        # about a minute), the replay parity of the committed runs at 20 states each (about a minute; 50 under
        # PROFILE=full): about 2 min in all
        "07_live": {"steps": 6, "agmr_max_steps": 50, "agmr_attempts": 1, "parity_runs": LIVE_PARITY_RUNS,
                    "parity_states": 20},
        # ScienceWorld: ReAct / ICL / Traj on the first test variation of two short types at their step limits, the
        # capture on the first 10 steps of boil's first test variation, and the committed reference runs' tables
        "08_scienceworld": {"split": "test@1", "task_types": ["find-plant", "lifespan-longest-lived"],
                            "max_steps": None, "capture_split": "test@1", "capture_types": ["boil"],
                            "capture_steps": 10, "reference_runs": SCIENCEWORLD_RUNS,
                            "joint_runs": SCIENCEWORLD_JOINT_RUNS,
                            "method_runs": SCIENCEWORLD_METHOD_RUNS, "refinements": SCIENCEWORLD_REFINEMENTS,
                            "parting_rescores": SCIENCEWORLD_PARTING_RESCORES},
    },
    "full": {
        # Episodes and teacher forcing of all conditions as one job list over two worker processes (one per core;
        # on a cluster, run `workbench sweep grids/valid_unseen_default_agent.yaml --ray-address ...` instead).
        "01_baselines": {"compare": [UNTRAINED], "episode_tasks": "all", "tf_tasks": "all", "max_steps": 50,
                         "workers": 2},
        # Both models (a model whose weights are missing is skipped with a warning); task-level transitions
        # from episodes on every valid_seen task, plus step-level ones.
        "02_retrieval_heads": {"compare": [UNTRAINED], "supervision_tasks": "all", "supervision_episode_tasks": "all",
                               "max_pairs": None, "tf_tasks": "all", "episode_tasks": "all", "max_steps": 50,
                               "mask_k": 20, "n_random": 5},
        "03_utilization": {"compare": [UNTRAINED], "supervision_tasks": "all", "supervision_episode_tasks": "all",
                           "max_pairs": None, "tf_tasks": "all", "episode_tasks": "0:134:4", "max_steps": 50,
                           "n_examples": 6},
        # the committed paper-scale bases were refined with the reflector shown each task's expert plan (the oracle);
        # the section on the served model reads the measurement under runs/full-bfloat16 (llm-stages/*.sh)
        "04_agmr": {"refine_tasks": "all", "eval_tasks": "all", "max_steps": 50, "workers": 2, "n_cases": 2,
                    "reflector_sees_plan": True, "llm_stages_model": "smollm2-135m-instruct"},
        # Table 5 (a) in the paper's setting (actions written and executed as written) on every 7th task
        # (grids/arbiter_verbatim_valid_unseen.yaml); MemArbiter and Flat Retrieval at the budgets that cut their
        # blocks (150, 250) on every 4th task (grids/arbiter_valid_unseen.yaml).
        "05_arbiter": {"tasks": "all", "max_steps": 50, "workers": 2, "attention_tasks": "0:134:7",
                       "switch_tasks": "0:134:7", "steps_per_task": 6, "verbatim_tasks": "0:134:7",
                       "sensitivity_tasks": "0:134:4"},
        # the committed paper-scale runs read a 10-step window (before the authors' 8 became the default)
        "06_proactive": {"tasks": "all", "max_steps": 50, "workers": 2, "attention_tasks": "0:134:7",
                         "verbatim_tasks": "0:134:7", "warning_tasks": "0:134:2", "window": 10},
        "07_live": {"steps": 6, "agmr_max_steps": 50, "agmr_attempts": 3, "parity_runs": LIVE_PARITY_RUNS,
                    "parity_states": 50},
        # the default profile's slice, and the capture on the whole longest gold path of the 7 long types' test@10
        # variations (test/boil/22, 153 steps: ~12 min)
        "08_scienceworld": {"split": "test@1", "task_types": ["find-plant", "lifespan-longest-lived"],
                            "max_steps": None, "capture_split": "test@10", "capture_types": None,
                            "capture_steps": None, "reference_runs": SCIENCEWORLD_TEST_RUNS,
                            "joint_runs": SCIENCEWORLD_JOINT_RUNS,
                            "method_runs": SCIENCEWORLD_METHOD_RUNS, "refinements": SCIENCEWORLD_REFINEMENTS,
                            "parting_rescores": SCIENCEWORLD_PARTING_RESCORES},
    },
}


def notebook_parameters(profile: str, notebook: str, reports: str, runs: str) -> dict:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile '{profile}' (known: {', '.join(PROFILES)})")
    params = dict(PROFILES[profile].get(notebook, {}))
    params.update(reports_dir=reports, runs_dir=f"{runs}/{profile}", profile=profile)
    return params
