# dubflow: `make help` lists the targets and the variables they read.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

GO ?= go
export GOTOOLCHAIN ?= local
# PS_LIB (auto by default; 1, 0): auto and 1 build the asr worker's recogniser
# with its decoders kept loaded in process (pkg/speech, tag pocketsphinx_lib;
# cgo and Debian's libpocketsphinx-dev, libsphinxbase-dev and pkg-config, which
# `make packages`, `make up` and `make test` install) when scripts/ps-lib.sh
# says this machine can build it; 0: a pocketsphinx_continuous process per file.
# Expanded per target, after `packages` ran (the tests' service builds ask the
# same script).
export PS_LIB ?= auto
GOFLAGS_GIVEN := $(GOFLAGS)
export GOFLAGS = $(strip $(GOFLAGS_GIVEN) $(shell PS_LIB=$(PS_LIB) GO=$(GO) scripts/ps-lib.sh))

# Every folder under services/ whose Go files declare package main.
ALL_SERVICES := $(sort $(patsubst services/%/,%,$(dir $(shell grep -l '^package main$$' services/*/*.go 2>/dev/null))))
# SERVICES: which services `make build` builds (all by default).
SERVICES ?= $(ALL_SERVICES)
# TEST_TIMEOUT, TEST_FLAGS, TEST_PKGS: how `make test` runs go test;
# TEST_RACE=0 turns the race detector off (on by default).
TEST_TIMEOUT ?= 30m
TEST_FLAGS ?=
# TEST_PARALLEL: how many test binaries run at once (go test -p; go's default is
# the cores). Most packages wait on the stack and on the workers they start more
# than they compute, so twice the cores of this 2-core machine keeps both busy.
TEST_PARALLEL ?= 4
# TEST_POSTGRES_PORT: `make test` runs on a PostgreSQL of its own on this port
# (scripts/stack.sh starts it, max_connections 400, and stops it after): four
# packages' stacks at once outgrow a shared server's 100 connections. Empty: the
# stack's server (DATABASE_URL).
TEST_POSTGRES_PORT ?= 55432
# The slowest packages come first: go test starts packages in the order given,
# and one of them starting last would make the run's tail (`work` adds the rest).
TEST_SLOW := ./pkg/speech ./services/console ./pkg/media ./services/e2e ./pkg/step \
	./services/dubctl ./services/asr ./services/console/browsertest ./deploy ./services/dlq_recorder
TEST_PKGS ?= $(TEST_SLOW) work
TEST_RACE ?= 1
RACE_FLAG := $(if $(filter 1,$(TEST_RACE)),-race)
# staticcheck, pinned (a release that builds with Go 1.26), installed into .tools/.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := .tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck
# BENCH_PKGS: packages with benchmarks (found by default); BENCHTIME, BENCH_COUNT,
# BENCH_TIMEOUT (services/e2e dubs a 10-minute video, BENCH_LONG_MINUTES, and
# for the workers' memory an hour's, BENCH_MEMORY_MINUTES: ~10 minutes on a
# quiet 2-core machine, far more beside other load).
BENCH_PKGS ?= $(sort $(patsubst %/,./%,$(dir $(shell grep -rl --include='*_test.go' '^func Benchmark' pkg services 2>/dev/null))))
BENCHTIME ?= 1s
# BENCH: which benchmarks (a go test -bench pattern); e.g. BENCH='Pipeline|LongAndFair'
# BENCHTIME=1x for the dubbing figures alone (44 s clip, long video, short beside long).
BENCH ?= .
BENCH_COUNT ?= 1
BENCH_TIMEOUT ?= 120m
# Go files to format, outside the git-ignored folders.
GOFILES = $(shell find . -path './.*' -prune -o -path ./bin -prune -o -name '*.go' -print)
# The shared speech fixtures beside the checkout, when present.
FIXTURES := $(wildcard $(CURDIR)/../shared/fixtures/speech)
ifneq ($(FIXTURES),)
export DUBFLOW_FIXTURES ?= $(abspath $(FIXTURES))
endif
# Rebuilds bin/migrate (schema, bucket, topology) before the stack starts.
MIGRATE := if [ -d services/migrate ]; then $(MAKE) build SERVICES=migrate; fi
# Runs a command with the local stack's environment.
WITH_ENV := set -a && source .devstack/env && set +a &&

.PHONY: help
help: ## List the targets
	@echo "Usage: make <target> [VARIABLE=value ...]"
	@echo
	@grep -hE '^[a-z][a-z_-]*:.*## ' $(MAKEFILE_LIST) | sort | \
		awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'
	@echo
	@echo "Variables: SERVICES (build), TEST_PKGS TEST_PARALLEL TEST_TIMEOUT TEST_FLAGS TEST_RACE (test),"
	@echo "  BENCH BENCH_PKGS BENCHTIME BENCH_COUNT BENCH_TIMEOUT, BENCH_LONG_MINUTES (10)"
	@echo "  BENCH_MEMORY_MINUTES (60) (bench); the stack reads AMQP_URL, DATABASE_URL, S3_*"
	@echo "  (see scripts/stack.sh)."

.PHONY: build
build: ## Build the services into bin/ (SERVICES="asr tts" for some)
	@test -n "$(strip $(SERVICES))" || { echo "no services with a main package under services/" >&2; exit 1; }
	@for s in $(SERVICES); do \
		test -d services/$$s || { echo "build: no folder services/$$s" >&2; exit 1; }; \
	done
	@mkdir -p bin
	$(GO) build -o bin/ $(addprefix ./services/,$(SERVICES))
	@scripts/ffzygote.sh bin

.PHONY: packages
packages: ## Install the Debian packages the workers run and build with (what is missing; scripts/stack.sh)
	scripts/stack.sh packages

.PHONY: up
up: packages build ## Start the local stack and every built worker in the background
	scripts/stack.sh up

.PHONY: infra
infra: ## Start only RabbitMQ, Postgres and MinIO (what is not running yet)
	@$(MIGRATE)
	scripts/stack.sh up --infra-only

.PHONY: down
down: ## Stop the workers and what `make up` started
	scripts/stack.sh down

.PHONY: status
status: ## Show what runs where
	scripts/stack.sh status

.PHONY: test
test: packages ## Run every module's tests with -race against the real stack (starts what is missing, stops it after)
	@$(MIGRATE)
	$(GO) build $(TEST_PKGS)
	STACK_TEST_POSTGRES_PORT=$(TEST_POSTGRES_PORT) scripts/stack.sh with-infra $(GO) test -count=1 $(RACE_FLAG) -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(TEST_PKGS)

.PHONY: demo
demo: ## Build, start the stack and workers, dub a sample video (scripts/demo.sh)
	bash scripts/demo.sh

.PHONY: bench
bench: ## Run the Go benchmarks (BENCH_PKGS, BENCHTIME, BENCH_COUNT)
	@test -n "$(strip $(BENCH_PKGS))" || { echo "bench: no benchmarks found" >&2; exit 1; }
	@$(MIGRATE)
	scripts/stack.sh up --infra-only
	$(WITH_ENV) $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -timeout $(BENCH_TIMEOUT) -benchtime $(BENCHTIME) -count $(BENCH_COUNT) $(BENCH_PKGS)

# POOLS_TASKS: how many tasks `make pools-proof` dubs (50); POOLS_TIMEOUT bounds it.
POOLS_TASKS ?= 50
POOLS_TIMEOUT ?= 45m

.PHONY: pools-proof
pools-proof: ## Engine pools at the issue's scale: POOLS_TASKS tasks, two replicas of each worker, three fake engines per pool (make test runs 6)
	@$(MIGRATE)
	cd services/e2e && ../../scripts/stack.sh with-infra env DUBFLOW_POOLS_TASKS=$(POOLS_TASKS) \
		$(GO) test -count=1 -v -timeout $(POOLS_TIMEOUT) -run '^TestEnginePools$$' .

# SEED003_TASKS: how many tasks `make seed003-bench` dubs (20); SEED003_TIMEOUT bounds it.
SEED003_TASKS ?= 20
SEED003_TIMEOUT ?= 60m

.PHONY: seed003-bench
seed003-bench: ## Seed 003's targets measured: chain parts/hour beside the raw relay, queue-wait p50/p95, console API p99 under load (engines answering at once; not in `make test`)
	@$(MIGRATE)
	cd services/e2e && ../../scripts/stack.sh with-infra env DUBFLOW_SEED003=1 SEED003_TASKS=$(SEED003_TASKS) \
		$(GO) test -count=1 -v -timeout $(SEED003_TIMEOUT) -run '^TestSeed003$$' .

# CAPACITY_CLIPS copies of the 44 s clip and a CAPACITY_LONG_MINUTES video; HOURS_PER_DAY is the target.
CAPACITY_CLIPS ?= 8
CAPACITY_LONG_MINUTES ?= 5
HOURS_PER_DAY ?= 1000
CAPACITY_TIMEOUT ?= 2h

.PHONY: capacity
capacity: ## Measure a workload (CAPACITY_CLIPS x 44 s clip + CAPACITY_LONG_MINUTES video), plan for HOURS_PER_DAY, write deploy/capacity.json, print the README table
	@$(MIGRATE)
	cd services/e2e && ../../scripts/stack.sh with-infra env DUBFLOW_CAPACITY=1 CAPACITY_CLIPS=$(CAPACITY_CLIPS) \
		CAPACITY_LONG_MINUTES=$(CAPACITY_LONG_MINUTES) HOURS_PER_DAY=$(HOURS_PER_DAY) \
		$(GO) test -count=1 -v -timeout $(CAPACITY_TIMEOUT) -run '^TestCapacity$$' .

# CLUSTER_TEST_TIMEOUT bounds the cluster test; scripts/cluster.sh reads CLUSTER_DIR,
# CLUSTER_BASE_PORT and CLUSTER_DIST_BASE_PORT.
CLUSTER_TEST_TIMEOUT ?= 15m

.PHONY: cluster-test
cluster-test: ## Kill a node of a private 3-node RabbitMQ cluster mid-batch, then the queue leaders' node under unacked deliveries; every task done once (not in `make test`)
	scripts/cluster.sh up
	trap 'scripts/cluster.sh down' EXIT; \
		$(if $(wildcard .devstack/env),$(WITH_ENV)) DUBFLOW_CLUSTER_URL="$$(scripts/cluster.sh urls)" \
		$(GO) test -count=1 -v -timeout $(CLUSTER_TEST_TIMEOUT) -run 'TestCluster' ./pkg/step/

.PHONY: soak
soak: build ## Run the soak test (scripts/soak.sh)
	bash scripts/soak.sh

# UP_HA_FLAGS: flags of scripts/ha.sh up (--async).
UP_HA_FLAGS ?=
# CHAOS_FLAGS: flags of bin/chaos (-tasks 200 -languages 10 -seed S -duration 8m -settle 15m -keep; see
# services/chaos/README.md). The MinIO it runs is the one scripts/stack.sh builds.
CHAOS_FLAGS ?=
MINIO_VERSION = $(shell sed -n 's/^MINIO_VERSION=//p' scripts/stack.sh)

.PHONY: chaos
chaos: build ## Chaos run on a private stack: 200 tasks under kills, restarts, cuts (CHAOS_FLAGS)
	@test -x .tools/minio || { echo "chaos: building .tools/minio as scripts/stack.sh does (about 5 minutes the first time)"; \
		mkdir -p .tools && cd /tmp && GOWORK=off GOBIN=$(CURDIR)/.tools $(GO) install "github.com/minio/minio@$(MINIO_VERSION)"; }
	bin/chaos $(CHAOS_FLAGS)

# CHAOS_HA_FLAGS: flags of bin/chaos -ha (the same as CHAOS_FLAGS; -async for an
# asynchronous standby, -max-pause 30s the goal judged).
CHAOS_HA_FLAGS ?=

.PHONY: chaos-ha
chaos-ha: build ## Chaos run on a private HA stack (3 RabbitMQ nodes, Patroni primary + standby, 4 MinIO): 200 tasks while a server of each is lost; pauses per fault (CHAOS_HA_FLAGS)
	@test -x .tools/minio || { echo "chaos-ha: building .tools/minio as scripts/stack.sh does (about 5 minutes the first time)"; \
		mkdir -p .tools && cd /tmp && GOWORK=off GOBIN=$(CURDIR)/.tools $(GO) install "github.com/minio/minio@$(MINIO_VERSION)"; }
	bin/chaos -ha $(CHAOS_HA_FLAGS)

# FAILOVER_TIMEOUT bounds make failover-test.
FAILOVER_TIMEOUT ?= 20m

.PHONY: failover-test
failover-test: ## The failover tests: a primary lost mid-chain (in make test too) and an asynchronous standby promoted after the last commits (DUBFLOW_HA_LOSS=1)
	@$(MIGRATE)
	cd services/chaos && ../../scripts/stack.sh with-infra env DUBFLOW_HA_LOSS=1 \
		$(GO) test -count=1 -v -timeout $(FAILOVER_TIMEOUT) -run '^(TestFailoverMidTask|TestAsyncFailoverLosesCommitsAndConverges)$$' .

.PHONY: up-ha
up-ha: packages build ## Start the local HA stack (scripts/ha.sh: RabbitMQ cluster, Patroni pair, 4 MinIO behind HAProxy) and every worker on it; UP_HA_FLAGS=--async for an asynchronous standby
	scripts/ha.sh up $(UP_HA_FLAGS)
	set -a && source .devstack/ha.env && set +a && scripts/stack.sh up

.PHONY: down-ha
down-ha: ## Stop the workers and the local HA stack, remove its data
	scripts/stack.sh down
	scripts/ha.sh down

.PHONY: image-smoke
image-smoke: ## Build every image with podman on debootstrap bases and smoke-run each (scripts/image-smoke.sh)
	bash scripts/image-smoke.sh

# PKG: the package test-containers runs (root-relative, default ./pkg/outbox/); TEST_FLAGS apply.
PKG ?= ./pkg/outbox/

.PHONY: test-containers
test-containers: ## Run one package's tests (PKG) on testenv's containers through podman (scripts/containers.sh; not in `make test`)
	bash scripts/containers.sh $(PKG) $(RACE_FLAG) -timeout $(TEST_TIMEOUT) $(TEST_FLAGS)

.PHONY: fmt
fmt: ## Format every Go file with gofmt
	@gofmt -l -w $(GOFILES)

# The linters check both builds of the recogniser (PS_LIB): every module as the
# command per file builds it, and, when this machine can build the loaded
# decoders, pkg/speech (the only package whose files the tag picks) with them.
LINT_LIB = $(if $(filter -tags=pocketsphinx_lib,$(GOFLAGS)),github.com/dubflow/dubflow/pkg/speech/...)

.PHONY: vet
vet: ## Run go vet on every module, both builds of the recogniser (PS_LIB)
	GOFLAGS='$(GOFLAGS_GIVEN)' $(GO) vet work
	$(if $(LINT_LIB),GOFLAGS='$(GOFLAGS_GIVEN)' $(GO) vet -tags pocketsphinx_lib $(LINT_LIB))

$(STATICCHECK):
	@mkdir -p $(dir $@)
	cd /tmp && GOWORK=off GOBIN=$(CURDIR)/$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: staticcheck
staticcheck: $(STATICCHECK) ## Run staticcheck (pinned, installed into .tools/) on every module, both builds (PS_LIB)
	GOFLAGS='$(GOFLAGS_GIVEN)' $(STATICCHECK) work
	$(if $(LINT_LIB),GOFLAGS='$(GOFLAGS_GIVEN)' $(STATICCHECK) -tags pocketsphinx_lib $(LINT_LIB))

.PHONY: schema
schema: ## Rewrite migrations/schema.sql (every table and SQL function as the migrations leave them) from a freshly migrated database
	@$(MIGRATE)
	scripts/stack.sh with-infra $(GO) test -count=1 -run '^TestSchemaFileIsCurrent$$' ./pkg/store -update

.PHONY: lint
lint: vet staticcheck ## Check formatting (gofmt -l must be empty), go vet, staticcheck, the import graph and pkg/ reading no environment (pkg/internal/layers) and the shell scripts
	@out=$$(gofmt -l $(GOFILES)); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (make fmt):" >&2; echo "$$out" >&2; exit 1; fi
	@$(GO) test -count=1 -v -run '^(TestImportGraphIsLow|TestWorkersDoNotStandOnTheReadModel|TestPkgReadsNoEnvironment)$$' ./pkg/internal/layers | \
		grep -E '_test.go:|^(--- FAIL|FAIL|ok)' || { echo "lint: pkg/internal/layers failed" >&2; exit 1; }
	@for f in scripts/*.sh .ci/run; do bash -n "$$f"; done
	@if command -v shellcheck >/dev/null; then shellcheck scripts/*.sh .ci/run; fi

.PHONY: clean
clean: ## Remove bin/ (the stack's data in .devstack/ stays)
	rm -rf bin
