# Shale build. `make run` and `make test` do all set-up on a fresh Debian
# machine (scripts/deps installs what is missing when run as root).
#
#   make build     engine-c (CMake) + bin/shale + bin/shalectl
#   make run       build, then start a local cluster on 127.0.0.1 (./data)
#   make test      build, then every test: engine (ctest) and Go
#   make crashtest SIGKILL/reopen cycles of the engine stress tool (docs/durability.md)
#   make fuzz      libFuzzer targets, FUZZ_TIME seconds each (clang)
#   make test-asan the engine's tests under ASan + UBSan (build/asan)
#   make chaos     Jepsen-style fault runs, every nemesis (CHAOS_TIME each)
#   make proto     regenerate api/ from the .proto files
#   make bench-cluster  Shale against local etcd 3.7 and 3.4 clusters, side by side
#   make bench-unavailability  write unavailability under leader faults, vs etcd
#   make bench-idle     what idle ranges cost: CPU, memory per replica, cold puts
#   make bench-many     30 nodes, 3,000 ranges: balance, adding and removing nodes
#   make bench-watch    watch event lag and idle watchers' memory, vs etcd
#   make bench-vs-commit BASE=<rev>  puts and gets against an earlier commit's build
#   make bench-follower-reads  follower reads against leader reads: CPU, spread
#   make bench-backup   foreground p99 with a backup running against without
#   make lint      gofmt, go vet, clang-format check
#   make bench-engine  engine db_bench vs RocksDB's (release build), markdown tables
#   make rocksdb-release  RocksDB's db_bench built for release (build/rocksdb-release)
#   make clean     remove build outputs (not ./data)
#   make image     static binaries + the FROM-scratch image (deploy/docker)
#   make compose-up / compose-down / compose-clean   the Compose cluster
#                  (SHALE_NODES=5 for the 5-node file)

SHELL := /bin/bash
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
export PATH := $(PATH):$(shell $(GO) env GOPATH 2>/dev/null)/bin:/usr/local/go/bin
export CGO_ENABLED := 1

BUILD_DIR   := build
ENGINE_DIR  := $(BUILD_DIR)/engine
ENGINE_LIB  := $(ENGINE_DIR)/libshale_engine.a
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
GO_TEST_FLAGS ?= -count=1 -timeout 25m

# The go command does not notice when the engine library changes, so every
# Go link is stamped with the library's digest: a new engine changes the
# stamp, which forces a relink (see storage/cgo.go). Evaluated when used,
# after the engine is built.
ENGINE_STAMP = $(shell sha256sum $(ENGINE_LIB) 2>/dev/null | cut -c1-16)
GO_LDFLAGS   = -X github.com/shaledb/shale/storage.engineStamp=$(ENGINE_STAMP)

.PHONY: all build deps engine go-build run test test-engine test-go sim proto \
        proto-check lint clean bench-engine crashtest fuzz test-asan chaos \
        static image compose-up compose-down compose-clean bench-cluster \
        rocksdb-release \
        bench-unavailability bench-idle bench-watch bench-many \
        bench-vs-commit bench-follower-reads bench-backup

all: build

deps:
	@scripts/deps

# ---------------------------------------------------------------- building

$(ENGINE_DIR)/CMakeCache.txt:
	cmake -S engine-c -B $(ENGINE_DIR) -DCMAKE_BUILD_TYPE=Release >/dev/null

engine: deps $(ENGINE_DIR)/CMakeCache.txt
	cmake --build $(ENGINE_DIR) -j $(JOBS)

go-build: engine
	$(GO) build -ldflags "$(GO_LDFLAGS)" -o bin/shale ./cmd/shale
	$(GO) build -ldflags "$(GO_LDFLAGS)" -o bin/shalectl ./cmd/shalectl

build: go-build

run: build
	scripts/run-local

# ------------------------------------------------------------------ deploy

IMAGE      ?= shale:dev
DOCKER_CTX := $(BUILD_DIR)/docker

# The image is FROM scratch, so shale is linked statically: the engine,
# libstdc++ and snappy from their .a files, and Go's own DNS and user
# lookups (netgo, osusergo) instead of glibc's NSS. ldd failing proves it.
# -s -w drop the DWARF and symbol tables (Go's own tables keep stack
# traces and pprof working).
static: engine
	mkdir -p $(DOCKER_CTX)/data $(DOCKER_CTX)/tmp
	chmod 1777 $(DOCKER_CTX)/tmp
	$(GO) build -tags netgo,osusergo -ldflags "$(GO_LDFLAGS) -s -w -linkmode external -extldflags -static" \
	  -o $(DOCKER_CTX)/shale ./cmd/shale
	CGO_ENABLED=0 $(GO) build -ldflags "-s -w" -o $(DOCKER_CTX)/shalectl ./cmd/shalectl
	@if ldd $(DOCKER_CTX)/shale >/dev/null 2>&1; then echo "$(DOCKER_CTX)/shale is dynamically linked"; exit 1; fi

image: static
	docker build -f deploy/docker/Dockerfile -t $(IMAGE) $(DOCKER_CTX)

compose-up: image
	SHALE_IMAGE=$(IMAGE) scripts/compose up

compose-down:
	scripts/compose down

compose-clean:
	scripts/compose clean
# Writes (64 clients and 1) and linearizable reads against a local 3-node
# Shale, etcd 3.7 (built once from the Go module proxy into build/etcd37)
# and Debian's etcd 3.4, one after the other, with the servers' CPU and
# device bytes per request (scripts/bench-vs-etcd; < 10 min).
bench-cluster: build
	scripts/bench-vs-etcd

# The same puts and gets against this tree's cluster and an earlier
# commit's, built with its own engine into build/bench-base
# (scripts/bench-vs-commit; ~4 min plus building BASE the first time).
bench-vs-commit: build
	@if [ -z "$(BASE)" ]; then echo "usage: make bench-vs-commit BASE=<rev>" >&2; exit 2; fi
	scripts/bench-vs-commit $(BASE)

# Bounded-staleness reads spread over the replicas against leader lease
# reads: servers' CPU per read, each node's share (scripts/bench-follower-reads; ~2 min).
bench-follower-reads: build
	scripts/bench-follower-reads

# Foreground p99 with full backups running against without
# (scripts/bench-backup; ~6 min).
bench-backup: build
	scripts/bench-backup

# What idle ranges cost (tests/quiesce_bench_test.go): a 3-node cluster
# split into SHALE_IDLE_RANGES ranges (1000) and left idle, at rest and
# with --disable-quiescence; CPU, memory per replica, cold-range puts.
bench-idle: build
	SHALE_BIN=$(CURDIR)/bin/shale SHALECTL_BIN=$(CURDIR)/bin/shalectl \
	  $(GO) test -count=1 -run '^$$' -bench IdleRanges -benchtime 1x -timeout 60m -v ./tests/ | grep -v '^time='

# Placement at many nodes (tests/many_nodes_bench_test.go): SHALE_MANY_NODES
# (30) node processes on 127.0.0.x with SHALE_MANY_RANGES (3000) ranges;
# balance, then 3 nodes added and 3 removed under writes, each timed.
bench-many: build
	SHALE_BIN=$(CURDIR)/bin/shale SHALECTL_BIN=$(CURDIR)/bin/shalectl \
	  $(GO) test -count=1 -run '^$$' -bench ManyNodes -benchtime 1x -timeout 120m -v ./tests/ | grep -v '^time='

# Watch side by side with etcd (tests/watch_bench_test.go): event lag at
# SHALE_WATCH_RATE (5000) writes/s with SHALE_WATCH_WATCHERS (100)
# watchers on one prefix, and the memory of SHALE_WATCH_IDLE (10000) idle
# watchers on one node; etcd from $$SHALE_ETCD_BIN or the PATH.
bench-watch: build
	SHALE_BIN=$(CURDIR)/bin/shale SHALECTL_BIN=$(CURDIR)/bin/shalectl \
	  $(GO) test -count=1 -run '^$$' -bench 'BenchmarkWatch$$' -benchtime 1x -timeout 60m -v ./tests/ | grep -v '^time='

# How long writes to a range stay unavailable when its leader is killed,
# paused, partitioned (iptables) or its disk stalls (strace), Shale beside
# etcd under the same faults (tests/unavailability_bench_test.go; ~6 min
# per etcd). SHALE_UNAVAIL_ROUNDS faults of each kind, SHALE_UNAVAIL_FAULTS
# narrows the kinds; every etcd on the PATH and in build/ is compared.
bench-unavailability: build
	SHALE_BIN=$(CURDIR)/bin/shale SHALECTL_BIN=$(CURDIR)/bin/shalectl \
	SHALE_UNAVAIL_ETCD=$$(ls $$(command -v etcd) build/etcd*/etcd 2>/dev/null | paste -sd, -) \
	  $(GO) test -count=1 -run '^$$' -bench Unavailability -benchtime 1x -timeout 60m ./tests/

# ----------------------------------------------------------------- testing

test: build
	@if [ "$$CI" = "true" ]; then $(MAKE) --no-print-directory proto-check; fi
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory test-engine
	$(MAKE) --no-print-directory test-go

test-engine: engine
	cd $(ENGINE_DIR) && ctest --output-on-failure -j $(JOBS)
	scripts/crashtest --short
	scripts/fuzz --short

# Durability (docs/durability.md). CRASHTEST_CYCLES per mode, FUZZ_TIME
# seconds per fuzz target.
crashtest: engine
	nice -n 10 scripts/crashtest

fuzz:
	nice -n 10 scripts/fuzz

test-asan:
	cmake -S engine-c -B $(BUILD_DIR)/asan -DCMAKE_BUILD_TYPE=Debug -DSHALE_ASAN=ON >/dev/null
	cmake --build $(BUILD_DIR)/asan -j $(JOBS)
	cd $(BUILD_DIR)/asan && ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# The end-to-end tests in tests/ run the binaries just built.
test-go: go-build
	@docker info >/dev/null 2>&1 || echo "test-go: TestComposeSmoke will skip: no Docker engine (docker info fails)"
	SHALE_BIN=$(CURDIR)/bin/shale SHALECTL_BIN=$(CURDIR)/bin/shalectl \
	  $(GO) test -ldflags "$(GO_LDFLAGS)" $(GO_TEST_FLAGS) ./...
	$(GO) test -tags faults -ldflags "$(GO_LDFLAGS)" $(GO_TEST_FLAGS) -run 'Fault|DiskDelay' ./node

# The deterministic simulator (sim/, docs/testing.md) for SEEDS seeds from
# SEED_BASE. A failure names its seed: go test ./sim -run TestSimulation
# -seed=S replays it with its trace.
SEEDS     ?= 1000
SEED_BASE ?= 1

sim: go-build
	cd sim && nice -n 10 $(GO) test -ldflags "$(GO_LDFLAGS)" -count=1 -timeout 0 -run '^TestSimulation$$' \
	  -seeds=$(SEEDS) -seed-base=$(SEED_BASE)

# Every nemesis of tests/jepsen for CHAOS_TIME each, then a per-nemesis
# table (docs/testing.md). CHAOS_SEED replays a schedule; CHAOS_NEMESES
# picks nemeses (comma-separated); CHAOS_NODES sizes the cluster (5).
# The runs use bin/shale-faults: the node built with the `faults` tag,
# which serves the slow-disk endpoint (node/faults_on.go) and which no
# other target builds. It links the same engine library.
CHAOS_TIME    ?= 1m
CHAOS_SEED    ?=
CHAOS_NEMESES ?=
CHAOS_NODES   ?= 5

chaos: go-build
	$(GO) build -tags faults -ldflags "$(GO_LDFLAGS)" -o bin/shale-faults ./cmd/shale
	SHALE_BIN=$(CURDIR)/bin/shale-faults SHALE_CHAOS_TIME=$(CHAOS_TIME) SHALE_CHAOS_SEED=$(CHAOS_SEED) \
	  SHALE_CHAOS_NEMESES=$(CHAOS_NEMESES) SHALE_CHAOS_NODES=$(CHAOS_NODES) \
	  nice -n 10 $(GO) test -ldflags "$(GO_LDFLAGS)" -count=1 -timeout 0 -v -run '^TestChaos$$' ./tests/jepsen

# Our db_bench against RocksDB's built for release from Debian's source
# (scripts/build-rocksdb-release, once, cached in build/rocksdb-release),
# same flags, RocksDB's default shape (8M keys) and a small one; medians of
# 3 passes, device bytes per user byte, database size (scripts/compare-rocksdb;
# BENCH_SHAPE default, small or both).
BENCH_SHAPE ?= both

bench-engine: engine rocksdb-release
	scripts/compare-rocksdb $(BENCH_SHAPE)

rocksdb-release:
	JOBS=$(JOBS) nice -n 10 scripts/build-rocksdb-release >/dev/null

# ---------------------------------------------------------------- api, lint

RAFT_PROTO_DIR = $(shell $(GO) list -m -f '{{.Dir}}' go.etcd.io/raft/v3)/raftpb
PROTO_FILES := $(wildcard api/kvpb/*.proto api/raftrpcpb/*.proto)

proto: deps
	protoc -I . -I $(RAFT_PROTO_DIR) \
	  --go_out=. --go_opt=module=github.com/shaledb/shale \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/shaledb/shale \
	  $(PROTO_FILES)

# Fails when the committed generated code differs from what make proto makes.
proto-check: proto
	@git diff --exit-code -- api/ || { echo "api/: generated code is stale; run make proto and commit"; exit 1; }

CLANG_FORMAT_FILES = $(shell git ls-files 'engine-c/*.cc' 'engine-c/*.h' 'engine-c/*.c')

lint: engine
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags faults ./node ./cmd/shale
	@if [ -n "$(CLANG_FORMAT_FILES)" ]; then clang-format --dry-run --Werror $(CLANG_FORMAT_FILES); fi

clean:
	rm -rf $(BUILD_DIR) bin
