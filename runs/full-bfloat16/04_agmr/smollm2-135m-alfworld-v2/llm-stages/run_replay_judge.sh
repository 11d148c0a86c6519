#!/bin/bash
# The stage replay (recorded inputs, constrained and unconstrained) and the pattern judge on the served
# SmolLM2-135M-Instruct (backend llama-server, started and stopped by each command).
set -x
cd /work/main
M=runs/full-bfloat16/04_agmr/smollm2-135m-alfworld-v2
env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench llm-stages replay --refinement $M/bases/agmr \
  --arbiter-run runs/full-bfloat16/05_arbiter/smollm2-135m-alfworld-v2/arbiter-500 \
  --proactive-run runs/full-bfloat16/06_proactive/smollm2-135m-alfworld-v2/proactive \
  --per-stage 6 --unconstrained-too --out $M/llm-stages/replay.jsonl > $M/llm-stages/replay.log 2>&1
echo "replay exited with $? at $(date -Is)"
env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench llm-stages judge --refinement $M/bases/agmr --first-only \
  --out $M/llm-stages/judge.jsonl > $M/llm-stages/judge.log 2>&1; echo "judge exited with $? at $(date -Is)"
