#!/usr/bin/env bash
# PostgreSQL's own regression suite (parallel_schedule) direct, then through predrop with a
# quarantine rule on every schema (issue 22): which tests answer differently, how many of them by an
# error direct does not raise, and whether each is one the list below expects. With REGRESS_CHECK=1
# (make test's quarantine.regress) an unexpected difference fails. The list is printed with each
# test's first lines of difference.
#   run-regress.sh     against the cluster in PGHOST/PGPORT (superuser postgres, trust), PREDROP_BIN
# The suite comes from the Debian source package of the server's own version (the orig tarball on
# apt's mirror), cached with the regress.so its tests load (configured without readline, zlib, ICU,
# OpenSSL: only the headers are needed) under PREDROP_DEPS_CACHE (~/.cache/predrop/pg-regress-VERSION).
# The two runs share the cluster's roles; the direct run goes first, and roles the suite leaves
# behind are dropped after each run. Writes $BENCH_WORK/regress-results.tsv when BENCH_WORK is set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
: "${PGHOST:?PGHOST unset}" "${PGPORT:?PGPORT unset}" "${PREDROP_BIN:?PREDROP_BIN unset}"
. "$root/scripts/debian-mirror.sh"
major=$(psql -XAtc "SHOW server_version_num" postgres | cut -c1-2)
bindir=${PG_CLIENT_BIN:-/usr/lib/postgresql/$major/bin}
pg_regress=/usr/lib/postgresql/$major/lib/pgxs/src/test/regress/pg_regress
[ -x "$pg_regress" ] || { echo "regress: $pg_regress missing (postgresql-$major)" >&2; exit 1; }
version=$(psql -XAtc "SELECT split_part(current_setting('server_version'), ' ', 1)" postgres)
cache=${PREDROP_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/predrop}/pg-regress-$version
src=$cache/postgresql-$version
if [ ! -f "$src/src/test/regress/regress.so" ]; then
  mkdir -p "$cache"
  orig=postgresql-${major}_$version.orig.tar.bz2
  url=$(debian_mirror)/pool/main/p/postgresql-$major/$orig
  echo "regress: fetching $url"
  curl -fsSL --retry 3 -o "$cache/$orig" "$url" || { echo "regress: cannot download $url" >&2; exit 1; }
  rm -rf "$src" && tar -C "$cache" -xjf "$cache/$orig" && rm -f "$cache/$orig"
  # Under `make test` the environment carries the outer make's MAKELEVEL, and PostgreSQL's makefiles
  # generate their headers (utils/errcodes.h) only at level 0: without this a clean machine's first
  # build of regress.so fails.
  (cd "$src" && ./configure --without-readline --without-zlib --without-icu --without-openssl >"$cache/configure.log" 2>&1 \
     && env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -C src/test/regress regress.so >"$cache/make.log" 2>&1) || { echo "regress: building regress.so failed (see $cache)" >&2; exit 1; }
fi
chmod -R a+rX "$cache"
R=$src/src/test/regress
work=$(mktemp -d /tmp/predrop-regress.XXXXXX)
chmod 0777 "$work"
pid=""
cleanup() { [ -z "$pid" ] || "$root/tests/support/stop-predrop.sh" "$pid" >/dev/null 2>&1 || true; }
trap cleanup EXIT

fresh_database() {
  psql -qX postgres <<'SQL' >/dev/null 2>&1
DROP DATABASE IF EXISTS regression WITH (FORCE);
CREATE DATABASE regression TEMPLATE template0;
ALTER DATABASE regression SET lc_messages TO 'C';
ALTER DATABASE regression SET lc_monetary TO 'C';
ALTER DATABASE regression SET lc_numeric TO 'C';
ALTER DATABASE regression SET lc_time TO 'C';
ALTER DATABASE regression SET bytea_output TO 'hex';
ALTER DATABASE regression SET timezone_abbreviations TO 'Default';
SQL
}
drop_left_roles() {
  psql -qX postgres -c "DROP DATABASE IF EXISTS regression WITH (FORCE)" >/dev/null 2>&1 || true
  for r in $(psql -XAtc "SELECT quote_ident(rolname) FROM pg_roles WHERE rolname LIKE 'regress%'" postgres); do
    psql -qX postgres -c "DROP ROLE $r" >/dev/null 2>&1 || true
  done
}
run_suite() {  # LABEL PORT
  mkdir -p "$work/$1" && chmod 0777 "$work/$1"
  fresh_database
  local t0=$(date +%s)
  "$pg_regress" --use-existing --bindir="$bindir" --host=127.0.0.1 --port="$2" --user=postgres --inputdir="$R" \
    --outputdir="$work/$1" --dlpath="$R" --schedule="$R/parallel_schedule" --max-connections=8 >"$work/$1.log" 2>&1 || true
  echo "regress: $1: $(grep -c 'FAILED' "$work/$1.log" || true) of $(grep -cE '^(test|     [a-z]|ok|not ok)' "$work/$1.log" || true) tests failed against the expected output, $(( $(date +%s) - t0 )) s"
  drop_left_roles
}

printf 'rules:\n  - {schema: "*", action: quarantine}\n' >"$work/quarantine.yaml"
# A predrop of its own for each attempt, on a new store: the suite's database is made again under
# its name, and one process would remember having prepared the old one.
start_predrop() {
  psql -qXc "DROP DATABASE IF EXISTS regress_store WITH (FORCE)" -c "CREATE DATABASE regress_store" postgres >/dev/null
  eval "$("$root/tests/support/start-predrop.sh" "$work" --config "$work/quarantine.yaml" \
          --capture "host=127.0.0.1 port=$PGPORT user=postgres" \
          --store "host=127.0.0.1 port=$PGPORT user=postgres dbname=regress_store")"
  pid=$PREDROP_PID
}

# The tests whose output may differ, each with why: they list the catalog, the statistics or an
# event trigger's view, where a table kept in quarantine is still seen (README, Quarantine).
declare -A expected=(
  [event_trigger]="the sql_drop trigger's listing: a quarantined DROP drops no table"
  [generated]="a catalog listing of generated columns' dependencies still sees the kept table"
  [oidjoins]="a kept table's dropped column keeps the OID of a collation dropped since (the server's own catalog)"
  [stats]="pg_stat counters of a table kept rather than dropped"
  [stats_ext]="an extended statistics object lives on with its table"
  [type_sanity]="lists every relation, the kept ones included"
)
# One attempt: the suite direct, then through predrop, compared (ATTEMPT names its output dirs).
attempt() {
  drop_left_roles
  run_suite "direct$1" "$PGPORT"
  start_predrop
  run_suite "quarantine$1" "$PREDROP_PORT"
  "$root/tests/support/stop-predrop.sh" "$pid" >/dev/null 2>&1 || true
  pid=""
  differ=0 by_error=0 unexpected=0 unexpected_names=""
  echo "regress: tests whose output differs from direct (quarantine rule on every schema):"
  for f in "$work/direct$1/results/"*.out; do
    t=$(basename "$f" .out)
    v=$work/quarantine$1/results/$t.out
    d=$(diff <(sed "s|$work/direct$1|OUT|g" "$f") <(sed "s|$work/quarantine$1|OUT|g" "$v" 2>/dev/null) || true)
    [ -n "$d" ] || continue
    differ=$((differ + 1))
    # An error direct never raised (its DETAIL may name a kept table); anything else sees the kept
    # table in a catalog listing, an event trigger or the statistics, or is a plan's noise.
    added=$(grep -cE '^> .*(ERROR|DETAIL: .*predrop_quarantine)' <<<"$d" || true)
    kind="listing, statistics or plan"
    if [ "$added" -gt 0 ]; then kind="an error direct does not raise"; by_error=$((by_error + 1)); fi
    if [ -n "${expected[$t]:-}" ] && [ "$added" -eq 0 ]; then kind="$kind (expected: ${expected[$t]})"
    else unexpected=$((unexpected + 1)); unexpected_names+=" $t"; kind="$kind, NOT EXPECTED"; fi
    echo "  $t: $kind"
    # awk reads the whole diff: head would close the pipe early, and pipefail would end the script.
    awk '/^[<>]/ && n++ < 4 { print "      " substr($0, 1, 160) }' <<<"$d"
  done
  echo "regress: $differ tests differ from direct, $by_error of them by an error direct does not raise, $unexpected not expected"
}

attempt ""
# A difference the list does not expect is tried once more, both runs: one differed by an error
# once in CI and in none of eight runs here (three beside three busy loops), and a difference
# predrop makes comes back. The first attempt's list above stays in the output. (That CI failure's
# likely cause, the quarantine purger's session in every database each minute, which the suite's
# database test meets renaming and dropping one, is gone: quarantine/purger.cpp.)
first_unexpected=$unexpected_names
if [ -n "${REGRESS_CHECK:-}" ] && [ "$unexpected" -gt 0 ]; then
  echo "regress: not expected the first time:$first_unexpected; the suite again, both runs"
  attempt "-again"
fi
if [ -n "${BENCH_WORK:-}" ]; then
  printf 'regress\tdiffering_tests\t%s\nregress\tdiffering_by_error\t%s\nregress\tdiffering_unexpected\t%s\n' \
    "$differ" "$by_error" "$unexpected" \
    >"$BENCH_WORK/regress-results.tsv"
fi
[ -n "${REGRESS_KEEP:-}" ] || rm -rf "$work"
# REGRESS_CHECK=1 (make test): a difference not in the list, or any error direct does not raise, fails.
if [ -n "${REGRESS_CHECK:-}" ] && [ "$unexpected" -gt 0 ]; then
  echo "regress: FAIL: $unexpected test(s) differ from direct in a way the list does not expect, twice:$unexpected_names (the first time:$first_unexpected)" >&2
  exit 1
fi
