#!/bin/bash
# MemArbiter's stages on the served SmolLM2-135M-Instruct (backend llama-server), valid_unseen 0:134:67 (2 tasks),
# budget 500, agent v2 in bfloat16, 50 steps (the offline run: ../arbiter-500); started once the replay and the judge
# (04_agmr/.../llm-stages/run_replay_judge.sh) have freed their core.
set -x
cd /work/main
while pgrep -f run_replay_judge.sh >/dev/null; do sleep 15; done
A=runs/full-bfloat16/05_arbiter/smollm2-135m-alfworld-v2/llm-stages/arbiter-500-llama-smollm2-135m-instruct
env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench run --model smollm2-135m-alfworld-v2 --dtype bfloat16 \
  --split valid_unseen --max-steps 50 --no-teacher-forcing --backend llama-server --no-progress --tasks 0:134:67 \
  --memory arbiter --budget 500 --out $A --resume > $A.log 2>&1; echo "arbiter exited with $? at $(date -Is)"
