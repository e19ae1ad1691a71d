#!/usr/bin/env bash
# Rename-detection precision and recall, reference formula vs the profile method, on generated
# table pairs in the bench cluster (called by scripts/bench.sh with PGHOST/PGPORT exported).
set -euo pipefail
build=${BENCH_BUILD_DIR:-$(cd "$(dirname "$0")/../../.." && pwd)/build}
exec "$build/tests/evidence/rename_quality" --pairs "${RENAME_BENCH_PAIRS:-90}" --rows "${RENAME_BENCH_ROWS:-3000}"
