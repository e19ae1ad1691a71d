#!/usr/bin/env bash
# Where predrop listens: a host name works for the client port and the admin endpoint, and a port
# already taken or a name that does not resolve stops predrop at start with a message naming the
# setting, the address and the cause (not asio's "Invalid argument [system:22 …]").
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init listen

# A port something else listens on for the whole test.
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1]); sys.stdout.flush(); time.sleep(120)' \
  >"$TL_WORK/taken.port" &
holder=$!
trap 'rc=$?; kill $holder 2>/dev/null; (exit $rc); tl_cleanup' EXIT
for _ in $(seq 50); do [ -s "$TL_WORK/taken.port" ] && break; sleep 0.1; done
taken=$(cat "$TL_WORK/taken.port")
# What the resolver gives first for localhost (127.0.0.1 here; ::1 as well on some hosts, and predrop
# binds every address a name gives: listen_unit_test covers two).
localhost_addr=$(python3 -c 'import socket; print(socket.getaddrinfo("localhost", 1, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][4][0])')

bad_start() {  # LABEL EXPECTED-TEXT serve-args...
  local label=$1 expected=$2 out rc; shift 2
  out=$(timeout 20 "$PREDROP_BIN" serve --upstream 127.0.0.1:1 "$@" 2>&1) && rc=0 || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qF "$expected" <<<"$out"; then
    tl_ok "$label (exit $rc: $(grep -F "$expected" <<<"$out" | head -n 1 | sed 's/.*critical //'))"
  else
    tl_fail "$label: exit $rc, expected [$expected] in: $out"
  fi
}
bad_start "client port taken" "listen 127.0.0.1:$taken: cannot bind: Address already in use" --listen "127.0.0.1:$taken"
if [ "$localhost_addr" = 127.0.0.1 ]; then
  bad_start "client port taken, by name" "listen localhost:$taken (127.0.0.1): cannot bind: Address already in use" \
    --listen "localhost:$taken"
fi
bad_start "admin port taken" "admin 127.0.0.1:$taken: cannot bind: Address already in use" \
  --listen "127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')" \
  --admin "127.0.0.1:$taken"
bad_start "a host name that does not resolve" "listen no-such-host.invalid:6432: cannot resolve host 'no-such-host.invalid'" \
  --listen no-such-host.invalid:6432

# localhost works for both, and answers there.
free() { python3 -c 'import socket, sys; s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$localhost_addr"; }
accepts() { python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()' "$localhost_addr" "$1" 2>/dev/null; }
port=$(free)
admin=$(free)
"$PREDROP_BIN" serve --listen "localhost:$port" --admin "localhost:$admin" --upstream 127.0.0.1:1 >"$TL_WORK/byname.log" 2>&1 &
pid=$!
up=""
for _ in $(seq 100); do
  if accepts "$port" && accepts "$admin"; then up=1; break; fi
  sleep 0.1
done
if [ -n "$up" ]; then tl_ok "listen localhost:$port and admin localhost:$admin accept on $localhost_addr"
else tl_fail "predrop did not listen on localhost: $(cat "$TL_WORK/byname.log")"; fi
host=$localhost_addr; [[ "$host" == *:* ]] && host="[$host]"
tl_expect "admin endpoint by name serves /healthz" "200" \
  "$(python3 -c 'import sys, urllib.request
try: print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except Exception as e: print(getattr(e, "code", e))' "http://$host:$admin/healthz")"
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
tl_finish
