# The two commands of the README (make run, make test), plus build and bench.
BUILD_DIR ?= build
JOBS ?= 2

.PHONY: all deps build run test test-asan bench fuzz clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@./scripts/run.sh $(BUILD_DIR)

test: build
	@./scripts/test.sh $(BUILD_DIR)

bench: build
	@./scripts/bench.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) build-asan build-fuzz
