while kill -0 30611 2>/dev/null; do sleep 10; done
.venv/bin/python benchmarks/agent_eval.py --model smollm2-135m-alfworld --episode-tasks none --tf-conditions none --runs runs/full/01_baselines/smollm2-135m-alfworld
.venv/bin/python benchmarks/agent_eval.py --model smollm2-135m-instruct --episode-tasks none --tf-conditions none traj icl --runs runs/full/01_baselines/smollm2-135m-instruct
.venv/bin/python benchmarks/agent_eval.py --model smollm2-135m-alfworld --episode-tasks 1:134:2 --episode-conditions none --tf-conditions --runs runs/halves/smollm2-135m-alfworld/odd
