#!/bin/bash
# After the plan-free refinement (bases/agmr-plan-free) finishes: its Table 1 row (Traj over that base on all 134
# valid_unseen tasks, episodes adopted from Traj's wherever the base shows a task the same memory), then the stage
# replay (recorded inputs, constrained and unconstrained) and the pattern judge on the served SmolLM2-135M-Instruct.
set -x
cd /work/main
M=runs/full-bfloat16/04_agmr/smollm2-135m-alfworld-v2
while pgrep -f "base-out $M/bases/agmr-plan-free" >/dev/null; do sleep 20; done
env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench run --model smollm2-135m-alfworld-v2 --dtype bfloat16 \
  --split valid_unseen --tasks all --max-steps 50 --no-teacher-forcing --memory traj \
  --memory-base $M/bases/agmr-plan-free --adopt-from $M/traj --out $M/agmr-plan-free --resume --no-progress \
  > $M/agmr-plan-free.log 2>&1; echo "table-1 row exited with $? at $(date -Is)"
env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench llm-stages replay --refinement $M/bases/agmr \
  --arbiter-run runs/full-bfloat16/05_arbiter/smollm2-135m-alfworld-v2/arbiter-500 \
  --proactive-run runs/full-bfloat16/06_proactive/smollm2-135m-alfworld-v2/proactive \
  --per-stage 6 --unconstrained-too --out $M/llm-stages/replay.jsonl > $M/llm-stages/replay.log 2>&1
echo "replay exited with $? at $(date -Is)"
env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench llm-stages judge --refinement $M/bases/agmr --first-only \
  --out $M/llm-stages/judge.jsonl > $M/llm-stages/judge.log 2>&1; echo "judge exited with $? at $(date -Is)"
