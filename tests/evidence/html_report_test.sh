#!/usr/bin/env bash
# predrop report --format html, rendered by headless Chromium: the page must draw something
# (the screenshot has more than one colour) and log no console error. Needs PGHOST/PGPORT/PGUSER
# and PREDROP_BIN; fails with a message when chromium is absent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PREDROP_BIN:?PREDROP_BIN not set}"
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || { echo "html_report_test: chromium not installed (scripts/install-deps.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/evidence-html.XXXXXX)
suffix=$$_$RANDOM
tdb=ev_html_t_$suffix sdb=ev_html_s_$suffix
psqlq() { psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "${PGUSER:-postgres}" "$@"; }
cleanup() {
  psqlq -d postgres -c "DROP DATABASE IF EXISTS $tdb WITH (FORCE)" -c "DROP DATABASE IF EXISTS $sdb WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psqlq -d postgres -c "CREATE DATABASE $tdb" -c "CREATE DATABASE $sdb"
base="host=$PGHOST port=$PGPORT user=${PGUSER:-postgres}"
"$PREDROP_BIN" migrate --store "$base dbname=$sdb" >/dev/null
psqlq -d "$tdb" -c "CREATE TABLE ventas (provincia text, monto numeric, sexo text)" \
  -c "INSERT INTO ventas SELECT (ARRAY['Salta','Jujuy','Chaco','Misiones','Formosa'])[1 + g % 5], g, 'M' FROM generate_series(1, 500) g" \
  -c "ANALYZE ventas"
"$PREDROP_BIN" baseline --target "$base dbname=$tdb" --store "$base dbname=$sdb" >/dev/null
psqlq -d "$tdb" -c "ALTER TABLE ventas RENAME COLUMN provincia TO jurisdiccion" -c "ALTER TABLE ventas ADD COLUMN anio int" -c "ANALYZE ventas"
"$PREDROP_BIN" baseline --target "$base dbname=$tdb" --store "$base dbname=$sdb" >/dev/null
psqlq -d "$sdb" -c "UPDATE predrop.schema_snapshots SET parser_version = 'p:html'"
"$PREDROP_BIN" report --format html --output "$work/report.html" --store "$base dbname=$sdb" >/dev/null
grep -q "jurisdiccion" "$work/report.html" || { echo "FAIL: the timeline does not show the renamed column"; exit 1; }
if grep -Eq "<script|https?://[^'\" ]*\.(js|css)|<link " "$work/report.html"; then
  echo "FAIL: the page is not self-contained"; exit 1
fi
"$chrome" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --user-data-dir="$work/profile" --enable-logging=stderr --v=0 \
  --screenshot="$work/shot.png" --window-size=1200,800 "file://$work/report.html" >"$work/chrome.log" 2>&1 || true
[ -s "$work/shot.png" ] || { echo "FAIL: no screenshot"; cat "$work/chrome.log"; exit 1; }
if grep -E "Uncaught|ERROR:CONSOLE|CONSOLE\(.*error" "$work/chrome.log"; then echo "FAIL: console errors"; exit 1; fi
python3 "$here/check_png.py" "$work/shot.png"
echo "html report: ok"
