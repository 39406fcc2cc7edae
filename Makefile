# Strata's build. `make run` starts the dev cluster; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
TOOLS := $(CURDIR)/.tools
export PATH := $(TOOLS):$(PATH)

# Pinned tool versions. protoc comes from Debian's protobuf-compiler package.
STATICCHECK_VERSION := v0.8.2
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build run test deps check bench proto tools fmt vet staticcheck tidy-check proto-check imports clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/strata ./cmd/strata

# The whole hierarchy in one process on loopback, with a sample job.
run: build
	$(BIN)/strata dev

# The tests use real components (.ci/packages); deps installs the missing ones
# as root, or stops at once naming the command to run.
test: deps
	$(GO) test -race ./...

deps:
	@.ci/ensure-packages

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

check: deps fmt vet staticcheck tidy-check proto-check imports

fmt:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(TOOLS)/staticcheck
	$(TOOLS)/staticcheck ./...

tidy-check:
	@cp go.mod /tmp/strata-go.mod.bak; cp go.sum /tmp/strata-go.sum.bak; \
	$(GO) mod tidy; \
	if ! git diff --quiet --no-index /tmp/strata-go.mod.bak go.mod || ! git diff --quiet --no-index /tmp/strata-go.sum.bak go.sum; then \
		echo "go mod tidy changed go.mod/go.sum: run 'go mod tidy' and commit"; \
		cp /tmp/strata-go.mod.bak go.mod; cp /tmp/strata-go.sum.bak go.sum; exit 1; fi

# Import rules: pure packages never import grpc, raft, bbolt or coordinator.
imports:
	$(GO) test -count=1 -run TestImportRules ./internal/archtest

tools: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

PROTO_DIR := interfaces/wire
PROTOS := $(wildcard $(PROTO_DIR)/*.proto)

# Regenerate the wire code with the pinned generators.
proto: tools
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler"; exit 1; }
	protoc -I $(PROTO_DIR) --go_out=$(PROTO_DIR) --go_opt=paths=source_relative \
		--go-grpc_out=$(PROTO_DIR) --go-grpc_opt=paths=source_relative $(PROTOS)

# Fails when the committed generated code differs from what `make proto` makes.
proto-check: tools
	@if [ -z "$(PROTOS)" ]; then exit 0; fi; \
	command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler"; exit 1; }; \
	tmp=$$(mktemp -d); \
	protoc -I $(PROTO_DIR) --go_out=$$tmp --go_opt=paths=source_relative \
		--go-grpc_out=$$tmp --go-grpc_opt=paths=source_relative $(PROTOS); \
	for f in $$tmp/*.go; do \
		if ! cmp -s $$f $(PROTO_DIR)/$$(basename $$f); then \
			echo "generated code out of date: $(PROTO_DIR)/$$(basename $$f) (run 'make proto')"; rm -rf $$tmp; exit 1; fi; \
	done; rm -rf $$tmp

clean:
	rm -rf $(BIN) $(TOOLS)

# The dashboard's screenshot in the README: the browser test
# (coordinator/dashboard, headless Chromium against a dev cluster) saves it.
.PHONY: screenshot
screenshot: deps
	STRATA_SCREENSHOT=$(CURDIR)/docs/dashboard.png $(GO) test -count=1 -run '^TestDashboardInBrowser$$' ./coordinator/dashboard

# The container image strata:dev (deploy/Dockerfile): the static binary is built on
# the host, then copied onto an empty base. IMAGE=name:tag overrides the tag.
.PHONY: image
IMAGE ?= strata:dev
image:
	mkdir -p deploy/build/empty
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o deploy/build/strata ./cmd/strata
	docker build -t $(IMAGE) -f deploy/Dockerfile deploy

# The chaos suite (coordinator/chaos; docs/reliability.md "Chaos suite"): real
# processes in network namespaces, so it needs root. chaos is the short run
# (every fault kind once, a few minutes); chaos-soak injects faults for
# CHAOS_DURATION. CHAOS_FLAGS adds flags (e.g. -chaos.seed=N).
.PHONY: chaos chaos-soak
CHAOS_DURATION ?= 30m
chaos:
	STRATA_CHAOS=1 $(GO) test -count=1 -v -timeout 20m -run '^TestChaos$$' ./coordinator/chaos $(CHAOS_FLAGS)

chaos-soak:
	STRATA_CHAOS=1 $(GO) test -count=1 -v -timeout 0 -run '^TestChaosSoak$$' ./coordinator/chaos -chaos.duration=$(CHAOS_DURATION) $(CHAOS_FLAGS)

# The compose cluster (deploy/compose; deploy/README.md "Compose"): mutual TLS and
# ACL tokens on, on the local Docker engine with docker-compose. compose-smoke
# starts it, checks the ACL refusals and rolling restarts; compose-chaos checks
# the refusals, then kills and pauses leaders and a host while a job runs and
# checks the hosts' ledgers. Both build the image first and remove the cluster
# at the end; compose-deps installs docker-compose and curl (.ci/packages.compose).
.PHONY: compose-deps compose-smoke compose-chaos
compose-deps:
	@.ci/ensure-packages .ci/packages.compose

compose-smoke: compose-deps image
	STRATA_IMAGE=$(IMAGE) deploy/compose/smoke.sh

compose-chaos: compose-deps image
	STRATA_IMAGE=$(IMAGE) deploy/compose/chaos.sh

.PHONY: dst-soak
# The deterministic simulation's soak (coordinator/dst): seed after seed of the
# whole hierarchy under faults, until DST_STEPS steps (default 10M); a
# progress bar on a terminal; exits 1 on any violation. docs/reliability.md
# ("Deterministic simulation") has the figures.
DST_STEPS ?= 10000000
dst-soak:
	$(GO) run ./coordinator/dst/soak -steps $(DST_STEPS)
