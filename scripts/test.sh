#!/usr/bin/env bash
# `make test`: start a throwaway PostgreSQL, run every ctest test against it (normal build, then
# the sanitizer build, then the fuzz targets), and stop PostgreSQL whatever happens.
set -euo pipefail
BUILD_DIR=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-2}
work=$(mktemp -d /tmp/predrop-test.XXXXXX)
chmod 0755 "$work"
cleanup() { "$root/scripts/pg-cluster.sh" stop "$work/pg" || true; }
trap cleanup EXIT
"$root/scripts/pg-cluster.sh" start "$work/pg" >/dev/null
set -a; . "$work/pg/env"; set +a
export PREDROP_TEST_WORKDIR="$work"
"$root/scripts/test-roles.sh"

status=0
echo "== tests (RelWithDebInfo) =="
(cd "$BUILD_DIR" && ctest --output-on-failure -j "${CTEST_JOBS:-2}" ${CTEST_ARGS:-}) || status=1

if [ "${PREDROP_TEST_SANITIZERS:-1}" != 0 ]; then
  echo "== tests under ASan+UBSan =="
  cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPREDROP_SANITIZE=ON >/dev/null
  cmake --build "$root/build-asan" -j "$jobs"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The real-client and benchmark-style suites prove behaviour in the normal build; under the
  # sanitizers run the unit and protocol tests, which drive every code path of the relay.
  (cd "$root/build-asan" && ctest --output-on-failure -j "${CTEST_JOBS:-2}" -LE "${PREDROP_ASAN_EXCLUDE:-clients|deploy|bench|hold|evidence}") || status=1
fi

if [ "${PREDROP_TEST_FUZZ:-1}" != 0 ]; then
  echo "== fuzz targets =="
  cmake -S "$root" -B "$root/build-fuzz" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPREDROP_FUZZ=ON >/dev/null
  cmake --build "$root/build-fuzz" -j "$jobs" --target fuzz_targets
  (cd "$root/build-fuzz" && ctest --output-on-failure -j "${CTEST_JOBS:-2}" -L fuzz) || status=1
fi
exit $status
