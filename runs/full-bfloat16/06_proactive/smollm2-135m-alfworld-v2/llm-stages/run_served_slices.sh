#!/bin/bash
# The methods' stages on the served SmolLM2-135M-Instruct (backend llama-server: a llama.cpp server started and
# stopped by the command itself), agent v2 in bfloat16, 50 steps, as the offline runs of notebooks 04-06:
#   proactive  valid_unseen 0:134:45 (3 tasks); killed mid-run by killing its server (kill -9 of the server's PID):
#              the run must stop with a typed transport error, keep its finished episodes, and --resume finish it
#   AGMR       refinement of the default base on valid_seen 0:140:28 (5 tasks), beside the offline refinement of
#              0:140:14 (llm-stages/agmr-offline, a superset)
#   arbiter    valid_unseen 0:134:67 (2 tasks), budget 500
# Small slices: a served call of the 135M model takes 2-50 s on one core of this machine (prompt length), and the
# agent waits for it at every step; the first proactive run was started by an earlier copy of this script.
set -x
cd /work/main
RUN="env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench run --model smollm2-135m-alfworld-v2 --dtype bfloat16 --split valid_unseen --max-steps 50 --no-teacher-forcing --backend llama-server --no-progress"
A=runs/full-bfloat16/05_arbiter/smollm2-135m-alfworld-v2/llm-stages/arbiter-500-llama-smollm2-135m-instruct
P=runs/full-bfloat16/06_proactive/smollm2-135m-alfworld-v2/llm-stages/proactive-llama-smollm2-135m-instruct
L=runs/full-bfloat16/04_agmr/smollm2-135m-alfworld-v2/llm-stages
RPID=$(pgrep -f "workbench run .*--out $P" | head -1)
if [ -n "$RPID" ]; then
  while [ "$(cat $P/trajectories.jsonl 2>/dev/null | wc -l)" -lt 1 ] && kill -0 $RPID 2>/dev/null; do sleep 10; done
  sleep 60  # mid-way through the second episode
  SPID=$(pgrep -f "llama_cpp.server" -P $RPID | head -1); SPID=${SPID:-$(pgrep -f "llama_cpp.server" -o)}
  echo "killing the llama.cpp server pid $SPID at $(date -Is) with $(wc -l < $P/trajectories.jsonl) episode(s) done"
  kill -9 $SPID
  while kill -0 $RPID 2>/dev/null; do sleep 2; done; echo "the run (pid $RPID) ended at $(date -Is)"
fi
$RUN --tasks 0:134:45 --memory proactive --interval 1 --window 10 --out $P --resume > $P.resume.log 2>&1; echo "resume exited with $? at $(date -Is)"
env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/workbench refine --model smollm2-135m-alfworld-v2 --dtype bfloat16 --split valid_seen --tasks 0:140:28 --max-steps 50 --variant agmr --backend llama-server --base-out $L/agmr-llama-smollm2-135m-instruct --adopt-executions-from $L/agmr-offline > $L/agmr-llama.log 2>&1; echo "agmr exited with $? at $(date -Is)"
$RUN --tasks 0:134:67 --memory arbiter --budget 500 --out $A --resume > $A.log 2>&1; echo "arbiter exited with $? at $(date -Is)"
