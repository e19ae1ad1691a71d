#!/usr/bin/env bash
# COPY batching (the relay raises a socket's low-water mark during a large COPY's data phase): a
# COPY OUT and a COPY IN of several MB through predrop are byte-identical to the same COPY direct and
# are counted in predrop_copy_batched_total, one per direction; a small COPY is not batched; and the
# replies that follow a batched COPY in the same session are not held back (the mark is lowered again:
# if it were not, the next small reply would never wake the relay and `timeout` ends the session).
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init copy_batching

admin=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tl_start_predrop --admin "127.0.0.1:$admin"
db=copy_batching_$$
tl_recreate_db "$db"
trap 'rc=$?; tl_drop_db "$db"; (exit $rc); tl_cleanup' EXIT

metric() {  # NAME DIRECTION -> the value of NAME{direction="DIRECTION"} on /metrics
  python3 - "$admin" "$1" "$2" <<'PY'
import re, sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
m = re.search(r'^%s\{direction="%s"\} (\d+)$' % (sys.argv[2], sys.argv[3]), body, re.M)
print(m.group(1) if m else "missing")
PY
}
batched() { metric predrop_copy_batched_total "$1"; }
via() { timeout 120 psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$db" "${@:2}"; }

via "$PGPORT" -c "CREATE TABLE src AS SELECT g, md5(g::text) AS h, repeat('x', g % 90) AS pad FROM generate_series(1, 80000) g" \
  -c "CREATE TABLE dst (LIKE src)"
out0=$(batched server_to_client) in0=$(batched client_to_server)
[ "$out0" != missing ] && [ "$in0" != missing ] || tl_fail "predrop_copy_batched_total is not in /metrics ($out0, $in0)"

# A small COPY OUT: not batched.
via "$PREDROP_PORT" -Atc "COPY (SELECT * FROM src WHERE g <= 100) TO STDOUT" >"$TL_WORK/small.out"
tl_expect "a 100-row COPY OUT relayed whole" 100 "$(wc -l <"$TL_WORK/small.out")"
tl_expect "a small COPY OUT is not batched" "$out0" "$(batched server_to_client)"

# A large COPY OUT, direct and through predrop, then quick statements in the same session. The
# server pauses 50 ms every 5,000 rows (~420 KB), so the relay surely drains the socket and waits in
# the middle of the COPY, where batching starts, however loaded the machine.
copy_out="COPY (SELECT s.*, CASE WHEN g % 5000 = 0 THEN pg_sleep(0.05) IS NULL END FROM src s ORDER BY g) TO STDOUT"
for target in direct:$PGPORT predrop:$PREDROP_PORT; do
  name=${target%%:*} port=${target#*:}
  if via "$port" -At -c "$copy_out" -c "SELECT 'after-copy-1'" -c "SELECT count(*) FROM src" \
       -c "COPY (SELECT 1) TO STDOUT" -c "SELECT 'after-copy-2'" >"$TL_WORK/$name.out" 2>"$TL_WORK/$name.err"; then :
  else tl_fail "COPY OUT session $name: exit $? $(head -c 400 "$TL_WORK/$name.err")"; fi
done
bytes=$(wc -c <"$TL_WORK/predrop.out")
tl_expect "COPY OUT of $bytes bytes and the statements after it: same bytes through predrop as direct" \
  "$(md5sum <"$TL_WORK/direct.out")" "$(md5sum <"$TL_WORK/predrop.out")"
[ "$bytes" -gt 4000000 ] || tl_fail "the COPY OUT carried only $bytes bytes: too small to be batched"
tl_expect "the large COPY OUT was batched once" "$((out0 + 1))" "$(batched server_to_client)"

# Every CopyData is framed and counted, also where the relay walks a run of them in bulk: the same
# COPY OUT with one row instead of 80,000 makes exactly 79,999 fewer backend messages.
m0=$(metric predrop_messages_total backend)
via "$PREDROP_PORT" -At -c "$copy_out" >/dev/null
m1=$(metric predrop_messages_total backend)
via "$PREDROP_PORT" -At -c "${copy_out/ORDER BY g/ORDER BY g LIMIT 1}" >/dev/null
m2=$(metric predrop_messages_total backend)
tl_expect "backend messages counted for 80,000 CopyData rows against 1" 79999 "$(( (m1 - m0) - (m2 - m1) ))"

# Sessions of a COPY IN then small statements: each reply must arrive (a held-back one hangs here).
# psql gets its input in 64 KB pieces 2 ms apart, so the relay waits on the client mid-COPY.
via "$PGPORT" -Atc "COPY src TO STDOUT" >"$TL_WORK/src.tsv"
{ echo "COPY dst FROM STDIN;"; cat "$TL_WORK/src.tsv"; echo '\.'
  for j in $(seq 1 50); do echo "SELECT $j;"; done
  echo "SELECT count(*) FROM dst;"; } >"$TL_WORK/session.sql"
paced() {
  python3 -c 'import sys, time
data = open(sys.argv[1], "rb").read()
for i in range(0, len(data), 65536):
    sys.stdout.buffer.write(data[i:i + 65536]); sys.stdout.flush(); time.sleep(0.002)' "$TL_WORK/session.sql"
}
for i in 1 2 3; do
  paced | via "$PREDROP_PORT" -At -f - >"$TL_WORK/session.out" 2>&1 \
    || tl_fail "COPY IN session $i through predrop ended with status $?: $(tail -n 3 "$TL_WORK/session.out")"
done
tl_expect "3 COPY IN of $(wc -c <"$TL_WORK/src.tsv") bytes then 51 statements each: every reply arrived" \
  "$(seq 1 50 | tr '\n' ' ')240000" "$(tail -n 51 "$TL_WORK/session.out" | tr '\n' ' ' | sed 's/ $//')"
tl_expect "each large COPY IN was batched" "$((in0 + 3))" "$(batched client_to_server)"
tl_expect "the rows copied in are the rows copied out" \
  "$(via "$PGPORT" -Atc "SELECT md5(string_agg(h || pad, ',' ORDER BY g)) FROM src")" \
  "$(via "$PGPORT" -Atc "SELECT md5(string_agg(h || pad, ',' ORDER BY g)) FROM (SELECT DISTINCT * FROM dst) d")"
tl_predrop_alive || tl_fail "predrop exited"

# With TLS on the client leg: the COPY OUT is still read from the plaintext upstream in batches and
# written through TLS; the COPY IN comes through TLS (not batched: only plaintext sources are).
pki=$TL_WORK/pki
tl_make_pki "$pki" "copy batching CA"
tls_admin=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tl_start_predrop --admin "127.0.0.1:$tls_admin" --config "$(tl_config tls "tls:
  cert_file: $pki/server.crt
  key_file: $pki/server.key")"
admin=$tls_admin
out0=$(batched server_to_client)
if PGSSLMODE=require via "$PREDROP_PORT" -At -c "$copy_out" -c "SELECT 'after-copy-1'" -c "SELECT count(*) FROM src" \
     -c "COPY (SELECT 1) TO STDOUT" -c "SELECT 'after-copy-2'" >"$TL_WORK/tls.out" 2>"$TL_WORK/tls.err"; then :
else tl_fail "COPY OUT session over TLS: exit $? $(head -c 400 "$TL_WORK/tls.err")"; fi
tl_expect "over TLS: COPY OUT and the statements after it, same bytes as direct" \
  "$(md5sum <"$TL_WORK/direct.out")" "$(md5sum <"$TL_WORK/tls.out")"
tl_expect "over TLS: the COPY OUT from the plaintext upstream was batched" "$((out0 + 1))" "$(batched server_to_client)"
via "$PGPORT" -c "TRUNCATE dst"
paced | PGSSLMODE=require via "$PREDROP_PORT" -At -f - >"$TL_WORK/tls-in.out" 2>&1 \
  || tl_fail "COPY IN session over TLS ended with status $?: $(tail -n 3 "$TL_WORK/tls-in.out")"
tl_expect "over TLS: COPY IN then 51 statements, every reply arrived" \
  "$(seq 1 50 | tr '\n' ' ')80000" "$(tail -n 51 "$TL_WORK/tls-in.out" | tr '\n' ' ' | sed 's/ $//')"
tl_predrop_alive || tl_fail "predrop (TLS) exited"
tl_finish
