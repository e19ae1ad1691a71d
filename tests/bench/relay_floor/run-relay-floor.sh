#!/usr/bin/env bash
# The relay's floor (issue 23; no assertions): builds relay_floor.cpp (liburing-dev, a bench package in
# scripts/install-deps.sh), starts its four floors (epoll, uring, uring-defer, uring-in-asio), each in a
# session of its own as PgBouncer and predrop run, and runs relay_floor.py against them, PgBouncer,
# predrop and direct. scripts/bench.sh runs it with the cluster, PgBouncer and predrop it started; by
# hand, export PGHOST, PGPORT, PGB_PORT, PGB_PID, PREDROP_PORT and PREDROP_PID first. Tunables: see
# relay_floor.py. Writes $BENCH_WORK/relay_floor-results.tsv when BENCH_WORK is set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:?PGHOST unset}" "${PGPORT:?PGPORT unset}" "${PGB_PORT:?PGB_PORT unset (scripts/bench.sh sets it)}"
: "${PGB_PID:?PGB_PID unset}" "${PREDROP_PORT:?PREDROP_PORT unset}" "${PREDROP_PID:?PREDROP_PID unset}"
export PGSSLMODE=disable PGUSER=${PGUSER:-postgres}
export PATH=/usr/lib/postgresql/15/bin:$PATH

[ -z "${BENCH_WORK:-}" ] || mkdir -p "$BENCH_WORK"
work=$(mktemp -d "${BENCH_WORK:-/tmp}/relay-floor.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

c++ -O2 -std=c++20 -Wall -Wextra -Werror -o "$work/relay_floor" "$here/relay_floor.cpp" -luring
floors=""
for mode in epoll uring uring-defer uring-in-asio; do
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  setsid "$work/relay_floor" "$mode" "$port" "$PGPORT" >"$work/$mode.log" 2>&1 &
  pids+=($!)
  floors+=" floor-$mode=$port=$!"
done
for spec in $floors; do
  port=$(cut -d= -f2 <<<"$spec")
  for _ in $(seq 50); do
    psql -XAtq -h 127.0.0.1 -p "$port" -d postgres -c "SELECT 1" >/dev/null 2>&1 && break
    sleep 0.1
  done
  psql -XAtq -h 127.0.0.1 -p "$port" -d postgres -c "SELECT 1" >/dev/null ||
    { echo "relay_floor: ${spec%%=*} does not relay (its log: $(cat "$work"/*.log))" >&2; exit 1; }
done
FLOORS=$floors /usr/bin/python3 "$here/relay_floor.py"
