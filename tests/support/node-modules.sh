#!/usr/bin/env bash
# node-modules.sh DIR: DIR/node_modules installed from DIR/package-lock.json (npm ci), once. The ctest
# fixture node_modules (support.node_modules) runs it before every test that loads node-postgres, so
# those tests never install it themselves and never race each other for it on a fresh clone.
# An install that matches the lockfile (a copy of it is kept next to the modules) is reused; anything
# else is removed and installed again.
set -euo pipefail
dir=$(cd "${1:?usage: node-modules.sh DIR}" && pwd)
stamp=$dir/node_modules/.predrop-lockfile
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not installed (scripts/install-deps.sh installs nodejs and npm)"; exit 1; }
done
[ -f "$dir/package-lock.json" ] || { echo "FAIL: $dir/package-lock.json missing"; exit 1; }
if [ -f "$stamp" ] && cmp -s "$stamp" "$dir/package-lock.json" && [ -f "$dir/node_modules/pg/package.json" ]; then
  echo "# $dir/node_modules matches package-lock.json: reused"
  exit 0
fi
echo "# npm ci in $dir (node $(node --version), npm $(npm --version))"
(cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) || {
  echo "FAIL: npm ci in $dir failed (no network and nothing in npm's cache?)"
  exit 1
}
[ -f "$dir/node_modules/pg/package.json" ] || { echo "FAIL: npm ci left no $dir/node_modules/pg"; exit 1; }
cp "$dir/package-lock.json" "$stamp"
echo "# installed: pg $(node -p "require('$dir/node_modules/pg/package.json').version")"
