#!/usr/bin/env bash
# Self-test of start-predrop.sh / stop-predrop.sh (with stand-ins, so it does not depend on predrop):
# start + accept + stop, a binary that exits at once, one that never listens, one that ignores SIGTERM.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${PREDROP_TEST_WORKDIR:-/tmp}/harness.XXXXXX")
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
export PGHOST=127.0.0.1 PGPORT=1   # upstream is never contacted by the stand-ins below

# 1. The python byte relay as the "binary": starts, accepts, stops on SIGTERM.
out=$(PREDROP_HARNESS_RELAY=python "$here/start-predrop.sh" "$work") || fail "relay did not start"
eval "$out"
[ -n "${PREDROP_PORT:-}" ] && [ -n "${PREDROP_PID:-}" ] && [ -f "${PREDROP_LOG:-}" ] && ok "printed PREDROP_PORT/PID/LOG" || fail "missing output: $out"
(exec 3<>"/dev/tcp/127.0.0.1/$PREDROP_PORT") 2>/dev/null && ok "port accepts" || fail "port does not accept"
"$here/stop-predrop.sh" "$PREDROP_PID" 5 && ok "stopped on SIGTERM" || fail "needed SIGKILL"
kill -0 "$PREDROP_PID" 2>/dev/null && [ "$(awk '{print $3}' /proc/$PREDROP_PID/stat 2>/dev/null)" != Z ] && fail "still running" || ok "process gone"

# 2. A binary that exits at once: loud failure including the log.
err=$(PREDROP_BIN=/bin/false "$here/start-predrop.sh" "$work" 2>&1 >/dev/null) && fail "start succeeded with /bin/false" || ok "exit at once -> failure"
grep -q 'exited (status 1) before accepting' <<<"$err" && ok "reports the exit status" || fail "message: $err"

# 3. A binary that never listens: timeout, killed.
cat >"$work/never-listens" <<'SH'
#!/bin/sh
echo "starting but never listening"; exec sleep 60
SH
chmod +x "$work/never-listens"
t0=$(date +%s)
err=$(PREDROP_BIN=$work/never-listens PREDROP_START_TIMEOUT=1 "$here/start-predrop.sh" "$work" 2>&1 >/dev/null) && fail "start succeeded" || ok "never listens -> failure"
grep -q 'did not accept on 127.0.0.1:[0-9]* within 1s' <<<"$err" && grep -q 'never listening' <<<"$err" && ok "timeout message with log" || fail "message: $err"
[ $(( $(date +%s) - t0 )) -lt 10 ] && ok "gave up promptly" || fail "took too long"
pgrep -f "$work/never-listens" >/dev/null 2>&1 && fail "left the process running" || ok "killed it"

# 4. Ignores SIGTERM: SIGKILL after the grace period, exit status 1.
python3 -c 'import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open(sys.argv[1], "w").close(); time.sleep(60)' "$work/ready" &
stubborn=$!
disown "$stubborn"   # no "Killed" job report; stop-predrop treats the zombie as gone
for _ in $(seq 1 100); do [ -f "$work/ready" ] && break; sleep 0.1; done
rc=0; "$here/stop-predrop.sh" "$stubborn" 1 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] && ok "SIGKILL after grace, status 1" || fail "stop-predrop returned $rc for a process ignoring SIGTERM"
# 5. Watchdog: the owner dies without stopping its instance; the instance goes away by itself.
bash -c 'sleep 30' &
owner=$!
out=$(PREDROP_OWNER_PID=$owner PREDROP_HARNESS_RELAY=python "$here/start-predrop.sh" "$work") || fail "relay did not start"
eval "$out"
kill -KILL "$owner"; wait "$owner" 2>/dev/null
gone=no
for _ in $(seq 1 50); do
  if ! kill -0 "$PREDROP_PID" 2>/dev/null || [ "$(awk '{print $3}' /proc/$PREDROP_PID/stat 2>/dev/null)" = Z ]; then gone=yes; break; fi
  sleep 0.1
done
[ "$gone" = yes ] && ok "watchdog stopped the instance of a dead owner" || { fail "instance outlived its owner"; "$here/stop-predrop.sh" "$PREDROP_PID" 1; }

rm -rf "$work"
[ "$fails" -eq 0 ] && echo "harness: all checks passed" && exit 0
echo "harness: $fails check(s) FAILED"; exit 1
