#!/bin/bash
# Prints the episode counts before and after each kill and cmp/diff of the folders; about 10 min on 2 cores.
# Serial vs --workers 2 on 6 tasks with the default agent; kill -9 of one worker mid-episode, then of the driver, then --resume.
cd "$(dirname "$0")/.."; export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
D=runs/demo; rm -rf $D; mkdir -p $D
WB=.venv/bin/workbench
ARGS="--tasks 0:134:23 --memory traj"
/usr/bin/time -f "serial wall %e s" $WB run $ARGS --out $D/serial > $D/serial.log 2>&1; tail -2 $D/serial.log
rows() { [ -f $D/workers/trajectories.jsonl ] && wc -l < $D/workers/trajectories.jsonl || echo 0; }
setsid $WB run $ARGS --workers 2 --out $D/workers > $D/workers.log 2>&1 &
DRIVER=$!
while [ "$(rows)" -lt 1 ]; do kill -0 $DRIVER 2>/dev/null || { echo "the run ended early: see $D/workers.log"; exit 1; }; sleep 1; done
W=$(pgrep -f "ray::Worker" | head -1); echo "episodes written: $(rows); kill -9 worker $W (mid-episode)"; kill -9 $W
while [ "$(rows)" -lt 3 ]; do kill -0 $DRIVER 2>/dev/null || { echo "the run ended early: see $D/workers.log"; exit 1; }; sleep 1; done
echo "episodes written: $(rows); kill -9 driver $DRIVER"; kill -9 $DRIVER; sleep 3
echo "after the driver kill: $(rows) episodes, metrics.json: $(ls $D/workers/metrics.json 2>/dev/null || echo absent)"
echo "left by the killed driver (its Ray session): $(pgrep -s $DRIVER | wc -l) processes"; pkill -9 -s $DRIVER; sleep 1
/usr/bin/time -f "resume wall %e s" $WB run $ARGS --workers 2 --out $D/workers --resume > $D/resume.log 2>&1; tail -2 $D/resume.log
echo "after --resume: $(rows) episodes"
grep -h "worker died" $D/workers.log $D/resume.log
cmp $D/serial/trajectories.jsonl $D/workers/trajectories.jsonl && echo "trajectories.jsonl identical"
cmp $D/serial/teacher_forced.json $D/workers/teacher_forced.json && echo "teacher_forced.json identical"
diff <(python3 -c "import json;d=json.load(open('$D/serial/metrics.json'));d.pop('wall_s_this_invocation');print(json.dumps(d,sort_keys=True))") <(python3 -c "import json;d=json.load(open('$D/workers/metrics.json'));d.pop('wall_s_this_invocation');print(json.dumps(d,sort_keys=True))") && echo "metrics.json identical but wall time"
