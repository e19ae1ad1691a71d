#!/usr/bin/env bash
# psql direct vs through predrop: multi-statement strings, errors, notices, \d, \copy both ways.
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init psql
here=$(cd "$(dirname "$0")" && pwd)
db=cl_psql
tl_start_predrop

# Input for \copy FROM: tabs, backslashes, quotes, unicode, NULLs, empty strings, long values.
/usr/bin/python3 - "$TL_WORK/in.tsv" <<'PY'
import sys, hashlib
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i in range(1, 150001):
        h = hashlib.md5(str(i).encode()).hexdigest()
        t = "\\N" if i % 97 == 0 else ("" if i % 89 == 0 else f"row {i} \\\\ back\\tslash 'q' \"dq\" ünï ☃ {h}")
        f.write(f"{i}\t{t}\t{h * (1 + i % 7)}\n")
PY
printf '1\tok\tx\nnot-an-int\tbad\ty\n' >"$TL_WORK/bad.tsv"

run_side() {  # run_side SIDE PORT
  local side=$1 port=$2 d="$TL_WORK/$1"
  mkdir -p "$d"
  tl_recreate_db "$db"
  local P=(psql -X -h "$PGHOST" -p "$port" -d "$db")
  "${P[@]}" -a -f "$here/psql/session.sql" >"$d/session.out" 2>&1 || true
  {
    "${P[@]}" -c "CREATE TABLE big (id int PRIMARY KEY, t text, h text)"
    "${P[@]}" -c "\\copy big FROM '$TL_WORK/in.tsv'"
    "${P[@]}" -c "\\copy (SELECT * FROM big ORDER BY id) TO '$d/out.tsv'"
    "${P[@]}" -c "\\copy (SELECT id, t, h FROM big WHERE id % 3 = 0 ORDER BY id) TO '$d/out.csv' WITH (FORMAT csv, HEADER, FORCE_QUOTE *)"
    "${P[@]}" -c "\\copy (SELECT * FROM big ORDER BY id) TO '$d/out.bin' WITH (FORMAT binary)"
    "${P[@]}" -c "CREATE TABLE big2 (LIKE big)"
    "${P[@]}" -c "\\copy big2 FROM '$d/out.bin' WITH (FORMAT binary)"
    "${P[@]}" -c "\\copy big2 FROM '$d/out.csv' WITH (FORMAT csv, HEADER)"
    "${P[@]}" -Atc "SELECT count(*), count(t), md5(string_agg(id || ':' || coalesce(t, '<null>') || h, ',' ORDER BY id)) FROM big"
    "${P[@]}" -Atc "SELECT count(*), md5(string_agg(id::text || coalesce(t, '') || h, ',' ORDER BY id, t)) FROM big2"
    "${P[@]}" -c "\\copy big FROM '$TL_WORK/bad.tsv'" || echo "exit status $?"
    # stdin/stdout COPY through psql itself
    "${P[@]}" -c "COPY big2 FROM STDIN" <"$TL_WORK/bad.tsv" || echo "exit status $?"
    "${P[@]}" -c "COPY (SELECT * FROM big ORDER BY id LIMIT 1000) TO STDOUT" | md5sum
    # -c with several statements, and ON_ERROR_STOP with a script on stdin
    "${P[@]}" -c "SELECT 1 AS a; SELECT 2 AS b; SELECT 1/0; SELECT 3" || echo "exit status $?"
    printf 'SELECT 1;\nSELECT * FROM nope;\nSELECT 2;\n' | "${P[@]}" -v ON_ERROR_STOP=1 || echo "exit status $?"
    "${P[@]}" -1 -c "CREATE TABLE t1 (a int)" -c "INSERT INTO t1 VALUES (1)" -c "SELECT * FROM t1"
  } >"$d/copy.out" 2>&1
}

run_side direct "$PGPORT"
run_side predrop "$PREDROP_PORT"
tl_drop_db "$db"

tl_compare "psql session (multi-statement, errors, notices, \\d, \\gexec, COPY inline)" "$TL_WORK/direct/session.out" "$TL_WORK/predrop/session.out"
tl_compare "\\copy / COPY commands and their messages" "$TL_WORK/direct/copy.out" "$TL_WORK/predrop/copy.out"
tl_compare_bytes "\\copy TO text file" "$TL_WORK/direct/out.tsv" "$TL_WORK/predrop/out.tsv"
tl_compare_bytes "\\copy FROM then TO round-trips the input file" "$TL_WORK/in.tsv" "$TL_WORK/predrop/out.tsv"
tl_compare_bytes "\\copy (query) TO csv" "$TL_WORK/direct/out.csv" "$TL_WORK/predrop/out.csv"
tl_compare_bytes "\\copy TO binary" "$TL_WORK/direct/out.bin" "$TL_WORK/predrop/out.bin"
# Sanity: the session really exercised what it claims (guards against an empty/aborted run).
for want in 'hello 42 from plpgsql' 'division by zero' 'Asynchronous notification "chan" with payload "payload one"' \
            'Table "s.orders"' 'orders_note_idx' 'gexec_2' 'duplicate key value violates unique constraint'; do
  grep -qF "$want" "$TL_WORK/predrop/session.out" || tl_fail "session output through predrop lacks: $want"
done
tl_predrop_alive || tl_fail "predrop died during the test"
tl_finish
