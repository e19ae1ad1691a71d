#!/usr/bin/env bash
# `make run` on a clean Debian 12 installs no test-only package. The install-deps.sh calls that
# `make -n run` would make are run in a copy of a debootstrap minbase root, with apt-get's installs
# simulated (`apt-get install --simulate` resolves the same dependencies against the same mirror and
# the root's empty dpkg status, and downloads nothing): what apt would install is printed, and none
# of it may be a JDK, Chromium, Prometheus, pandas or another test tool, and no package of
# install-deps.sh's TEST_PKGS may be asked for (one may come in as a run package's dependency).
# Env: PREDROP_SOURCE_DIR.
set -euo pipefail
SRC=${PREDROP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
. "$SRC/tests/deploy/deb_root.sh"
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (debootstrap, chroot, mount namespace)" >&2; exit 1; }
command -v make >/dev/null || { echo "FAIL: make missing" >&2; exit 1; }
started=$(date +%s)
step() { echo "[$(( $(date +%s) - started ))s] $*"; }
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# The install-deps.sh commands of `make run`, as make would run them.
mapfile -t calls < <(make -s -n -C "$SRC" run BUILD_DIR=/nonexistent-build | grep 'install-deps\.sh' || true)
[ ${#calls[@]} -gt 0 ] || { echo "FAIL: \`make -n run\` runs no scripts/install-deps.sh" >&2; exit 1; }
echo "make run calls: ${calls[*]}"

# The lists as install-deps.sh spells them.
pkg_list() { sed -n "/^$1=(/,/^)/p" "$SRC/scripts/install-deps.sh" | sed -e "s/^$1=(//" -e 's/)$//' -e 's/#.*//' | tr -s ' \t' '\n' | grep -v '^$'; }
mapfile -t run_pkgs < <(pkg_list PKGS)
mapfile -t test_pkgs < <(pkg_list TEST_PKGS)
[ ${#run_pkgs[@]} -gt 5 ] && [ ${#test_pkgs[@]} -gt 5 ] \
  || { echo "FAIL: cannot read PKGS/TEST_PKGS from install-deps.sh (${#run_pkgs[@]}, ${#test_pkgs[@]})" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/predrop-make-run.XXXXXX")
trap 'root_remove "$work"' EXIT
R=$work/root
cached=$("$SRC/scripts/debian-root.sh" bookworm bookworm-clean)
step "copying the clean Debian 12 root $cached"
root_copy "$cached" "$R"
mkdir -p "$R/src/scripts"
cp "$SRC/scripts/install-deps.sh" "$R/src/scripts/"
# apt-get as install-deps.sh calls it, but an install only simulated, its plan kept (the script
# sends apt's output to /dev/null).
cat >"$R/usr/local/sbin/apt-get" <<'EOF'
#!/bin/sh
for a in "$@"; do
  if [ "$a" = install ]; then
    echo "apt-get $*" >>/tmp/apt-simulated.log
    exec /usr/bin/apt-get --simulate "$@" >>/tmp/apt-simulated.log 2>&1
  fi
done
exec /usr/bin/apt-get "$@"
EOF
chmod 0755 "$R/usr/local/sbin/apt-get"

for call in "${calls[@]}"; do
  step "in the root: $call"
  # The Makefile runs it from the repository root as ./scripts/install-deps.sh MODE.
  in_root "$R" sh -c "cd /src && $call" >"$work/deps.log" 2>&1 || { cat "$work/deps.log" >&2; fail "'$call' failed in the clean root"; }
  cat "$work/deps.log"
done
[ -s "$R/tmp/apt-simulated.log" ] || { echo "FAIL: install-deps.sh installed nothing into a clean root" >&2; exit 1; }
grep -q '^E:' "$R/tmp/apt-simulated.log" && { grep '^E:' "$R/tmp/apt-simulated.log" >&2; fail "apt could not resolve the run list"; }
mapfile -t would < <(sed -n 's/^Inst \([^ ]*\) .*/\1/p' "$R/tmp/apt-simulated.log" | sort -u)
step "make run would install ${#would[@]} packages:"
printf '%s\n' "${would[@]}" | column -c 100 2>/dev/null || printf '%s\n' "${would[@]}"

# Sets, not `printf | grep -q`: grep -q leaves at its first match, and under pipefail the printf
# it cut off (SIGPIPE, on a list longer than the pipe holds) would fail the test.
declare -A in_plan=() in_run=() in_asked=()
for p in "${would[@]}"; do in_plan[$p]=1; done
for p in "${run_pkgs[@]}"; do in_run[$p]=1; done
mapfile -t asked < <(sed -n 's/^apt-get .*install //p' "$R/tmp/apt-simulated.log" | tr ' ' '\n' | grep -v '^-' | grep -v '^$' | sort -u)
for p in "${asked[@]}"; do in_asked[$p]=1; done

# The run list does reach apt: each of its packages is installed or was already (a test of nothing
# otherwise).
for p in "${run_pkgs[@]}"; do
  [ -n "${in_plan[$p]:-}" ] && continue
  [ "$(chroot "$R" dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] \
    || fail "run package $p would not be installed"
done
# What install-deps.sh asked apt for, and what came with it: a test package may be a dependency of
# a run package (procps is postgresql-common's), but never asked for.
for p in "${test_pkgs[@]}"; do
  [ -n "${in_run[$p]:-}" ] && continue
  if [ -n "${in_asked[$p]:-}" ]; then
    fail "make run asks for test-only package $p"
  elif [ -n "${in_plan[$p]:-}" ]; then
    echo "note: $p (in TEST_PKGS) comes in as a dependency of the run list"
  fi
done
bad=$(grep -E '^(chromium|openjdk-|default-j(dk|re)|prometheus|python3-pandas|libgtest|libgmock|pgbouncer|clang|nodejs|npm$)' <<<"$(printf '%s\n' "${would[@]}")" || true)
[ -z "$bad" ] || fail "make run would install test tooling: $(echo $bad)"

if [ "$failures" -gt 0 ]; then echo "$failures failure(s)" >&2; exit 1; fi
step "ok: make run installs ${#would[@]} packages on a clean Debian 12, none of them test-only"
