#!/usr/bin/env bash
# The long soak of `make bench` (scripts/bench.sh calls it with the bench cluster, max_connections
# 1200, in PGHOST/PGPORT): BENCH_SOAK_CLIENTS (500) pgbench clients and BENCH_SOAK_DROPS (20) DROP
# statements a second, BENCH_SOAK_SECONDS (600) straight to PostgreSQL and then through a predrop
# of its own, every real drop accounted for (see soak.py). Asserts 0 unaccounted drops, 0 client
# errors, no crash and predrop RSS growth <= BENCH_SOAK_MAX_RSS_GROWTH_PCT (10) after warm-up (the
# bounded parse cache is filled first with BENCH_SOAK_WARM_PARSE_CACHE (12000) distinct statements);
# prints tps both ways. BENCH_SOAK_DIRECT_SECONDS shortens the direct phase (default the same).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:?PGHOST unset}" "${PGPORT:?PGPORT unset}" "${PREDROP_BIN:?PREDROP_BIN unset}"
export PREDROP_SOURCE_DIR=${PREDROP_SOURCE_DIR:-$(cd "$here/../../.." && pwd)}
# Each client is a socket to predrop and one from predrop upstream.
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
seconds=${BENCH_SOAK_SECONDS:-600}
exec /usr/bin/python3 "$here/soak.py" \
  --clients "${BENCH_SOAK_CLIENTS:-500}" --drops-per-s "${BENCH_SOAK_DROPS:-20}" \
  --seconds "$seconds" --direct-seconds "${BENCH_SOAK_DIRECT_SECONDS:-$seconds}" \
  --scale "${BENCH_SOAK_SCALE:-20}" --max-rss-growth-pct "${BENCH_SOAK_MAX_RSS_GROWTH_PCT:-10}" \
  --warm-parse-cache "${BENCH_SOAK_WARM_PARSE_CACHE:-12000}"
