#!/bin/bash
# AGMR refinement on the 10-task valid_seen slice 0:140:14: offline (plan-free) then the served SmolLM2-135M-Instruct
set -x
cd /work/main
L=runs/full-bfloat16/04_agmr/smollm2-135m-alfworld-v2/llm-stages
B=runs/full-bfloat16/04_agmr/smollm2-135m-alfworld-v2/bases
R="env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench refine --model smollm2-135m-alfworld-v2 --dtype bfloat16 --split valid_seen --tasks 0:140:14 --max-steps 50 --variant agmr"
$R --backend offline-alfworld --base-out $L/agmr-offline --adopt-executions-from $B/agmr
$R --backend llama-server --base-out $L/agmr-llama-smollm2-135m-instruct --adopt-executions-from $L/agmr-offline
