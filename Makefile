# callgate. `make help` lists the targets.
SHELL := /bin/bash
GO    ?= go
export PATH := /usr/local/go/bin:$(PATH)

BIN := bin
CONFIG ?= configs/callgate.yaml
# The whole suite, race detector on; well under 15 minutes on 2 cores.
TEST_FLAGS ?= -race -count=1 -timeout 14m

.PHONY: help build services migrate run test lint fmt

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/gateway and bin/worker
	$(GO) build -o $(BIN)/ ./cmd/...

services: ## make sure MariaDB and RabbitMQ run on 127.0.0.1 (installs them if missing)
	scripts/services.sh

migrate: services build ## apply the database migrations
	$(BIN)/gateway -config $(CONFIG) migrate

run: migrate ## run the gateway (and worker) on :8080 against local services
	scripts/run.sh $(CONFIG)

test: services ## run every test against the real MariaDB and RabbitMQ
	$(GO) test $(TEST_FLAGS) ./...

lint: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')
