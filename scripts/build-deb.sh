#!/usr/bin/env bash
# Builds the Debian package predrop_VERSION_ARCH.deb from a built binary and prints its path.
#   build-deb.sh BINARY OUTDIR
# VERSION is the one the binary reports (`predrop --version`, CMake's project version compiled in).
# The tree is staged here and packed with `dpkg-deb --root-owner-group`; Depends comes from
# dpkg-shlibdeps on the staged binary, plus the two commands that are not shared libraries and not
# essential: passwd for the postinst's useradd, procps for the unit's ExecReload=/bin/kill. Needs dpkg-dev and help2man (scripts/install-deps.sh deb).
#   PREDROP_DEB_MAINTAINER   the Maintainer field (default: the last commit's author)
#   SOURCE_DATE_EPOCH        file times and the changelog date (default: the last commit's time)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?usage: build-deb.sh BINARY OUTDIR}
out=${2:?usage: build-deb.sh BINARY OUTDIR}
for tool in dpkg-deb dpkg-shlibdeps help2man strip; do
  command -v "$tool" >/dev/null || { echo "build-deb: $tool missing (scripts/install-deps.sh deb)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "build-deb: $bin is not an executable" >&2; exit 1; }
bin=$(realpath "$bin")
mkdir -p "$out"
out=$(realpath "$out")

version=$("$bin" --version | awk '$1 == "predrop" {print $2}')
cmake_version=$(sed -n 's/^project(predrop VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[ -n "$version" ] || { echo "build-deb: '$bin --version' names no version" >&2; exit 1; }
[ "$version" = "$cmake_version" ] || {
  echo "build-deb: $bin is version $version, CMakeLists.txt says $cmake_version (rebuild it)" >&2; exit 1; }
arch=$(dpkg --print-architecture)
maintainer=${PREDROP_DEB_MAINTAINER:-$(git -C "$root" log -1 --format='%an <%ae>' 2>/dev/null || true)}
[ -n "$maintainer" ] || { echo "build-deb: no git author to name as Maintainer; set PREDROP_DEB_MAINTAINER" >&2; exit 1; }
: "${SOURCE_DATE_EPOCH:=$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH

work=$(mktemp -d "${TMPDIR:-/tmp}/predrop-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
pkg=$work/pkg
umask 022
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/share/man/man1" "$pkg/usr/share/doc/predrop" \
  "$pkg/usr/share/predrop/migrations" "$pkg/usr/share/predrop/sql" "$pkg/usr/share/predrop/grafana" \
  "$pkg/usr/share/predrop/prometheus" "$pkg/usr/share/lintian/overrides" "$pkg/lib/systemd/system" \
  "$pkg/etc/predrop"

# ---- files -------------------------------------------------------------------------------------
strip --strip-unneeded --remove-section=.comment --remove-section=.note -o "$pkg/usr/bin/predrop" "$bin"
chmod 0755 "$pkg/usr/bin/predrop"
# The migrations are compiled into the binary (capture/embed_migrations.cmake); the SQL is shipped
# to read and for `psql -f`, like the capture role.
install -m 0644 "$root"/migrations/*.sql "$pkg/usr/share/predrop/migrations/"
install -m 0644 "$root/deploy/sql/capture-role.sql" "$pkg/usr/share/predrop/sql/"
install -m 0644 "$root/deploy/grafana/predrop-dashboard.json" "$pkg/usr/share/predrop/grafana/"
install -m 0644 "$root/deploy/prometheus/predrop-alerts.yml" "$pkg/usr/share/predrop/prometheus/"
install -m 0644 "$root/deploy/systemd/predrop.yaml" "$pkg/etc/predrop/predrop.yaml"
# Secrets: systemd reads it as root before dropping to the service user.
install -m 0600 "$root/deploy/systemd/predrop.env" "$pkg/etc/predrop/predrop.env"
echo "predrop: non-standard-file-perm 0600 != 0644 [etc/predrop/predrop.env]" >"$pkg/usr/share/lintian/overrides/predrop"
chmod 0644 "$pkg/usr/share/lintian/overrides/predrop"

# The unit of deploy/systemd with the package's paths and its static user: the manual install's
# header is replaced, /usr/local/bin becomes /usr/bin, and DynamicUser goes (the postinst creates
# the predrop system user, which the unit's User= names).
unit=$pkg/lib/systemd/system/predrop.service
{
  echo "# predrop as a system service (Debian package predrop $version)."
  echo "# Fill in /etc/predrop/predrop.env (the capture and store conninfos), adjust"
  echo "# /etc/predrop/predrop.yaml, then: systemctl enable --now predrop"
  echo "# man predrop; dashboards and alerts: /usr/share/predrop; the capture role: /usr/share/predrop/sql."
  echo "#"
  sed -n '/^# `systemctl reload predrop`/,$p' "$root/deploy/systemd/predrop.service" \
    | sed -e 's#/usr/local/bin/predrop#/usr/bin/predrop#g' -e '/^DynamicUser=/d' \
          -e '/^Description=/a Documentation=man:predrop(1)'
} >"$unit"
chmod 0644 "$unit"
grep -q '^ExecStart=/usr/bin/predrop serve --config /etc/predrop/predrop.yaml$' "$unit" \
  && grep -q '^User=predrop$' "$unit" && grep -q '^\[Unit\]$' "$unit" && ! grep -q '/usr/local' "$unit" \
  && ! grep -q '^DynamicUser=' "$unit" && grep -q '^Documentation=man:predrop(1)$' "$unit" \
  || { echo "build-deb: deploy/systemd/predrop.service changed shape; the packaged unit is wrong:" >&2
       cat "$unit" >&2; exit 1; }

# ---- man page from --help (the subcommands' options in a section of their own) ------------------
roff_literal() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
include=$work/predrop.h2m
# Run as plain `predrop` on PATH so the usage lines name the command, not the build folder.
ln -s "$pkg/usr/bin/predrop" "$work/predrop"
{
  echo "[SUBCOMMAND OPTIONS]"
  for sub in $(PATH=$work:$PATH predrop --help | sed -n '/^Subcommands:/,$s/^  \([a-z][a-z-]*\) .*/\1/p'); do
    echo ".SS $sub"
    echo ".nf"
    PATH=$work:$PATH predrop "$sub" --help | roff_literal
    echo ".fi"
  done
  echo "[FILES]"
  echo ".TP"; echo ".I /etc/predrop/predrop.yaml"; echo "the service's configuration (README: Configuration reference)"
  echo ".TP"; echo ".I /etc/predrop/predrop.env"; echo "its secrets, PREDROP_* variables read by systemd (mode 0600)"
  echo ".TP"; echo ".I /usr/share/predrop"; echo "the store's migrations, the capture role's SQL, a Grafana dashboard and Prometheus alerts"
} >"$include"
PATH=$work:$PATH help2man --no-info --section 1 --source "predrop $version" \
  --name "PostgreSQL wire-protocol proxy that snapshots a table before it is destroyed" \
  --include "$include" --output "$work/predrop.1" predrop
rm "$work/predrop"
grep -q '^\.SH SYNOPSIS\|^\.SH DESCRIPTION' "$work/predrop.1" || { echo "build-deb: help2man wrote no page" >&2; exit 1; }
gzip -9n -c "$work/predrop.1" >"$pkg/usr/share/man/man1/predrop.1.gz"

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "predrop ($version) unstable; urgency=medium"
  echo
  echo "  * Built from commit $commit with scripts/build-deb.sh."
  echo
  echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$pkg/usr/share/doc/predrop/changelog.gz"
cat >"$pkg/usr/share/doc/predrop/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: predrop
Comment: Built from the predrop repository; libpg_query (PostgreSQL's parser,
 BSD-3-Clause and the PostgreSQL License) is linked statically.

Files: *
Copyright: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y) the predrop developers
License: see the predrop repository
EOF
chmod 0644 "$pkg/usr/share/doc/predrop/copyright"

# ---- maintainer scripts: the user, and systemd told of the unit without enabling or starting it
# (the secrets are placeholders until the operator fills them in) ------------------------------
cat >"$pkg/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if ! getent passwd predrop >/dev/null; then
    # A group left from an earlier install is reused.
    if getent group predrop >/dev/null; then group_opt="--gid predrop"; else group_opt=--user-group; fi
    useradd --system $group_opt --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin --comment "predrop proxy" predrop
  fi
fi
if [ "$1" = configure ] || [ "$1" = abort-upgrade ] || [ "$1" = abort-deconfigure ] || [ "$1" = abort-remove ]; then
  # deb-systemd-helper and deb-systemd-invoke are init-system-helpers', which is essential.
  deb-systemd-helper unmask predrop.service >/dev/null || true
  deb-systemd-helper update-state predrop.service >/dev/null || true
  if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
    # An upgrade restarts a running service on the new binary; a new install starts nothing.
    if [ -n "$2" ]; then
      deb-systemd-invoke try-restart predrop.service >/dev/null || true
    fi
  fi
fi
exit 0
EOF
cat >"$pkg/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  deb-systemd-invoke stop predrop.service >/dev/null || true
fi
exit 0
EOF
cat >"$pkg/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
  deb-systemd-helper purge predrop.service >/dev/null || true
fi
# The predrop user stays after a purge, as Debian's system users do: files it may own elsewhere
# keep a name.
exit 0
EOF
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/prerm" "$pkg/DEBIAN/postrm"
printf '%s\n' /etc/predrop/predrop.yaml /etc/predrop/predrop.env >"$pkg/DEBIAN/conffiles"

# ---- control: Depends from dpkg-shlibdeps (it wants a debian/control to run beside) ------------
mkdir -p "$work/src/debian"
: >"$work/src/debian/control"
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O --warnings=7 -e"$pkg/usr/bin/predrop" 2>"$work/shlibdeps.err") || {
  cat "$work/shlibdeps.err" >&2; echo "build-deb: dpkg-shlibdeps failed" >&2; exit 1; }
[ -s "$work/shlibdeps.err" ] && cat "$work/shlibdeps.err" >&2
depends=$(printf '%s\n' "$shlibs" | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build-deb: dpkg-shlibdeps found no dependency" >&2; exit 1; }
installed_size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: predrop
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $depends, passwd, procps
Section: database
Priority: optional
Description: PostgreSQL wire-protocol proxy that snapshots a table before it is dropped
 predrop sits between clients and PostgreSQL and relays the protocol byte
 for byte. A statement that would destroy a table's shape (DROP TABLE,
 DROP SCHEMA ... CASCADE, ALTER TABLE ... DROP/TYPE, TRUNCATE, ...) is held
 until a snapshot of each target table's columns, types and statistics
 profile has been written to a store database.
 .
 The package installs a hardened systemd unit (not enabled), its
 configuration in /etc/predrop, a man page, and under /usr/share/predrop the
 store's migrations, the capture role's SQL, a Grafana dashboard and
 Prometheus alert rules.
EOF
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
  | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"
find "$pkg" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

deb=$out/predrop_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"
