#!/usr/bin/env bash
# Builds libpg_query with PostgreSQL 17's grammar into a cached prefix and prints the prefix.
# Debian 12 ships libpg-query 15 (PostgreSQL 15's grammar: no JSON_TABLE, no MERGE ... RETURNING,
# no SQL/JSON constructors); Debian 13's source package, 17-6.1.0, is on the same mirror. The
# prefix holds the static library and the headers predrop includes (pg_query.h, the protobuf-c
# header of the scan output and protobuf-c's own, whose code is inside the library), so nothing
# of it is needed at run time. The mirror serves the package's orig tarball but not its .dsc or
# debian.tar.xz (both answer 404), so the tarball is built as released upstream, with the upstream
# Makefile; the checksum below is the one Debian's Sources index gives for it.
#
# Run by CMake at configure time (CMakeLists.txt), so every build directory (normal, ASan, TSan,
# fuzz) links the same library. The build happens once per machine: the prefix carries a stamp of
# the tarball's checksum and of this recipe, and a configure whose stamp matches only prints it.
#   PREDROP_DEPS_CACHE   where prefixes live (default ~/.cache/predrop)
#   DEBIAN_MIRROR        overrides the mirror read from apt's sources
set -euo pipefail

version=17-6.1.0
orig=libpg-query_${version}.orig.tar.gz
# From Debian 13's Sources index (dists/trixie/main/source/Sources.xz), package libpg-query 17-6.1.0-1.
orig_sha256=a3dc0e4084a23da35128d4e9809ff27241c29a44fde74ba40a378b33d2cdefe2
# Bumped when the way the prefix is built changes, so an old prefix is rebuilt, not reused.
recipe=1

cache=${PREDROP_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/predrop}
prefix=$cache/libpg_query-$version
stamp="libpg_query $version sha256=$orig_sha256 recipe=$recipe"

if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$stamp" ]; then
  echo "$prefix"
  exit 0
fi

mkdir -p "$cache"
# Two configures at once (two build directories, two checkouts) build it once.
exec 9>"$cache/.libpg_query.lock"
flock 9
if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$stamp" ]; then
  echo "$prefix"
  exit 0
fi

. "$(dirname "$0")/debian-mirror.sh"
mirror=$(debian_mirror)

work=$(mktemp -d "$cache/.libpg_query-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "build-pg-query: building libpg_query $version from $mirror into $prefix" >&2
url=$mirror/pool/main/libp/libpg-query/$orig
curl -fsSL --retry 3 -o "$work/$orig" "$url" || { echo "build-pg-query: cannot download $url" >&2; exit 1; }
echo "$orig_sha256  $work/$orig" | sha256sum -c --quiet - >&2 || {
  echo "build-pg-query: $orig does not match the checksum of Debian 13's Sources index" >&2; exit 1; }
tar -xzf "$work/$orig" -C "$work"
src=$work/libpg_query-$version
make -C "$src" -j "${JOBS:-2}" build >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2; echo "build-pg-query: make failed" >&2; exit 1; }

staged=$work/prefix
install -d "$staged/lib" "$staged/include/pg_query" "$staged/include/protobuf-c"
install -m 644 "$src/libpg_query.a" "$staged/lib/"
install -m 644 "$src/pg_query.h" "$staged/include/"
install -m 644 "$src/protobuf/pg_query.pb-c.h" "$src/protobuf/pg_query.proto" "$staged/include/pg_query/"
install -m 644 "$src/vendor/protobuf-c/protobuf-c.h" "$staged/include/protobuf-c/"
install -m 644 "$src/LICENSE" "$staged/LICENSE"
echo "$stamp" >"$staged/.stamp"
rm -rf "$prefix"
mv "$staged" "$prefix"
echo "$prefix"
