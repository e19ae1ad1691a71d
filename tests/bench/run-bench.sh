#!/usr/bin/env bash
# The measurements of `make bench` (scripts/bench.sh starts the cluster, pgbouncer and predrop and
# then calls this). Side by side, direct / pgbouncer / predrop, on 127.0.0.1 TCP:
#   1. pgbench -S for 'BENCH_CLIENTS' x 'BENCH_MODES', BENCH_SECONDS each counted after
#      BENCH_CELL_WARMUP seconds of the same run (-j 2; -j 1 for -c 1), with the proxies' CPU per
#      transaction from /proc/PID/stat over the counted seconds, and the whole cluster's
#   2. COPY OUT and COPY IN of ~BENCH_COPY_MB MB (unlogged tables), wall time with date +%s.%N, and
#      the proxies' CPU time per COPY
#   3. RSS of a fresh predrop and a fresh pgbouncer holding BENCH_IDLE_STEPS idle clients; per client is
#      (RSS with N idle - RSS of the same process with 0 sessions) / N at each N, so the first sessions'
#      one-off costs (arenas, pools, code first touched) count against them, not only the marginal ones
# Results go to $BENCH_WORK/results.tsv (format in report.py); report.py prints the tables.
# No assertions on timings: a failed transaction or a wrong row count is reported, not judged.
#
# Environment (set by scripts/bench.sh): PGHOST PGPORT (direct), PGB_PORT PGB_PID, PREDROP_PORT
# PREDROP_PID, BENCH_WORK, PREDROP_BIN; tunables BENCH_SECONDS (15), BENCH_CELL_WARMUP (10 + clients/2), BENCH_CLIENTS ("1 16 64"),
# BENCH_MODES ("simple prepared"), BENCH_REPS (7), BENCH_SCALE (10), BENCH_WARMUP (5),
# BENCH_COPY_MB (150), BENCH_COPY_REPS (15), BENCH_IDLE_STEPS ("0,250,500,1000"), BENCH_SKIP (words of
# pgbench copy rss to leave out), BENCH_PREDROP_ARGS (extra predrop serve args for the RSS run);
# PREDROP_ALT_PORT PREDROP_ALT_PID: a second predrop for the pgbench runs (BENCH_PREDROP_ALT).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
support=$(cd "$here/../support" && pwd)
: "${PGHOST:?}" "${PGPORT:?}" "${PGB_PORT:?}" "${PGB_PID:?}" "${PREDROP_PORT:?}" "${PREDROP_PID:?}" "${BENCH_WORK:?}"
SECONDS_PER_RUN=${BENCH_SECONDS:-15}
CLIENTS=${BENCH_CLIENTS:-1 16 64}
MODES=${BENCH_MODES:-simple prepared}
# Medians of several interleaved runs: on this 2-core VM two identical 15 s runs of one cell differ
# by up to 15 %, more than the differences being measured.
REPS=${BENCH_REPS:-7}
SCALE=${BENCH_SCALE:-10}
WARMUP=${BENCH_WARMUP:-5}
COPY_MB=${BENCH_COPY_MB:-150}
COPY_REPS=${BENCH_COPY_REPS:-15}
IDLE_STEPS=${BENCH_IDLE_STEPS:-0,250,500,1000}
SKIP=" ${BENCH_SKIP:-} "
results=$BENCH_WORK/results.tsv
: >"$results"
CLK_TCK=$(getconf CLK_TCK)
export PGUSER=postgres PGDATABASE=postgres PGSSLMODE=disable
unset PGPASSWORD PGOPTIONS

declare -A PORT=([direct]=$PGPORT [pgbouncer]=$PGB_PORT [predrop]=$PREDROP_PORT)
declare -A PID=([direct]="" [pgbouncer]=$PGB_PID [predrop]=$PREDROP_PID)
# A second predrop configuration (scripts/bench.sh, BENCH_PREDROP_ALT) joins the pgbench runs.
PGBENCH_TARGETS=(direct pgbouncer predrop)
if [ -n "${PREDROP_ALT_PORT:-}" ]; then
  PORT[predrop_alt]=$PREDROP_ALT_PORT
  PID[predrop_alt]=$PREDROP_ALT_PID
  PGBENCH_TARGETS+=(predrop_alt)
fi
direct_sql() { PGOPTIONS="-c client_min_messages=warning" psql -X -qAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -c "$1"; }
cpu_ticks() { [ -n "$1" ] && awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo ""; }
now() { date +%s.%N; }
# A proxy's CPU milliseconds between two cpu_ticks readings ("-" for direct).
copy_cpu_ms() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", (b - a) * 1000 / hz }'; else echo -; fi; }
log() { echo "bench: $*" >&2; }
# The proxies' system calls and context switches per transaction come from perf stat (linux-perf)
# attached to the process over the counted seconds; without it (or without the right to trace)
# those columns say "-".
PERF_STAT=0
if command -v perf >/dev/null && perf stat -x, -e raw_syscalls:sys_enter -o /dev/null -- true >/dev/null 2>&1; then
  PERF_STAT=1
else
  log "perf stat with raw_syscalls unavailable: no syscalls or context switches per transaction"
fi
# perf_per_tx FILE EVENT N: EVENT's count in perf stat's CSV FILE, divided by N ("-" if absent).
perf_per_tx() { awk -F, -v e="$2" -v n="$3" '$3 == e && $1 ~ /^[0-9]+$/ && n > 0 { printf "%.2f", $1 / n; found = 1 }
  END { if (!found) print "-" }' "$1" 2>/dev/null || echo -; }
# The whole cluster's CPU ticks so far (tests/bench/benchlib.py: its live processes and the children
# the postmaster reaped), so that each pgbench cell also says what a transaction cost the server
# behind each target: a tps ratio the proxies' own CPU does not explain shows there (behind
# PgBouncer's session pool the backends are the ones earlier runs warmed; behind predrop and
# direct each run's backends are new and fault in shared buffers as they go).
DATA_DIRECTORY=$(direct_sql "SHOW data_directory")
server_ticks() {
  /usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import benchlib
t = benchlib.server_ticks(benchlib.postmaster_pid(sys.argv[2])); print("" if t is None else t)' \
    "$here" "$DATA_DIRECTORY" 2>/dev/null || echo ""
}
[ -n "$(server_ticks)" ] || log "the cluster's processes are not readable here: no server CPU per transaction"
# ticks_per_tx_us T0 T1 N: the CPU microseconds between two tick readings, per transaction ("-" when
# a reading or the count is missing).
ticks_per_tx_us() {
  if [ -n "$1" ] && [ -n "$2" ] && [ -n "$3" ] && [ "$3" -gt 0 ]; then
    awk -v a="$1" -v b="$2" -v n="$3" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", (b - a) * 1e6 / hz / n }'
  else
    echo -
  fi
}
# The machine's steal and all ticks so far (tests/bench/benchlib.py, machine_ticks), and the share
# stolen between two readings in % ("-" when a reading is missing): a paired ratio is only as good
# as its runs' steal is alike.
machine_ticks() { awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat 2>/dev/null; }
steal_pct() {
  if [ -n "$1" ] && [ -n "$2" ]; then
    awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); d = y[2] - x[2]
      if (d > 0) printf "%.1f", 100 * (y[1] - x[1]) / d; else print "-" }'
  else
    echo -
  fi
}
# Rotate the order of the targets from one measurement to the next (the host drifts).
rot=0
targets_rotated() {
  local t=("$@")
  [ ${#t[@]} -gt 0 ] || t=(direct pgbouncer predrop)
  local n=${#t[@]} k out=""
  rot=$(( (rot + 1) % n ))
  for k in $(seq 0 $(( n - 1 ))); do out+="${t[$(( (rot + k) % n ))]} "; done
  echo "$out"
}

# ---- 1. pgbench -S ------------------------------------------------------------------------------
if [[ "$SKIP" != *" pgbench "* ]]; then
  log "pgbench -i -s $SCALE (direct)"
  pgbench -h 127.0.0.1 -p "$PGPORT" -i -s "$SCALE" -q postgres >"$BENCH_WORK/pgbench-init.log" 2>&1
  direct_sql "VACUUM ANALYZE" >/dev/null
  log "warm-up: pgbench -S -c 4 -T $WARMUP (direct)"
  pgbench -h 127.0.0.1 -p "$PGPORT" -n -S -c 4 -j 2 -T "$WARMUP" postgres >/dev/null 2>&1 || true
  for rep in $(seq 1 "$REPS"); do
    for c in $CLIENTS; do
      j=2; [ "$c" -eq 1 ] && j=1
      # 64 fresh backends took 30 s to reach their steady rate here, 16 about 10 s.
      CELL_WARMUP=${BENCH_CELL_WARMUP:-$(( 10 + c / 2 ))}
      for mode in $MODES; do
        cell="-S c=$c $mode"
        for target in $(targets_rotated "${PGBENCH_TARGETS[@]}"); do
          out=$BENCH_WORK/pgbench.$c.$mode.$target.$rep.log
          pid=${PID[$target]}
          # Only the steady state counts: pgbench's per-second progress after CELL_WARMUP seconds,
          # and the proxy's CPU over the same stretch. A fresh backend spends its first seconds
          # faulting in shared buffers (direct at c=16 went from 8.8k to 26k tps over 20 s here),
          # while PgBouncer's session pool hands each run the warm backends of the run before: the
          # whole run compared warm backends behind PgBouncer with cold ones behind predrop and direct.
          pgbench -h 127.0.0.1 -p "${PORT[$target]}" -n -S -M "$mode" -c "$c" -j "$j" -P 1 \
            -T "$(( CELL_WARMUP + SECONDS_PER_RUN ))" postgres >"$out" 2>&1 &
          bench_pid=$!
          sleep "$CELL_WARMUP"
          t0=$(cpu_ticks "$pid")
          s0=$(server_ticks)
          m0=$(machine_ticks)
          perf_pid=""
          if [ "$PERF_STAT" = 1 ] && [ -n "$pid" ]; then
            perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$pid" -o "$out.perf" >/dev/null 2>&1 &
            perf_pid=$!
          fi
          wait "$bench_pid" || true
          t1=$(cpu_ticks "$pid")
          s1=$(server_ticks)
          stolen=$(steal_pct "$m0" "$(machine_ticks)")
          if [ -n "$perf_pid" ]; then kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" 2>/dev/null || true; fi
          steady=$(awk -v w="$CELL_WARMUP" '/^progress: / { t = $2 + 0; if (t > w) { tx += $4; lat += $7; n++ } }
            END { if (n) printf "%.1f %.3f %.0f", tx / n, lat / n, tx }' "$out")
          read -r tps lat processed <<<"${steady:-}" || true
          failed=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$out")
          cpu=$(ticks_per_tx_us "$t0" "$t1" "$processed")
          server_cpu=$(ticks_per_tx_us "$s0" "$s1" "$processed")
          sys=- cs=-
          if [ -n "$perf_pid" ] && [ -n "$processed" ]; then
            sys=$(perf_per_tx "$out.perf" raw_syscalls:sys_enter "$processed")
            cs=$(perf_per_tx "$out.perf" context-switches "$processed")
          fi
          if [ -z "$tps" ]; then
            log "$cell $target: pgbench failed: $(tail -n 3 "$out" | tr '\n' ' ')"
            failed=${failed:-all}
          fi
          printf 'pgbench\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cell" "$target" "${tps:--}" "${lat:--}" "${failed:--}" "$cpu" "$sys" "$cs" "$server_cpu" "$stolen" >>"$results"
          log "$(printf '%-22s %-9s tps=%-10s lat=%-7s ms failed=%s cpu/tx=%s us syscalls/tx=%s cs/tx=%s server/tx=%s us steal=%s%%' "$cell" "$target" "${tps:--}" "${lat:--}" "${failed:--}" "$cpu" "$sys" "$cs" "$server_cpu" "$stolen")"
        done
      done
    done
  done
fi

# ---- 2. COPY OUT / COPY IN -----------------------------------------------------------------------
if [[ "$SKIP" != *" copy "* ]]; then
  rows=$(( COPY_MB * 1000000 / 70 ))   # ~70 bytes a row of (int, md5 text, timestamptz)
  log "COPY: materialising $rows rows into an unlogged table (direct)"
  direct_sql "DROP TABLE IF EXISTS copy_src, copy_in" >/dev/null
  direct_sql "CREATE UNLOGGED TABLE copy_src AS SELECT g, md5(g::text) AS h, now() AS ts FROM generate_series(1, $rows) g" >/dev/null
  direct_sql "CREATE UNLOGGED TABLE copy_in (g int, h text, ts timestamptz)" >/dev/null
  direct_sql "VACUUM ANALYZE copy_src" >/dev/null
  psql -X -h 127.0.0.1 -p "$PGPORT" -Atc "COPY copy_src TO STDOUT" >"$BENCH_WORK/copy.dat"
  bytes=$(stat -c %s "$BENCH_WORK/copy.dat")
  log "COPY: $bytes bytes"
  # One COPY's wall time varies by +-25 % even direct, and the server backend's CPU time for the same
  # rows varies with it (the host's speed moves under the VM). Each COPY therefore also records its
  # backend's CPU time (utime+stime from /proc, read by psql's \! just before and after the COPY, on
  # the same connection), so the report can compare the proxies at equal server speed.
  for dir in out in; do
    { echo 'SELECT pg_backend_pid() AS backend_pid \gset'
      echo '\setenv PREDROP_BENCH_BACKEND :backend_pid'
      echo "\\! awk '{ print \$14 + \$15 }' /proc/\$PREDROP_BENCH_BACKEND/stat >$BENCH_WORK/backend.ticks"
      if [ "$dir" = out ]; then echo 'COPY copy_src TO STDOUT;'; else echo '\copy copy_in FROM pstdin'; fi
      echo "\\! awk '{ print \$14 + \$15 }' /proc/\$PREDROP_BENCH_BACKEND/stat >>$BENCH_WORK/backend.ticks"
    } >"$BENCH_WORK/copy-$dir.sql"
  done
  backend_cpu_ms() {
    awk -v hz="$CLK_TCK" 'NR == 1 { a = $1 } NR == 2 { b = $1 } END { if (NR == 2) printf "%.0f", (b - a) * 1000 / hz; else print "-" }' \
      "$BENCH_WORK/backend.ticks" 2>/dev/null || echo -
    rm -f "$BENCH_WORK/backend.ticks"
  }
  for rep in $(seq 1 "$COPY_REPS"); do
    for target in $(targets_rotated); do
      c0=$(cpu_ticks "${PID[$target]}")
      t0=$(now)
      psql -X -h 127.0.0.1 -p "${PORT[$target]}" -At -f "$BENCH_WORK/copy-out.sql" | wc -c >"$BENCH_WORK/copy-out.count"
      t1=$(now)
      c1=$(cpu_ticks "${PID[$target]}")
      got=$(cat "$BENCH_WORK/copy-out.count")
      [ "$got" -eq "$bytes" ] || log "COPY OUT via $target returned $got bytes, expected $bytes"
      printf 'copy\tout (table TO STDOUT)\t%s\t%s\t%s\t%s\t%s\n' "$target" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')" "$got" \
        "$(copy_cpu_ms "$c0" "$c1")" "$(backend_cpu_ms)" >>"$results"
    done
    for target in $(targets_rotated); do
      direct_sql "TRUNCATE copy_in" >/dev/null
      direct_sql "CHECKPOINT" >/dev/null
      c0=$(cpu_ticks "${PID[$target]}")
      t0=$(now)
      psql -X -h 127.0.0.1 -p "${PORT[$target]}" -q -v ON_ERROR_STOP=1 -f "$BENCH_WORK/copy-in.sql" <"$BENCH_WORK/copy.dat" || log "COPY IN via $target failed"
      t1=$(now)
      c1=$(cpu_ticks "${PID[$target]}")
      n=$(direct_sql "SELECT count(*) FROM copy_in")
      [ "$n" -eq "$rows" ] || log "COPY IN via $target stored $n rows, expected $rows"
      printf 'copy\tin (FROM STDIN)\t%s\t%s\t%s\t%s\t%s\n' "$target" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')" "$bytes" \
        "$(copy_cpu_ms "$c0" "$c1")" "$(backend_cpu_ms)" >>"$results"
    done
    log "COPY repetition $rep done"
  done
  direct_sql "DROP TABLE copy_src, copy_in" >/dev/null
  rm -f "$BENCH_WORK/copy.dat"
fi

# ---- 3. RSS with idle clients ----------------------------------------------------------------------
if [[ "$SKIP" != *" rss "* ]]; then
  log "RSS: fresh predrop, idle clients $IDLE_STEPS"
  # shellcheck disable=SC2086
  out=$("$support/start-predrop.sh" "$BENCH_WORK" ${BENCH_PREDROP_ARGS:-}) || { log "fresh predrop did not start"; out=""; }
  if [ -n "$out" ]; then
    eval "$out"
    python3 "$here/idle_clients.py" --port "$PREDROP_PORT" --pid "$PREDROP_PID" --steps "$IDLE_STEPS" --label predrop >>"$results" || log "predrop idle-client run incomplete"
    "$support/stop-predrop.sh" "$PREDROP_PID" >/dev/null || true
  fi
  log "RSS: fresh pgbouncer, idle clients $IDLE_STEPS"
  out=$("$here/pgbouncer.sh" start "$BENCH_WORK" "$PGPORT") || { log "fresh pgbouncer did not start"; out=""; }
  if [ -n "$out" ]; then
    eval "$out"
    python3 "$here/idle_clients.py" --port "$PGB_PORT" --pid "$PGB_PID" --steps "$IDLE_STEPS" --label pgbouncer >>"$results" || log "pgbouncer idle-client run incomplete"
    "$here/pgbouncer.sh" stop "$PGB_PID"
  fi
fi

python3 "$here/report.py" "$results"
