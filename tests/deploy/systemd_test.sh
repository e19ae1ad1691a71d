#!/usr/bin/env bash
# deploy/systemd: `systemd-analyze verify` (when it can run here) and `systemd-analyze security`
# on the unit, a structural check of its hardening and stop/reload settings, and
# `predrop check-config` on the sample predrop.yaml with the sample predrop.env applied.
# Env: PREDROP_BIN, PREDROP_SOURCE_DIR.
set -euo pipefail
SRC=${PREDROP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
: "${PREDROP_BIN:?set PREDROP_BIN to the predrop binary}"
PREDROP_BIN=$(realpath "$PREDROP_BIN")
UNIT=$SRC/deploy/systemd/predrop.service
ENVFILE=$SRC/deploy/systemd/predrop.env
CONFIG=$SRC/deploy/systemd/predrop.yaml
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
for f in "$UNIT" "$ENVFILE" "$CONFIG"; do [ -f "$f" ] || { echo "FAIL: $f missing" >&2; exit 1; }; done
work=$(mktemp -d "${TMPDIR:-/tmp}/predrop-systemd.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- structure: the [Service] settings that matter, as written ----------------------------------
value() { sed -n "/^\[Service\]/,/^\[/{s/^$1=//p}" "$UNIT" | tail -n1; }
expect() {
  local key=$1 want=$2 got
  got=$(value "$key")
  [ "$got" = "$want" ] || fail "$key='$got', want '$want'"
}
expect NoNewPrivileges yes
expect ProtectSystem strict
expect ProtectHome yes
expect PrivateTmp yes
expect CapabilityBoundingSet ""
grep -q '^CapabilityBoundingSet=$' "$UNIT" || fail "CapabilityBoundingSet= (empty) missing"
expect RestrictAddressFamilies "AF_INET AF_INET6 AF_UNIX"
expect KillSignal SIGTERM
expect ExecReload '/bin/kill -HUP $MAINPID'
[ "$(value DynamicUser)" = yes ] || { u=$(value User); [ -n "$u" ] && [ "$u" != root ]; } \
  || fail "needs DynamicUser=yes or a dedicated User= (not root)"
envfile=$(value EnvironmentFile); envfile=${envfile#-}
[ -n "$envfile" ] || fail "EnvironmentFile= (the secrets) missing"
grep -q '^ExecStart=.*predrop serve --config ' "$UNIT" || fail "ExecStart must run 'predrop serve --config FILE'"
cfg_path=$(sed -n 's/^ExecStart=.*--config \([^ ]*\).*/\1/p' "$UNIT")

# TimeoutStopSec must outlast the drain of the sample config (limits.drain_timeout_ms, default 30 s)
stop=$(value TimeoutStopSec)
case $stop in
  *min) stop_s=$(( ${stop%min} * 60 )) ;;
  *s) stop_s=${stop%s} ;;
  *[0-9]) stop_s=$stop ;;
  *) stop_s=0; fail "cannot read TimeoutStopSec='$stop'" ;;
esac
drain_ms=$(sed -n 's/^ *drain_timeout_ms: *\([0-9]*\).*/\1/p' "$CONFIG"); drain_ms=${drain_ms:-30000}
[ "$stop_s" -gt $(( drain_ms / 1000 )) ] || fail "TimeoutStopSec=$stop must exceed the drain timeout (${drain_ms} ms)"
echo "ok: structure (hardening, user, env file, reload, stop ${stop_s}s > drain $((drain_ms / 1000))s)"

# ---- env file: only KEY=VALUE lines of PREDROP_* variables --------------------------------------
bad=$(grep -v -E '^\s*(#.*)?$' "$ENVFILE" | grep -v -E '^PREDROP_[A-Z0-9_]+=' || true)
[ -z "$bad" ] || fail "predrop.env has lines that are not PREDROP_*=VALUE: $bad"

# ---- the sample config and env file pass check-config (the ExecStartPre) ------------------------
clean_env=(env)
while IFS= read -r v; do clean_env+=(-u "$v"); done < <(env | sed -n 's/^\(PREDROP_[A-Z0-9_]*\)=.*/\1/p' || true)
while IFS= read -r line; do clean_env+=("$line"); done < <(grep -E '^PREDROP_[A-Z0-9_]+=' "$ENVFILE")
if out=$("${clean_env[@]}" "$PREDROP_BIN" check-config "$CONFIG" 2>&1); then
  echo "ok: check-config accepts predrop.yaml with predrop.env applied"
  grep -q 'CHANGE_ME' <<<"$out" && fail "check-config printed the env file's password"
else
  echo "$out" >&2
  fail "check-config rejects deploy/systemd/predrop.yaml with predrop.env applied"
fi
[ "$cfg_path" = /etc/predrop/predrop.yaml ] || fail "ExecStart --config $cfg_path: the README documents /etc/predrop/predrop.yaml"

# ---- systemd-analyze ---------------------------------------------------------------------------
if ! command -v systemd-analyze >/dev/null; then
  # A check that cannot run fails: scripts/install-deps.sh test installs systemd.
  fail "systemd-analyze not installed (apt-get install systemd): the unit cannot be verified"
else
  # The unit as installed, with the binary this build made in place of /usr/local/bin/predrop.
  sed "s#/usr/local/bin/predrop#$PREDROP_BIN#g" "$UNIT" >"$work/predrop.service"
  printf '[Service]\nExecStart=/bin/true\n' >"$work/probe.service"
  if ! systemd-analyze verify "$work/probe.service" >"$work/probe.log" 2>&1; then
    fail "systemd-analyze verify cannot run here ($(head -n1 "$work/probe.log")): the unit cannot be verified"
  else
    # verify exits 0 on unknown keys and bad values: any message about the unit is a failure.
    systemd-analyze verify "$work/predrop.service" >"$work/verify.log" 2>&1 || fail "systemd-analyze verify failed"
    if grep -q 'predrop.service' "$work/verify.log"; then
      cat "$work/verify.log" >&2
      fail "systemd-analyze verify reported problems"
    else
      echo "ok: systemd-analyze verify"
    fi
  fi
  # Exposure score (0 = locked down, 10 = unprotected); --threshold is in tenths.
  if systemd-analyze security --offline=yes "$work/predrop.service" >"$work/security.log" 2>&1; then
    score=$(sed -n 's/.*Overall exposure level for predrop.service: \([0-9.]*\).*/\1/p' "$work/security.log")
    if systemd-analyze security --offline=yes --threshold=20 "$work/predrop.service" >/dev/null 2>&1; then
      echo "ok: systemd-analyze security exposure $score <= 2.0"
    else
      grep '✗' "$work/security.log" >&2 || true
      fail "systemd-analyze security exposure $score > 2.0"
    fi
  else
    # Debian 12's systemd (252) has --offline: a failure here is the unit's or the tool's, never a pass.
    cat "$work/security.log" >&2
    fail "systemd-analyze security --offline=yes failed on the unit"
  fi
fi

if [ $failures -ne 0 ]; then
  echo "systemd_test: $failures failure(s)" >&2
  exit 1
fi
echo "systemd_test: all checks passed"
