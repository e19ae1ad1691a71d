#!/usr/bin/env bash
# `make bench`: direct vs pgbouncer vs predrop on a throwaway PostgreSQL, side by side.
#   scripts/bench.sh [BUILD_DIR]
# Starts its own cluster (scripts/pg-cluster.sh), a pgbouncer 1.18 in session mode (trust, big
# limits: tests/bench/pgbouncer.sh) and predrop, runs tests/bench/run-bench.sh (pgbench -S, COPY out/in, RSS with idle
# clients) and prints the tables; everything it started is stopped at the end, whatever happens.
# Tunables (environment): BENCH_SECONDS (default 15; use 3 while developing), BENCH_CLIENTS, BENCH_MODES,
# BENCH_REPS, BENCH_SCALE, BENCH_COPY_MB, BENCH_COPY_REPS, BENCH_IDLE_STEPS, BENCH_SKIP ("pgbench copy
# rss", or the name of a tests/bench/NAME/run-*.sh benchmark such as hold), BENCH_PREDROP_ARGS,
# BENCH_KEEP=1 (keep the work dir), BENCH_PREDROP_SESSION=bench (predrop in the bench's session
# instead of one of its own), BENCH_PGDATA_DIR (where the cluster goes, default the work dir under
# /tmp; /dev/shm puts it on tmpfs: see README's Benchmarks for what that changes).
# See tests/bench/run-bench.sh. The soak (tests/bench/soak/run-soak.sh):
# BENCH_SOAK_SECONDS (600), BENCH_SOAK_CLIENTS (500), BENCH_SOAK_DROPS (20 a second),
# BENCH_SOAK_DIRECT_SECONDS (same as BENCH_SOAK_SECONDS), BENCH_SOAK_MAX_RSS_GROWTH_PCT (10).
set -euo pipefail
BUILD_DIR=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$root/$BUILD_DIR;; esac
export PREDROP_BIN=${PREDROP_BIN:-$BUILD_DIR/cli/predrop}
export BENCH_BUILD_DIR=$BUILD_DIR
[ -x "$PREDROP_BIN" ] || { echo "bench: $PREDROP_BIN not built (make build)" >&2; exit 1; }
command -v pgbouncer >/dev/null || { echo "bench: pgbouncer not installed (scripts/install-deps.sh)" >&2; exit 1; }

# 1000 idle clients through predrop mean 1000 client + 1000 upstream sockets.
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

[ -z "${BENCH_PGDATA_DIR:-}" ] || [ -d "$BENCH_PGDATA_DIR" ] ||
  { echo "bench: BENCH_PGDATA_DIR=$BENCH_PGDATA_DIR is not a directory" >&2; exit 1; }
work=$(mktemp -d /tmp/predrop-bench.XXXXXX)
chmod 0755 "$work"
export BENCH_WORK=$work
PGB_PID="" PREDROP_PID="" PREDROP_ALT_PID=""
# The cluster's directory: the work dir's by default, else a fresh one under BENCH_PGDATA_DIR.
pg_parent=""
if [ -n "${BENCH_PGDATA_DIR:-}" ]; then
  pg_parent=$(mktemp -d "$BENCH_PGDATA_DIR/predrop-bench-pg.XXXXXX")
  chmod 0755 "$pg_parent"
  pg=$pg_parent/pg
else
  pg=$work/pg
  pg_parent=$work
fi
cleanup() {
  [ -n "$PREDROP_PID" ] && "$root/tests/support/stop-predrop.sh" "$PREDROP_PID" >/dev/null 2>&1 || true
  [ -n "$PREDROP_ALT_PID" ] && "$root/tests/support/stop-predrop.sh" "$PREDROP_ALT_PID" >/dev/null 2>&1 || true
  [ -n "$PGB_PID" ] && "$root/tests/bench/pgbouncer.sh" stop "$PGB_PID" || true
  "$root/scripts/pg-cluster.sh" stop "$pg" || true
  if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "bench: work dir kept: $work (cluster: $pg)"; else rm -rf "$work" "$pg_parent"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench: cluster in $pg ($(df --output=fstype "$pg_parent" 2>/dev/null | tail -n 1) filesystem)"
"$root/scripts/pg-cluster.sh" start "$pg" >/dev/null
set -a; . "$pg/env"; set +a
# Every client leg plaintext, as predrop's and PgBouncer's are here: the cluster has ssl = on, so
# libpq's default (sslmode=prefer) put pgbench's direct runs alone on TLS, and direct paid for it
# (the recreate cycle at c=1: 355-372 tps on TLS against 430-478 plaintext, same run), which raised
# every ratio against direct by about a fifth. Python benches that start from a clean environment
# (holdlib) set it again (benchlib.bench_hold).
export PGSSLMODE=disable
# max_wal_size=4GB keeps checkpoints out of the COPY runs; 1000 idle clients through predrop need 1000 backends.
psql -X -q -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres \
  -c "ALTER SYSTEM SET max_connections = 1200" -c "ALTER SYSTEM SET max_wal_size = '4GB'"
as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
as_owner /usr/lib/postgresql/15/bin/pg_ctl -D "$pg/data" -l "$pg/server.log" -m fast -w -t 60 restart >/dev/null

eval "$("$root/tests/bench/pgbouncer.sh" start "$work" "$PGPORT")"
# PgBouncer daemonizes into a session of its own, and so does the postmaster under pg_ctl; predrop
# gets one too (setsid), as it has under systemd or in a container. It matters on this machine: with
# the kernel's autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled) every session is one
# scheduling group with one fair share of the CPU, so a proxy left in the bench's session would share
# a share with pgbench and psql, unlike PgBouncer. BENCH_PREDROP_SESSION=bench measures that placement
# (it helps COPY OUT, where the backend then keeps a whole share, and costs at pgbench -c 16). The
# line below says which was measured.
[ "${BENCH_PREDROP_SESSION:-own}" = own ] && export PREDROP_OWN_SESSION=1
# shellcheck disable=SC2086
eval "$("$root/tests/support/start-predrop.sh" "$work" ${BENCH_PREDROP_ARGS:-})"
export PGB_PORT PGB_PID PREDROP_PORT PREDROP_PID
# BENCH_PREDROP_ALT="PREDROP_THREADS=1": a second predrop, the same binary with these environment
# settings (the PREDROP_* overrides of the config keys), joins the pgbench runs as a fourth target
# ("predrop_alt"), so that two configurations are compared in one run, interleaved, rather than in
# runs the host's drift separates.
if [ -n "${BENCH_PREDROP_ALT:-}" ]; then
  # shellcheck disable=SC2086
  alt=$(env $BENCH_PREDROP_ALT "$root/tests/support/start-predrop.sh" "$work/alt" ${BENCH_PREDROP_ARGS:-})
  PREDROP_ALT_PORT=$(sed -n 's/^PREDROP_PORT=//p' <<<"$alt")
  PREDROP_ALT_PID=$(sed -n 's/^PREDROP_PID=//p' <<<"$alt")
  export PREDROP_ALT_PORT PREDROP_ALT_PID
  echo "bench: predrop_alt :$PREDROP_ALT_PORT (pid $PREDROP_ALT_PID) with $BENCH_PREDROP_ALT"
fi
echo "bench: direct 127.0.0.1:$PGPORT, pgbouncer :$PGB_PORT (pid $PGB_PID), predrop :$PREDROP_PORT (pid $PREDROP_PID)"
echo "bench: $(nproc) cores, ${BENCH_SECONDS:-15} s per pgbench run, $("$PREDROP_BIN" --version 2>/dev/null || echo predrop), $(pgbouncer --version | head -n 1)"
echo "bench: sched_autogroup_enabled=$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo n/a); sessions: pgbench $(ps -o sid= -p $$ | tr -d ' '), PostgreSQL $(ps -o sid= -p "$(head -n 1 "$pg/data/postmaster.pid")" | tr -d ' '), pgbouncer $(ps -o sid= -p "$PGB_PID" | tr -d ' '), predrop $(ps -o sid= -p "$PREDROP_PID" | tr -d ' ')"
# Kernel threads that take CPU from both sides unevenly: DAMON's kdamond (a memory monitor some
# hosts run) took up to a quarter of a core during pgbench -c 64 on this machine kind, which is
# part of the run-to-run spread the tables show. Their CPU over the pgbench section is printed.
noisy_kernel_threads='kdamond\.[0-9]+|kswapd[0-9]+|kcompactd[0-9]+'
kernel_noise_ticks() {
  local pid total=0 t
  for pid in $(pgrep -x "$noisy_kernel_threads" 2>/dev/null); do
    t=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null) && total=$((total + t))
  done
  echo "$total"
}
echo "bench: kernel threads that can take CPU mid-run: $(pgrep -x -l "$noisy_kernel_threads" 2>/dev/null | awk '{ print $2 }' | tr '\n' ' ')"
echo
noise_before=$(kernel_noise_ticks) wall_before=$(date +%s)
"$root/tests/bench/run-bench.sh"
noise_ticks=$(( $(kernel_noise_ticks) - noise_before )) wall=$(( $(date +%s) - wall_before ))
awk -v t="$noise_ticks" -v hz="$(getconf CLK_TCK)" -v w="$wall" 'BEGIN {
  printf "bench: those kernel threads used %.1f CPU s over the %d s above (%.1f %% of one core)\n", t / hz, w, (w > 0 ? 100 * t / hz / w : 0) }'

# Further benchmarks other parts of the project keep in tests/bench/NAME/run-*.sh (e.g. hold): each runs
# against the same cluster with BENCH_WORK set; skip one with BENCH_SKIP containing NAME.
for extra in "$root"/tests/bench/*/run-*.sh; do
  [ -x "$extra" ] || [ -f "$extra" ] || continue
  name=$(basename "$(dirname "$extra")")
  if [[ " ${BENCH_SKIP:-} " == *" $name "* ]]; then echo "bench: skipping $name"; continue; fi
  echo
  echo "bench: ---- $name ($extra) ----"
  bash "$extra" || echo "bench: $name exited with status $? (its output above)"
  for tsv in "$BENCH_WORK/$name-results.tsv"; do
    if [ -s "$tsv" ]; then echo; echo "bench: $name results"; column -t -s $'\t' "$tsv" || cat "$tsv"; fi
  done
done
