#!/usr/bin/env bash
# Builds (once) and prints the path of a cached Debian root made with debootstrap from apt's own
# mirror, for what must run on another Debian than the machine's: PostgreSQL 17 from Debian 13
# (its binaries need Debian 13's libc), or a clean Debian 12 to install predrop's package into.
#   debian-root.sh SUITE NAME [PACKAGE...]   -> prints the root's path
#   debian-root.sh --path NAME               -> prints the path without building
# The root is rebuilt when SUITE, the package list or this recipe changes (a stamp records them);
# otherwise it is reused as it is. Nothing is mounted here: whoever enters the root mounts what it
# needs in a mount namespace of its own (unshare -m), so a killed run leaves no mount behind.
#   PREDROP_DEPS_CACHE   where roots live (default ~/.cache/predrop; roots under roots/NAME)
#   DEBIAN_MIRROR        overrides the mirror read from apt's sources
set -euo pipefail
recipe=1
cache=${PREDROP_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/predrop}

if [ "${1:-}" = --path ]; then
  echo "$cache/roots/${2:?root name}"
  exit 0
fi
suite=${1:?usage: debian-root.sh SUITE NAME [PACKAGE...]}
name=${2:?usage: debian-root.sh SUITE NAME [PACKAGE...]}
shift 2
packages=("$@")
root=$cache/roots/$name
stamp="suite=$suite packages=${packages[*]} recipe=$recipe"

[ "$(id -u)" -eq 0 ] || { echo "debian-root: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "debian-root: debootstrap is missing (scripts/install-deps.sh test installs it)" >&2; exit 1; }

if [ -f "$root/.predrop-stamp" ] && [ "$(cat "$root/.predrop-stamp")" = "$stamp" ]; then
  echo "$root"
  exit 0
fi
mkdir -p "$cache/roots"
exec 9>"$cache/roots/.$name.lock"
flock 9
if [ -f "$root/.predrop-stamp" ] && [ "$(cat "$root/.predrop-stamp")" = "$stamp" ]; then
  echo "$root"
  exit 0
fi

. "$(dirname "$0")/debian-mirror.sh"
mirror=$(debian_mirror)

staged=$cache/roots/.$name.new
rm -rf "$staged"
include=()
[ ${#packages[@]} -eq 0 ] || include=(--include="$(IFS=,; echo "${packages[*]}")")
echo "debian-root: debootstrap $suite into $root (${packages[*]:-minbase only})" >&2
start=$(date +%s)
if ! debootstrap --variant=minbase "${include[@]}" "$suite" "$staged" "$mirror" >"$cache/roots/.$name.log" 2>&1; then
  tail -n 30 "$cache/roots/.$name.log" >&2
  # debootstrap may have mounted /proc inside before failing.
  umount -l "$staged/proc" 2>/dev/null || true
  echo "debian-root: debootstrap of $suite failed (log: $cache/roots/.$name.log)" >&2
  exit 1
fi
umount -l "$staged/proc" 2>/dev/null || true
# apt inside the root reads the same mirror, for packages installed into it later.
echo "deb $mirror $suite main" >"$staged/etc/apt/sources.list"
rm -f "$staged"/var/cache/apt/archives/*.deb
echo "$stamp" >"$staged/.predrop-stamp"
rm -rf "$root"
mv "$staged" "$root"
echo "debian-root: $name ready in $(( $(date +%s) - start )) s" >&2
echo "$root"
