#!/usr/bin/env bash
# `make test`: start a throwaway PostgreSQL 15, run every ctest test against it (normal build, then
# the ASan+UBSan build, then the concurrency tests under TSan, then the fuzz targets), then the
# hold, capture, clients and evidence suites of the normal build again against a PostgreSQL 17
# (Debian 13's, from a cached debootstrap root), and stop PostgreSQL whatever happens.
# PREDROP_TEST_SANITIZERS=0, PREDROP_TEST_TSAN=0, PREDROP_TEST_FUZZ=0 and PREDROP_TEST_PG17=0 skip
# a phase; PREDROP_PG17_CTEST_ARGS replaces the PostgreSQL 17 pass's selection.
set -euo pipefail
BUILD_DIR=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-2}
work=$(mktemp -d /tmp/predrop-test.XXXXXX)
chmod 0755 "$work"
cleanup() {
  "$root/scripts/pg-cluster.sh" stop "$work/pg" || true
  [ ! -d "$work/pg17" ] || "$root/scripts/pg-cluster.sh" stop "$work/pg17" || true
}
trap cleanup EXIT
"$root/scripts/pg-cluster.sh" start "$work/pg" >/dev/null
set -a; . "$work/pg/env"; set +a
export PREDROP_TEST_WORKDIR="$work"
"$root/scripts/test-roles.sh"

status=0
failed_phases=()
# Each phase's ctest output is kept so the end of the run can name what failed: CI shows only the
# last lines of a run, and by then the failure is thousands of lines up.
# --no-tests=error: a phase whose label filter matches nothing (a label renamed, a build without
# its tests) fails instead of passing empty.
run_phase() {  # PHASE DIR ctest-args...
  local phase=$1 dir=$2 rc=0; shift 2
  (cd "$dir" && ctest --output-on-failure --no-tests=error -j "${CTEST_JOBS:-2}" "$@") 2>&1 | tee "$work/ctest-$phase.log" || rc=$?
  [ "$rc" -eq 0 ] || { status=1; failed_phases+=("$phase"); }
}
summarize() {
  [ ${#failed_phases[@]} -gt 0 ] || return 0
  echo "== what failed =="
  local phase name state verdicts=()
  for phase in "${failed_phases[@]}"; do
    local log=$work/ctest-$phase.log failed=""
    if [ ! -f "$log" ]; then
      echo "[$phase] (not a ctest phase: its report is printed above)"
      verdicts+=("FAILED [$phase]")
      continue
    fi
    # ctest's result lines of the tests that did not pass: "name state" (Failed, Timeout, Not Run, ...).
    while read -r name state; do
      failed+="$name ($state) "
      echo "[$phase] $name: last lines of its output"
      # The block ctest printed after the test's result line, up to the next test's line or the footer.
      awk -v n="$name" '
        $0 ~ ("Test +#[0-9]+: " n " ") && /\*\*\*/ { grab = 1; next }
        grab && (/^ *Start +[0-9]+:/ || /^ *[0-9]+\/[0-9]+ Test +#/ || /^[0-9]+% tests passed/) { grab = 0 }
        grab { print "  | " $0 }' "$log" | grep -v '^  | *$' | tail -n 25
    done < <(sed -n 's/^[[:space:]]*[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*\*\*\*\([A-Za-z]*\( Run\)\{0,1\}\).*/\1 \2/p' "$log")
    if [ -z "$failed" ] && grep -q "No tests were found" "$log"; then
      failed="no test matched the phase's selection"
      echo "[$phase] $failed"
    fi
    verdicts+=("FAILED [$phase]: $failed")
  done
  printf '%s\n' "${verdicts[@]}"
}

echo "== tests (RelWithDebInfo) =="
run_phase normal "$BUILD_DIR" ${CTEST_ARGS:-}

if [ "${PREDROP_TEST_SANITIZERS:-1}" != 0 ]; then
  echo "== tests under ASan+UBSan =="
  cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPREDROP_SANITIZE=ON >/dev/null
  cmake --build "$root/build-asan" -j "$jobs"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The real-client and deployment suites prove behaviour in the normal build; under the sanitizers
  # run everything that drives predrop's own code paths: unit, protocol, capture, the hold suite
  # (fail-open and fail-closed included, and the differential tests with their DROPs held), faults
  # and evidence (on two cores: hold and faults about 90 s, evidence about 60 s).
  # hold_lp.* and quarantine_lp.* are the hold and quarantine suites again with the least-privilege
  # capture role: predrop's code paths are the same ones, only the server's answers differ, so the
  # sanitizers see them once (the normal and PostgreSQL 17 phases run them).
  run_phase asan "$root/build-asan" -LE "${PREDROP_ASAN_EXCLUDE:-clients|deploy|bench}" -E '_lp\.'
fi

if [ "${PREDROP_TEST_TSAN:-1}" != 0 ]; then
  echo "== concurrency tests under TSan =="
  cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPREDROP_SANITIZE=thread >/dev/null
  # Only what the tests labelled concurrency run: predrop itself, the capture service tests, and
  # the protocol and isolation tests (the soak and the reload test are scripts around predrop).
  cmake --build "$root/build-tsan" -j "$jobs" --target predrop capture_integration_test proxy_protocol_test proxy_isolation_test
  tsan_reports=$work/tsan
  mkdir -p "$tsan_reports"
  chmod 0777 "$tsan_reports"
  # Every report goes to a file (predrop's stderr is a log the tests may not print); any file there
  # fails the phase. halt_on_error=0 so one run collects every race, not just the first.
  export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 history_size=4 log_path=$tsan_reports/report suppressions=$root/scripts/tsan.supp"
  # TSan slows predrop several-fold: a shorter, smaller soak (the accounting is the same).
  export PREDROP_SOAK_ARGS="${PREDROP_TSAN_SOAK_ARGS:---clients 30 --drops-per-s 3 --seconds 20 --direct-seconds 3}"
  run_phase tsan "$root/build-tsan" -L concurrency
  unset TSAN_OPTIONS PREDROP_SOAK_ARGS
  if compgen -G "$tsan_reports/report*" >/dev/null; then
    echo "TSan reported $(cat "$tsan_reports"/report* | grep -c '^WARNING: ThreadSanitizer') problem(s):"
    cat "$tsan_reports"/report*
    status=1
    failed_phases+=("tsan-reports")
  fi
fi

if [ "${PREDROP_TEST_FUZZ:-1}" != 0 ]; then
  echo "== fuzz targets =="
  cmake -S "$root" -B "$root/build-fuzz" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPREDROP_FUZZ=ON >/dev/null
  cmake --build "$root/build-fuzz" -j "$jobs" --target fuzz_targets
  run_phase fuzz "$root/build-fuzz" -L fuzz
fi
if [ "${PREDROP_TEST_PG17:-1}" != 0 ]; then
  echo "== hold, capture, clients, evidence and startup tests against PostgreSQL 17 =="
  # The same suites, the same build, another server: the catalog and pg_stats reads, the relay and
  # the clients' comparisons against what operators run today. Debian 12 has no PostgreSQL 17, so
  # it comes from a Debian 13 root (built once, about 40 s, then cached); its client programs
  # (pg_dump refuses a newer server) come first in PATH.
  pg17_start=$(date +%s)
  "$root/scripts/pg-cluster.sh" stop "$work/pg" || true
  if PG_MAJOR=17 "$root/scripts/pg-cluster.sh" start "$work/pg17" >/dev/null; then
    set -a; . "$work/pg17/env"; set +a
    export PATH="$PG_CLIENT_BIN:$PATH"
    echo "PostgreSQL 17 cluster up in $(( $(date +%s) - pg17_start )) s: $(psql -XAtc 'SELECT version()')"
    if "$root/scripts/test-roles.sh"; then
      # Of the hold suites' two runs, the least-privilege one (hold_lp.*, quarantine_lp.*): what a
      # newer server changes for predrop is what its catalogs let a non-superuser see; the
      # superuser runs add nothing there that the PostgreSQL 15 phase has not shown.
      run_phase pg17 "$BUILD_DIR" ${PREDROP_PG17_CTEST_ARGS:--L 'hold|capture|clients|evidence|startup' -E '^hold\.|^quarantine\.wire_'}
    else
      status=1; failed_phases+=("pg17-roles")
    fi
    "$root/scripts/pg-cluster.sh" stop "$work/pg17" || true
  else
    echo "PostgreSQL 17 cluster did not start"
    status=1; failed_phases+=("pg17-cluster")
  fi
  echo "PostgreSQL 17 phase: $(( $(date +%s) - pg17_start )) s"
fi
summarize
exit $status
