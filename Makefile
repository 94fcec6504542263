# leaseapi. `make` lists the targets; every target is one a developer and CI
# (.ci/run) run the same way.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := bin/leaseapi
TEST_FLAGS := -race -count=1 -shuffle=on
# staticcheck 2026.2.2, the newest release on the module proxy; it supports
# Go 1.26. Pinned, never @latest: a new release must not break an old commit.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
# The OpenAPI linter of github.com/speakeasy-api/openapi, pinned in
# api/lint/go.mod (a module of its own, so leaseapi does not depend on it);
# api/lint/lint.yaml holds its rules. Fails on errors, prints warnings.
SPECLINT := $(GO) run -C api/lint . lint.yaml ../openapi.yaml
# Modules of their own inside the tree, so that leaseapi's go.mod stays
# free of their dependencies: the OpenAPI linter and the benchmark's drivers
# of etcd and Redis (bench/peers, run by cmd/leasebench). `go ... ./...` in
# the root does not enter them; lint and test name them. (`go mod tidy -diff`
# skips api/lint: a test-only dependency of its linter is not on the proxy.)
# deploy/helm/test pins Helm (go tool helm) and the Kubernetes and Prometheus
# Operator API types its test decodes the chart's objects into.
# release/sbom only pins cyclonedx-gomod (go tool, for make release): it has
# no code to vet, and lint checks that its go.mod is tidy.
NESTED_MODULES := api/lint bench/peers deploy/helm/test
# The chart, Helm pinned in deploy/helm/test/go.mod (no download but the
# module proxy's), and the value files make lint renders it with: the
# defaults plus the three required values, and one file per toggle.
# (HELM runs in deploy/helm/test, hence the absolute paths.)
CHART := $(CURDIR)/deploy/helm/leaseapi
HELM := $(GO) tool -C deploy/helm/test helm
CHART_VALUES := $(wildcard $(CHART)/ci/*-values.yaml)
# The chart's test only renders and decodes, with no concurrency of its own;
# without -race it reuses the packages go tool helm built, instead of a race
# build of Helm and Kubernetes (minutes more on a cold cache).
CHART_TEST_FLAGS := -count=1 -shuffle=on
# The programs the lock scenario's peers and bench/peers' tests run.
PEER_PACKAGES := etcd:etcd-server redis-server:redis-server
# The failover tier's cluster: Patroni (run with the distribution's Python,
# which must import etcd), etcd as its DCS, HAProxy in front of it.
FAILOVER_PACKAGES := patroni:patroni py/etcd:python3-etcd etcd:etcd-server haproxy:haproxy
# The Python client's tests (clients/python) run with the distribution's
# Python and its packages (py/MODULE: a module that must import), never PyPI.
PYTHON ?= /usr/bin/python3
PYTHON_PACKAGES := py/pytest:python3-pytest py/pip:python3-pip py/apscheduler:python3-apscheduler py/celery:python3-celery \
	py/redis:python3-redis py/jsonschema:python3-jsonschema py/yaml:python3-yaml \
	redis-server:redis-server psql:postgresql-client openssl:openssl

.PHONY: help build run test test-python test-node test-short fuzz lint migrate cover db-up db-down docker generate bench manifests release

help: ## list the targets
	@echo "usage: make <target>"
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

build: ## build the static binary bin/leaseapi
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/leaseapi

run: ## serve on :8080 (embedded store in ./leaseapi.db unless LEASEAPI_DATABASE_URL is set)
	$(GO) run ./cmd/leaseapi

test: ## run all tests with -race, then test-python and test-node (scripts/ensure-postgres.sh finds or starts a Postgres first, scripts/ensure-packages.sh installs promtool, prometheus, alertmanager, etcd, redis-server, the Python packages)
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-packages.sh promtool:prometheus prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager amtool:prometheus-alertmanager chromium:chromium $(PEER_PACKAGES)
	$(GO) test $(TEST_FLAGS) ./...
	$(GO) test -C bench/peers $(TEST_FLAGS) ./...
	$(GO) test -C deploy/helm/test $(CHART_TEST_FLAGS) ./...
	$(MAKE) --no-print-directory test-python
	$(MAKE) --no-print-directory test-node

# pytest exits 5 when it collected no test: make fails on it like on any
# other non-zero status.
test-python: ## run the Python client's tests (clients/python) against a leaseapi built here, Postgres and redis-server (~1.5 min)
	bash scripts/ensure-postgres.sh
	PYTHON=$(PYTHON) bash scripts/ensure-packages.sh $(PYTHON_PACKAGES)
	cd clients/python && PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -q -p no:cacheprovider --durations=5

# The Node.js client's tests (clients/node) run with the machine's Node (20
# or later) and the devDependencies of its committed lockfile (npm ci),
# against a leaseapi built here into a temporary directory.
NODE_PACKAGES := node:nodejs npm:npm psql:postgresql-client openssl:openssl
test-node: ## run the Node.js client's tests (clients/node: npm ci, node --test) against a leaseapi built here and Postgres
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-packages.sh $(NODE_PACKAGES)
	node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { echo "test-node: Node.js 20 or later is needed, found $$(node --version)"; exit 1; }
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) build -o "$$tmp/leaseapi" ./cmd/leaseapi; \
	cd clients/node && LEASEAPI_BIN="$$tmp/leaseapi" node --test --test-concurrency=1 test/*.test.js

test-short: ## run the tests that need no Postgres (nor etcd, redis-server)
	$(GO) test -short $(TEST_FLAGS) ./...
	$(GO) test -C bench/peers -short $(TEST_FLAGS) ./...
	$(GO) test -C deploy/helm/test -short $(CHART_TEST_FLAGS) ./...

fuzz: ## run every Go fuzz target of the module (found with go test -list) for an equal share of ~2 min, failing on any crash (FUZZ_BUDGET=seconds, or FUZZTIME=8s per target)
	GO=$(GO) bash scripts/fuzz.sh

lint: ## no tracked file over 1 MB but images, gofmt, go vet, staticcheck (pinned), go mod tidy, in the root and the nested modules; OpenAPI lint (pinned), helm lint and template (pinned), import directions, shell syntax
	@unformatted=$$(gofmt -l .); if [[ -n $$unformatted ]]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	@big=$$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$$1 > 1048576 && $$2 !~ /\.(png|jpe?g|gif|svg|webp)$$/ { print "  " $$2 }'); \
	if [[ -n $$big ]]; then echo "tracked files over 1 MB that are not images (a build output committed by mistake?):"; echo "$$big"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	for m in $(NESTED_MODULES); do $(GO) vet -C "$$m" ./...; (cd "$$m" && $(STATICCHECK) ./...); done
	$(GO) mod tidy -diff
	$(GO) mod tidy -C bench/peers -diff
	$(GO) mod tidy -C deploy/helm/test -diff
	$(GO) mod tidy -C release/sbom -diff
	$(SPECLINT)
	for f in $(CHART_VALUES); do $(HELM) lint --strict $(CHART) -f "$$f" && $(HELM) template leaseapi $(CHART) --kube-version 1.30.0 -f "$$f" >/dev/null; done
	$(GO) test -count=1 ./internal/archtest
	for f in scripts/*.sh .ci/run; do bash -n "$$f"; done

manifests: ## copy deploy/monitoring's rules into the chart and render deploy/kubernetes/leaseapi.yaml from it (tests fail when either is stale)
	cp deploy/monitoring/leaseapi-rules.yaml deploy/helm/leaseapi/files/leaseapi-rules.yaml
	{ echo "# Rendered from the chart deploy/helm/leaseapi with deploy/helm/kubernetes-values.yaml"; \
	  echo "# by make manifests: edit those, not this file."; \
	  $(HELM) template leaseapi $(CHART) --kube-version 1.30.0 -f $(CURDIR)/deploy/helm/kubernetes-values.yaml; } > deploy/kubernetes/leaseapi.yaml.tmp
	mv deploy/kubernetes/leaseapi.yaml.tmp deploy/kubernetes/leaseapi.yaml

migrate: ## apply the database migrations and exit (same store settings as run)
	$(GO) run ./cmd/leaseapi migrate

cover: ## run all tests with coverage into coverage.out and print the total
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-packages.sh promtool:prometheus prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager amtool:prometheus-alertmanager chromium:chromium $(PEER_PACKAGES)
	$(GO) test -count=1 -covermode=atomic -coverprofile=coverage.out ./...
	$(GO) tool cover -func=coverage.out | tail -n 1

db-up: ## start Postgres 15 on 127.0.0.1:5432 with docker compose (needs a Docker engine)
	docker compose up -d --wait postgres

db-down: ## stop the docker compose services
	docker compose down

docker: ## build the container image leaseapi:dev (needs a Docker engine)
	docker build -t leaseapi:dev .

# The release of the commit checked out (a clean working tree): static
# binaries of leaseapi, leasectl and cronreplica for linux/amd64 and arm64,
# a CycloneDX SBOM of each (cyclonedx-gomod, pinned in release/sbom/go.mod,
# a module of its own so that leaseapi does not depend on it), SHA256SUMS,
# and the image when a Docker engine answers. test/release holds it to
# reproducible bytes. docs/upgrading.md says what a version promises.
DIST ?= dist
release: ## build release VERSION=x.y.z of the commit checked out into dist/: static linux/amd64 and arm64 binaries, CycloneDX SBOMs, SHA256SUMS, reproducible; the image leaseapi:x.y.z when Docker answers
	GO=$(GO) VERSION=$(VERSION) DIST=$(DIST) bash scripts/release.sh

generate: ## regenerate api/client/client.gen.go and clients/node/src/schema.d.ts from api/openapi.yaml (oapi-codegen pinned in go.mod, openapi-typescript in clients/node's lockfile)
	$(GO) generate ./api/client
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error && npm run --silent generate

bench: ## measure leaseapi against its Postgres floor and against etcd and Redis, ~10-23 min (BENCH_FLAGS=-quick: ~2 min); docs/performance.md
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-packages.sh chromium:chromium $(PEER_PACKAGES)
	$(GO) run -tags leasebench ./cmd/leasebench -doc docs/performance.md $(BENCH_FLAGS)

.PHONY: chaos chaos-mutants chaos-failover chaos-upgrade

chaos: ## chaos suite, PR tier: 2 seeds of real processes under faults, checks I1-I14 with the owed-tick workload, two teams' webhooks (one on a receiver that hangs), two concurrency groups and alert policies (~5 min, root)
	$(GO) vet -tags chaos,chaos_mutants ./test/chaos/...
	$(GO) test -tags chaos -count=1 -v -timeout 12m -run TestChaos ./test/chaos

chaos-failover: ## failover tier: the chaos workload on a 3-node Patroni cluster across 7 failover faults, then the asynchronous and unguarded controls that must be caught (~5 min, root; docs/high-availability.md)
	bash scripts/ensure-packages.sh $(FAILOVER_PACKAGES)
	$(GO) test -tags chaos -count=1 -v -timeout 15m -run TestFailover ./test/chaos

# The previous release (the newest line of RELEASES) is built from its
# commit, which the clone must have (not a shallow one).
chaos-upgrade: ## rolling upgrade tier: the previous release (RELEASES, built from its commit) serves the chaos workload, the new release migrates, replaces it one instance at a time, rolls one back and forward, finalizes; then a breaking migration that must be caught (~3 min, root; docs/reliability.md)
	$(GO) test -tags chaos -count=1 -v -timeout 15m -run TestUpgrade ./test/chaos

chaos-mutants: ## negative controls: 10 mutants x 3 seeds, each run caught by its invariants (~14 min, root; docs/reliability.md)
	$(GO) test -tags chaos,chaos_mutants -count=1 -v -timeout 30m -run TestMutants ./test/chaos
