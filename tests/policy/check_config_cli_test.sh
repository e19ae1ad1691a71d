#!/usr/bin/env bash
# `predrop check-config FILE` as an operator runs it: every error on stderr as file:line:column with a
# "did you mean" for a misspelt key, exit status non-zero; a valid file prints the effective config
# with the passwords masked (inline, from a conninfo_file and from the environment) and exits 0.
set -euo pipefail
: "${PREDROP_BIN:?set PREDROP_BIN to the predrop binary}"
work=$(mktemp -d "${TMPDIR:-/tmp}/predrop-checkcfg.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Only the variables set below: a PREDROP_* left in the caller's environment must not change the verdict.
clean=(env -i PATH="$PATH")

cat >"$work/bad.yaml" <<'YAML'
listen: "127.0.0.1:6432"
upstrem: "127.0.0.1:5432"
limits:
  max_clients: 0
rules:
  - schema: "audit"
    kinds: [drop_tabel]
    action: snapshot
YAML
if "${clean[@]}" "$PREDROP_BIN" check-config "$work/bad.yaml" >"$work/out" 2>"$work/err"; then
  fail "check-config accepted a file with three errors"
fi
cat "$work/err"
grep -qF "$work/bad.yaml:2:1: unknown key 'upstrem' (did you mean 'upstream'?)" "$work/err" || fail "no located did-you-mean for upstrem"
grep -qE "^$work/bad.yaml:4:16: .*max_clients" "$work/err" || fail "no located error for limits.max_clients: 0"
grep -qE "^$work/bad.yaml:7:[0-9]+: .*unknown kind 'drop_tabel'.*did you mean 'drop_table'" "$work/err" \
  || fail "no located did-you-mean for the kind drop_tabel"
[ "$(wc -l <"$work/err")" -ge 3 ] || fail "not every error was reported in one run"

printf 'host=db user=predrop_store password=file-secret-3\n' >"$work/store.conninfo"
cat >"$work/good.yaml" <<'YAML'
capture:
  conninfo: "host=db user=predrop_capture password=inline-secret-1"
store:
  conninfo_file: store.conninfo
YAML
"${clean[@]}" "$PREDROP_BIN" check-config "$work/good.yaml" >"$work/out" 2>&1 || { cat "$work/out"; fail "check-config rejected a valid file"; }
grep -q "predrop_capture" "$work/out" || fail "the effective config is not printed"
grep -q "inline-secret-1\|file-secret-3" "$work/out" && fail "check-config printed a password: $(cat "$work/out")"
"${clean[@]}" PREDROP_CAPTURE_CONNINFO="postgresql://cap:env-secret-2@db/x" "$PREDROP_BIN" check-config "$work/good.yaml" >"$work/out" 2>&1 \
  || { cat "$work/out"; fail "check-config rejected the environment override"; }
grep -q "env-secret-2" "$work/out" && fail "check-config printed the password of PREDROP_CAPTURE_CONNINFO: $(cat "$work/out")"
grep -q "cap:" "$work/out" || fail "the environment override is not in the effective config"
echo "check_config_cli_test: ok"
