# callgate. `make help` lists the targets.
SHELL := /bin/bash
GO    ?= go
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

BIN := bin
# The config file of make migrate and make run: make run CONFIG=my.yaml
# (docs/configuration.md; CALLGATE_* variables still win over it).
CONFIG ?= configs/callgate.yaml
# The whole suite, race detector on: about 10 minutes on a quiet 2-core
# machine, about 14 with other work beside it (docs/development.md).
# -trimpath keeps the clone's path out of the build cache's keys, so a fresh
# clone (CI's) compiles only what changed, not every package of ours again.
TEST_FLAGS ?= -race -count=1 -timeout 12m -trimpath
# The property test of a payment's life is pure computation on one
# goroutine: the race detector makes it six times slower (99 s against
# 15 s) and can find nothing there, so it is built without it
# (//go:build !race) and run on its own after the race-detector run.
PROPERTY_TEST ?= $(GO) test -count=1 -timeout 10m -trimpath -run '^FuzzMoneyInAnyOrder$$' ./test/differential/
FAULT_FLAGS ?= -tags fault -count=1 -p 1 -timeout 12m -trimpath
HA_FLAGS ?= -tags fault,ha -count=1 -p 1 -timeout 15m -trimpath
# One of each per slot of scripts/ha.sh (make test's recipe sets
# CALLGATE_HA_SLOT before it uses them).
HA_UP_LOG ?= $(or $(TMPDIR),/tmp)/callgate-ha-up-$${CALLGATE_HA_SLOT}.log
HA_TEST_LOG ?= $(or $(TMPDIR),/tmp)/callgate-ha-test-$${CALLGATE_HA_SLOT}.log
FUZZTIME ?= 30s
GOLANGCI_VERSION := v2.15.0
GOVULNCHECK_VERSION := v1.9.0

.PHONY: help build services migrate run test test-unit test-faults test-ha bench bench-ha bench-scale lint fuzz fmt

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/gateway, bin/worker and bin/loadgen
	$(GO) build -o $(BIN)/ ./cmd/...

services: ## make sure MariaDB and RabbitMQ run on 127.0.0.1 (installs them if missing)
	scripts/services.sh

# --create: the local database is made here on first use (bin/gateway
# migrate alone refuses a database that does not exist, so that a mistyped
# name in a DSN is not created).
migrate: services build ## create the database if it is missing and apply the migrations (CONFIG=FILE: another config file)
	$(BIN)/gateway -config $(CONFIG) migrate --create

# The gateway on this machine only unless CALLGATE_HTTP_ADDR says otherwise
# (demo mode serves the published demo admin token; docs/getting-started.md).
run: migrate ## run the gateway on 127.0.0.1:8080 and the worker against local services (demo mode: CALLGATE_DEMO=1)
	CALLGATE_DEMO=$${CALLGATE_DEMO:-1} CALLGATE_HTTP_ADDR=$${CALLGATE_HTTP_ADDR:-127.0.0.1:8080} scripts/run.sh $(CONFIG)

test: services ## every test: unit, integration, browser (race detector on), then the fault suite beside the HA scenarios
	scripts/chromium.sh
	@# The HA servers (and the fault suite's broker) start in the background
	@# while the unit suite runs (scripts/ha.sh up; the suites' own up waits
	@# for it). Then the HA scenarios run beside the property test and the
	@# fault suite, each on servers of its own: they mostly wait (outages,
	@# boots), and together take the HA scenarios' time instead of the sum.
	@# Both run at the shipped worker batch size only (CALLGATE_FAULT_BATCH_SIZES=1,default
	@# adds batch_size 1, a few minutes more). The HA log is
	@# shown when both are over; the servers are removed at the end. The HA
	@# scenarios run in a session of their own (a background job ignores
	@# Ctrl-C): an interrupt stops them too, and removes the servers.
	@# All of them in a slot of scripts/ha.sh this run claims (ports, node
	@# names and folder of its own: another clone's make test at the same
	@# time has another), or CALLGATE_HA_SLOT's.
	slot=$${CALLGATE_HA_SLOT:-}; [ -n "$$slot" ] || slot=$$(scripts/ha.sh slot $$$$) || exit 1; \
	  export CALLGATE_HA_SLOT=$$slot; echo "== the HA servers: scripts/ha.sh slot $$slot"; \
	trap "scripts/ha.sh down; exit 130" INT TERM; \
	  scripts/ha.sh up > $(HA_UP_LOG) 2>&1 & \
	status=0; $(GO) test $(TEST_FLAGS) ./... || status=$$?; \
	  if [ $$status = 0 ]; then \
	    setsid $(MAKE) --no-print-directory test-ha HA_KEEP=1 > $(HA_TEST_LOG) 2>&1 & ha=$$!; \
	    trap "kill -TERM -- -$$ha 2>/dev/null; scripts/ha.sh down; exit 130" INT TERM; \
	    $(PROPERTY_TEST) || status=$$?; \
	    $(MAKE) --no-print-directory test-faults HA_KEEP=1 || status=$$?; \
	    wait $$ha || status=$$?; trap - INT TERM; echo "== the HA scenarios ($(HA_TEST_LOG))"; cat $(HA_TEST_LOG); \
	  else cat $(HA_UP_LOG); fi; \
	  scripts/ha.sh down; exit $$status

test-unit: services ## the tests without the fault suite
	$(GO) test $(TEST_FLAGS) ./...
	$(PROPERTY_TEST)

test-faults: services ## the fault suite: real processes, killed workers, broker and MySQL outages (the broker it stops is its own, on 5684: scripts/ha.sh up fault; HA_KEEP=1 keeps it; in the slot CALLGATE_HA_SLOT names, else a free one it claims)
	slot=$${CALLGATE_HA_SLOT:-}; [ -n "$$slot" ] || { slot=$$(scripts/ha.sh slot $$$$) || exit 1; echo "== scripts/ha.sh slot $$slot (CALLGATE_HA_SLOT=$$slot scripts/ha.sh down removes its servers)"; }; \
	  export CALLGATE_HA_SLOT=$$slot; \
	scripts/ha.sh up fault || { [ -n "$(HA_KEEP)" ] || scripts/ha.sh down; exit 1; }; \
	status=0; env $$(scripts/ha.sh env fault) $(GO) test $(FAULT_FLAGS) -v ./test/fault/ || status=$$?; \
	  if [ -z "$(HA_KEEP)" ]; then scripts/ha.sh down; fi; exit $$status

test-ha: services ## the HA scenarios: primary lost, replication stopped, broker nodes lost, processes lost (scripts/ha.sh starts a 3-server MariaDB and a 3-node RabbitMQ, then removes them; HA_KEEP=1 keeps them; in the slot CALLGATE_HA_SLOT names, else a free one it claims)
	slot=$${CALLGATE_HA_SLOT:-}; [ -n "$$slot" ] || { slot=$$(scripts/ha.sh slot $$$$) || exit 1; echo "== scripts/ha.sh slot $$slot (CALLGATE_HA_SLOT=$$slot scripts/ha.sh down removes its servers)"; }; \
	  export CALLGATE_HA_SLOT=$$slot; \
	scripts/ha.sh up || { [ -n "$(HA_KEEP)" ] || scripts/ha.sh down; exit 1; }; \
	status=0; env $$(scripts/ha.sh env) $(GO) test $(HA_FLAGS) -v -run '^TestHA' ./test/fault/ || status=$$?; \
	  if [ -z "$(HA_KEEP)" ]; then scripts/ha.sh down; fi; exit $$status

# make bench and make bench-scale measure a MariaDB of their own
# (scripts/bench-db.sh: 127.0.0.1:3400, CALLGATE_BENCH_DB_PORT=N another
# port), with the buffer pool and redo log docs/performance.md asks for,
# never the shared one on 3306, whose settings no benchmark changes. It is
# removed at the end, on Ctrl-C too (an interrupted up removes what it
# started itself; up fails, touching nothing, when its port is taken).
# RabbitMQ is the one on 5672.
bench: services build ## the benchmark, on a MariaDB of its own (scripts/bench-db.sh): raw INSERT baseline, intake alone, worker drain, open loop, capacity sweep (ratios to the baseline)
	up=""; trap '[ -z "$$up" ] || scripts/bench-db.sh down; exit 130' INT TERM; \
	scripts/bench-db.sh up && up=1 || exit 1; \
	status=0; $(BIN)/loadgen $$(scripts/bench-db.sh flags) -bin $(BIN) -json bench-latest.json || status=$$?; \
	  scripts/bench-db.sh down; exit $$status

bench-ha: services build ## what surviving one machine costs: the intake and drain phases on the single servers, then with durability replica (3 MariaDB) and quorum queues (3 RabbitMQ nodes), in one run
	BIN=$(BIN) scripts/bench-ha.sh

# make bench-scale's size: callbacks loaded (with an attempt, two outbox
# rows and an event each) over 30 past days; about 2.8 KB of disk each
# with 1 KB payloads (BENCHMARKS.md, "At scale").
SCALE ?= 3000000

bench-scale: services build ## the benchmark at size, not part of make test, on a MariaDB of its own (scripts/bench-db.sh): the phases on empty tables, then on tables loaded with SCALE (3 million) callbacks over 30 day partitions, then the old retention DELETE of a day against DROP PARTITION under load
	up=""; trap '[ -z "$$up" ] || scripts/bench-db.sh down; exit 130' INT TERM; \
	scripts/bench-db.sh up && up=1 || exit 1; \
	status=0; $(BIN)/loadgen $$(scripts/bench-db.sh flags) -bin $(BIN) -scale $(SCALE) -json bench-scale-latest.json || status=$$?; \
	  scripts/bench-db.sh down; exit $$status

lint: ## go vet, gofmt, golangci-lint (committed config) and govulncheck
	$(GO) vet ./...
	$(GO) vet -tags fault ./test/fault/
	$(GO) vet -tags fault,ha ./test/fault/
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@command -v golangci-lint >/dev/null || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	golangci-lint run ./...
	@command -v govulncheck >/dev/null || $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
	scripts/vulncheck.sh

fuzz: ## run every fuzz target (found in the test files) for FUZZTIME (default 30s) each; the differential and chaos tests on random seeds
	@set -e; grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' cmd internal test | sort | \
	  while IFS=: read -r file fn; do fn=$${fn#func }; pkg=./$$(dirname $$file); echo "== $$fn ($$pkg)"; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) </dev/null; done

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')
