#!/usr/bin/env bash
# Stop a predrop started by start-predrop.sh:  stop-predrop.sh PID [GRACE_SECONDS]
# SIGTERM, wait up to GRACE_SECONDS (default 10) for it to exit, then SIGKILL.
# Exit status: 0 when it stopped on SIGTERM (or was already gone), 1 when it had to be killed.
set -uo pipefail
pid=${1:?usage: stop-predrop.sh PID [GRACE_SECONDS]}
grace=${2:-10}

alive() {
  local st
  [ -r "/proc/$1/stat" ] || return 1
  st=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$st" != Z ] && [ "$st" != X ]
}

alive "$pid" || exit 0
kill -TERM "$pid" 2>/dev/null || exit 0
deadline=$(( $(date +%s%N) + grace * 1000000000 ))
while alive "$pid"; do
  if [ "$(date +%s%N)" -gt "$deadline" ]; then
    echo "stop-predrop: pid $pid still running ${grace}s after SIGTERM, sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    exit 1
  fi
  sleep 0.05
done
exit 0
