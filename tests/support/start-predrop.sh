#!/usr/bin/env bash
# Start one predrop instance in the background for a test, on a free loopback port.
#
#   start-predrop.sh WORKDIR [extra predrop serve args...]
#
# Runs  $PREDROP_BIN serve --listen 127.0.0.1:<port> --upstream $PGHOST:$PGPORT [extra args]
# with stdin from /dev/null and stdout+stderr into a log file in WORKDIR, waits until the port accepts
# (PREDROP_START_TIMEOUT seconds, default 10) and prints, on stdout, one KEY=VALUE a line:
#   PREDROP_PORT=<port>
#   PREDROP_PID=<pid>
#   PREDROP_LOG=<log file>
# so a shell test can   eval "$(start-predrop.sh "$work")"   and Python can parse the lines
# (tests/support/predrop_harness.py). On failure it prints the command and the log on stderr and
# exits non-zero, having killed what it started. Stop the instance with stop-predrop.sh PID.
#
# Environment:
#   PREDROP_BIN            the binary (required unless PREDROP_HARNESS_RELAY=python)
#   PGHOST, PGPORT         the upstream; PREDROP_UPSTREAM=HOST:PORT overrides
#   PREDROP_OWNER_PID      if set: a watchdog stops this instance when that process is gone (so a test
#                          killed by a ctest timeout leaves nothing behind)
#   PREDROP_HARNESS_RELAY  "python": start tests/support/tcp-relay.py (a dumb byte relay) instead of
#                          predrop, to validate the tests themselves; extra args are then ignored.
#   PREDROP_OWN_SESSION    "1": start it in a session of its own (setsid), as a service runs
#                          (the bench does, unless BENCH_PREDROP_SESSION=bench; see scripts/bench.sh)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${1:?usage: start-predrop.sh WORKDIR [extra predrop args...]}
shift
mkdir -p "$work"
upstream=${PREDROP_UPSTREAM:-${PGHOST:?PGHOST unset}:${PGPORT:?PGPORT unset}}
timeout_s=${PREDROP_START_TIMEOUT:-10}

free_port() {
  # Ask the kernel for an unused port (the small race with other binders is handled by a retry).
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

alive() {
  # A zombie (exited, not yet reaped by whoever inherited it) counts as dead.
  local st
  [ -r "/proc/$1/stat" ] || return 1
  st=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$st" != Z ] && [ "$st" != X ]
}

for attempt in 1 2 3; do
  port=$(free_port)
  log=$(mktemp "$work/predrop.$port.XXXX.log")
  if [ "${PREDROP_HARNESS_RELAY:-}" = python ]; then
    cmd=(python3 "$here/tcp-relay.py" "127.0.0.1:$port" "$upstream")
  else
    : "${PREDROP_BIN:?PREDROP_BIN unset: the predrop binary under test}"
    cmd=("$PREDROP_BIN" serve --listen "127.0.0.1:$port" --upstream "$upstream" "$@")
  fi
  # A background job of this non-interactive shell is no process-group leader, so setsid does not
  # fork and $! stays the pid of predrop itself.
  [ "${PREDROP_OWN_SESSION:-}" = 1 ] && cmd=(setsid "${cmd[@]}")
  echo "# $(date '+%F %T') ${cmd[*]}" >"$log"
  "${cmd[@]}" </dev/null >>"$log" 2>&1 &
  pid=$!
  deadline=$(( $(date +%s%N) + timeout_s * 1000000000 ))
  while :; do
    if ! alive "$pid"; then
      # Lost the port to someone else between free_port and bind: try another port.
      if [ "$attempt" -lt 3 ] && grep -qiE 'address already in use|EADDRINUSE' "$log"; then
        continue 2
      fi
      rc=0; wait "$pid" 2>/dev/null || rc=$?
      {
        echo "start-predrop: predrop exited (status $rc) before accepting on 127.0.0.1:$port"
        echo "start-predrop: command: ${cmd[*]}"
        echo "----- $log -----"; cat "$log"; echo "-----"
      } >&2
      exit 1
    fi
    if accepts "$port"; then break; fi
    if [ "$(date +%s%N)" -gt "$deadline" ]; then
      {
        echo "start-predrop: predrop (pid $pid) did not accept on 127.0.0.1:$port within ${timeout_s}s"
        echo "start-predrop: command: ${cmd[*]}"
        echo "----- $log -----"; cat "$log"; echo "-----"
      } >&2
      kill -KILL "$pid" 2>/dev/null || true
      exit 1
    fi
    sleep 0.05
  done
  echo "$pid" >"$work/predrop.$port.pid"
  if [ -n "${PREDROP_OWNER_PID:-}" ]; then
    # Watchdog: if the test that owns this instance dies without stopping it (a ctest timeout, a
    # kill -9), stop it. It only signals a process whose command line is still this instance's.
    nohup bash -c '
      owner=$1 pid=$2 tag=$3
      mine() { tr "\0" " " <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$tag"; }
      while kill -0 "$owner" 2>/dev/null && kill -0 "$pid" 2>/dev/null; do sleep 1; done
      mine || exit 0
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 1 100); do mine || exit 0; sleep 0.1; done
      mine && kill -KILL "$pid" 2>/dev/null
    ' predrop-watchdog "$PREDROP_OWNER_PID" "$pid" "127.0.0.1:$port" </dev/null >/dev/null 2>&1 &
  fi
  echo "PREDROP_PORT=$port"
  echo "PREDROP_PID=$pid"
  echo "PREDROP_LOG=$log"
  exit 0
done
