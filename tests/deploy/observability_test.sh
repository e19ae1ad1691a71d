#!/usr/bin/env bash
# deploy/grafana and deploy/prometheus: the dashboard JSON parses, every PromQL expression of the
# dashboard and the alerts names only metrics (and label values) predrop exposes, the dashboard's
# expressions are valid PromQL (`promtool check rules` on them as recording rules), the alert rules
# pass `promtool check rules`, and `promtool test rules` shows each alert firing when it should.
# Also checks that the name check itself fails on a misspelt metric.
# Needs promtool (Debian package `prometheus`); installs nothing.
set -euo pipefail
SRC=${PREDROP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
DASH=$SRC/deploy/grafana/predrop-dashboard.json
ALERTS=$SRC/deploy/prometheus/predrop-alerts.yml
T=$SRC/tests/deploy
if ! command -v promtool >/dev/null; then
  echo "FAIL: promtool not found: install the Debian package 'prometheus' (apt-get install --no-install-recommends prometheus; scripts/install-deps.sh should list it)" >&2
  exit 1
fi
/usr/bin/python3 -c 'import yaml' 2>/dev/null \
  || { echo "FAIL: /usr/bin/python3 has no yaml module: apt-get install python3-yaml" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/predrop-obs.XXXXXX")
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 "$T/promql_check.py" "$DASH" "$ALERTS" "$work/dashboard-rules.yml"
echo "ok: dashboard and alerts name only predrop's metrics and label values"

promtool check rules "$ALERTS"
promtool check rules "$work/dashboard-rules.yml" >/dev/null \
  || { promtool check rules "$work/dashboard-rules.yml" >&2 || true; echo "FAIL: a dashboard expression is not valid PromQL" >&2; exit 1; }
echo "ok: dashboard expressions are valid PromQL"

/usr/bin/python3 "$T/alerts_fill.py" "$ALERTS" "$T/alerts_test.yml" "$work/alerts_test.yml"
promtool test rules "$work/alerts_test.yml"
echo "ok: promtool test rules"

# The name check must be able to fail.
sed 's/predrop_bytes_total/predrop_byte_total/' "$DASH" >"$work/typo.json"
if /usr/bin/python3 "$T/promql_check.py" "$work/typo.json" "$ALERTS" "$work/x.yml" >/dev/null 2>&1; then
  echo "FAIL: the metric-name check accepted predrop_byte_total" >&2
  exit 1
fi
sed 's/outcome=~"timeout|capture_error|store_error"/outcome=~"timeout|capture_failed"/' "$ALERTS" >"$work/typo.yml"
if /usr/bin/python3 "$T/promql_check.py" "$DASH" "$work/typo.yml" "$work/x.yml" >/dev/null 2>&1; then
  echo "FAIL: the label-value check accepted outcome capture_failed" >&2
  exit 1
fi
echo "ok: the checks reject a misspelt metric and label value"
echo "observability_test: all checks passed"
