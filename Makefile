# The two commands of the README (make run, make test), plus build and bench.
BUILD_DIR ?= build
JOBS ?= 2
# ccache hits across checkouts in different folders (CI clones elsewhere).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE := 5G

.PHONY: all deps build run test bench clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@./scripts/run.sh $(BUILD_DIR)

# Every test: the normal build, the same tests again under ASan+UBSan, the concurrency tests under
# TSan, and each fuzz target for 30 s. PREDROP_TEST_SANITIZERS=0 / PREDROP_TEST_TSAN=0 /
# PREDROP_TEST_FUZZ=0 skip the last three locally.
test: build
	@./scripts/test.sh $(BUILD_DIR)

bench: build
	@./scripts/bench.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan build-fuzz
