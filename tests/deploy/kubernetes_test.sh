#!/usr/bin/env bash
# deploy/kubernetes: YAML syntax and structure (k8s_check.py), then `predrop check-config` on the
# ConfigMap's policy file with the Secret's keys written where the pod mounts them. Also checks that
# check-config rejects a broken copy (so a passing run means the file was really validated) and that
# it does not print the Secret's passwords.
# Env: PREDROP_BIN (the binary), PREDROP_SOURCE_DIR.
set -euo pipefail
SRC=${PREDROP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
: "${PREDROP_BIN:?set PREDROP_BIN to the predrop binary}"
PREDROP_BIN=$(realpath "$PREDROP_BIN")
[ -x "$PREDROP_BIN" ] || { echo "FAIL: PREDROP_BIN=$PREDROP_BIN is not executable" >&2; exit 1; }
/usr/bin/python3 -c 'import yaml' 2>/dev/null \
  || { echo "FAIL: /usr/bin/python3 has no yaml module: apt-get install python3-yaml" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/predrop-k8s.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! /usr/bin/python3 "$SRC/tests/deploy/k8s_check.py" "$SRC/deploy/kubernetes" "$work/root" >"$work/facts"; then
  echo "kubernetes_test: structural checks failed" >&2
  exit 1
fi
echo "ok: manifests parse; sidecar, probes, ports, mounts, shutdown timing and resources agree"
config=$(sed -n 's/^CONFIG //p' "$work/facts")
[ -f "$config" ] || { echo "FAIL: extracted config $config missing" >&2; exit 1; }

# check-config applies PREDROP_* overrides: run it without any so the file alone is judged.
clean_env=(env -u PREDROP_CAPTURE_CONNINFO -u PREDROP_STORE_CONNINFO)
while IFS= read -r v; do clean_env+=(-u "$v"); done < <(env | sed -n 's/^\(PREDROP_[A-Z0-9_]*\)=.*/\1/p' | grep -v '^PREDROP_BIN$\|^PREDROP_SOURCE_DIR$' || true)

if ! out=$("${clean_env[@]}" "$PREDROP_BIN" check-config "$config" 2>&1); then
  echo "$out" >&2
  echo "FAIL: predrop check-config rejects the ConfigMap's predrop.yaml" >&2
  exit 1
fi
echo "ok: predrop check-config accepts the ConfigMap's predrop.yaml"
while IFS= read -r secret; do
  if [[ $out == *"$secret"* ]]; then
    echo "FAIL: check-config printed a password from the Secret" >&2
    exit 1
  fi
done < <(sed -n 's/^SECRET_VALUE //p' "$work/facts")
echo "ok: check-config output masks the Secret's passwords"

# The check must be able to fail: a misspelt key in a copy of the same file is rejected.
broken=$(dirname "$config")/broken.yaml
{ cat "$config"; printf 'limits_typo: 1\n'; } >"$broken"
if "${clean_env[@]}" "$PREDROP_BIN" check-config "$broken" >/dev/null 2>&1; then
  echo "FAIL: check-config accepted a config with an unknown key; it is not validating" >&2
  exit 1
fi
echo "ok: check-config rejects a broken copy"
echo "kubernetes_test: all checks passed"
