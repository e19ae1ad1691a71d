# The two commands of the README (make run, make test), plus build and bench.
# `make build` and `make run` install and build what predrop needs to build and run, nothing of the
# tests (scripts/install-deps.sh run, BUILD_TESTING=OFF); `make test` and `make bench` add the test
# packages and build the test targets in the same build directory.
BUILD_DIR ?= build
JOBS ?= 2
# ccache hits across checkouts in different folders (CI clones elsewhere).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE := 5G
# What build-tests installs: the test packages (bench overrides it below).
DEPS = test
CONFIGURE = cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all build build-tests run test bench deb clean

all: build

build:
	@./scripts/install-deps.sh run
	@$(CONFIGURE) -DBUILD_TESTING=OFF >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Switching BUILD_TESTING only regenerates: objects and test binaries already built stay.
build-tests:
	@./scripts/install-deps.sh $(DEPS)
	@$(CONFIGURE) -DBUILD_TESTING=ON >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@./scripts/run.sh $(BUILD_DIR)

# Every test: the normal build, the same tests again under ASan+UBSan, the concurrency tests under
# TSan, and each fuzz target for 30 s. PREDROP_TEST_SANITIZERS=0 / PREDROP_TEST_TSAN=0 /
# PREDROP_TEST_FUZZ=0 skip the last three locally.
test: build-tests
	@./scripts/test.sh $(BUILD_DIR)

bench: DEPS = bench
bench: build-tests
	@./scripts/bench.sh $(BUILD_DIR)

# The Debian package $(BUILD_DIR)/predrop_VERSION_ARCH.deb from the predrop target (scripts/build-deb.sh).
deb:
	@./scripts/install-deps.sh deb
	@$(CONFIGURE) -DBUILD_TESTING=OFF >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target predrop
	@./scripts/build-deb.sh $(BUILD_DIR)/cli/predrop $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-dockerfile-steps build-asan build-tsan build-fuzz
