#!/usr/bin/env bash
# pgbench direct vs through predrop: -i, then fixed-count runs in simple, extended and prepared mode.
# Asserts 0 failed transactions and exactly clients*transactions processed, and that the server saw
# them (pgbench_history grows by one row per TPC-B transaction). No timing assertions.
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init pgbench
db=cl_pgbench
clients=4 tx=200
tl_start_predrop

run_side() {  # run_side SIDE PORT
  local side=$1 port=$2 d="$TL_WORK/$1" mode
  mkdir -p "$d"
  tl_recreate_db "$db"
  pgbench -h "$PGHOST" -p "$port" -i -s 1 -q "$db" >"$d/init.out" 2>&1 || echo "pgbench -i exit status $?" >>"$d/init.out"
  psql -X -Atq -h "$PGHOST" -p "$port" -d "$db" \
    -c "SELECT count(*) FROM pgbench_accounts" -c "SELECT count(*) FROM pgbench_branches" \
    -c "SELECT sum(abalance) FROM pgbench_accounts" >"$d/init.counts" 2>&1
  : >"$d/summary"
  for mode in simple extended prepared; do
    for script in tpcb select; do
      local args=(-n -c "$clients" -j 2 -t "$tx" -M "$mode")
      [ "$script" = select ] && args+=(-S)
      local before after
      before=$(psql -X -Atq -h "$PGHOST" -p "$PGPORT" -d "$db" -c "SELECT count(*) FROM pgbench_history")
      pgbench -h "$PGHOST" -p "$port" "${args[@]}" "$db" >"$d/run.$mode.$script.out" 2>&1 \
        || echo "pgbench exit status $?" >>"$d/run.$mode.$script.out"
      after=$(psql -X -Atq -h "$PGHOST" -p "$PGPORT" -d "$db" -c "SELECT count(*) FROM pgbench_history")
      {
        echo "== $mode $script"
        grep -E '^(transaction type|scaling factor|query mode|number of clients|number of threads|number of transactions|number of failed|pgbench exit status|pgbench: error)' \
          "$d/run.$mode.$script.out" || true
        echo "history rows added: $((after - before))"
      } >>"$d/summary"
    done
  done
}

run_side direct "$PGPORT"
run_side predrop "$PREDROP_PORT"
tl_drop_db "$db"

# pgbench -i prints timings only; compare the messages minus the timing numbers, and the data it loaded.
tl_compare "pgbench -i output" <(grep -v '^[0-9]* of [0-9]* tuples' "$TL_WORK/direct/init.out") <(grep -v '^[0-9]* of [0-9]* tuples' "$TL_WORK/predrop/init.out")
tl_compare "pgbench -i loaded data" "$TL_WORK/direct/init.counts" "$TL_WORK/predrop/init.counts"
tl_compare "pgbench runs (mode, processed, failed, history rows)" "$TL_WORK/direct/summary" "$TL_WORK/predrop/summary"
total=$((clients * tx))
for side in direct predrop; do
  for mode in simple extended prepared; do
    for script in tpcb select; do
      f="$TL_WORK/$side/run.$mode.$script.out"
      processed=$(sed -nE 's/^number of transactions actually processed: ([0-9]+)\/([0-9]+)$/\1/p' "$f")
      failed=$(sed -nE 's/^number of failed transactions: ([0-9]+) .*/\1/p' "$f")
      tl_expect "$side -M $mode $script: processed" "$total" "${processed:-none}"
      tl_expect "$side -M $mode $script: failed" "0" "${failed:-none}"
      if [ "$script" = tpcb ]; then
        added=$(awk -v h="== $mode $script" '$0==h{f=1;next} /^==/{f=0} f&&/^history rows added/{print $4}' "$TL_WORK/$side/summary")
        tl_expect "$side -M $mode tpcb: pgbench_history rows" "$total" "${added:-none}"
      fi
    done
  done
done
tl_predrop_alive || tl_fail "predrop died during the test"
tl_finish
