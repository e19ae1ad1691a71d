#!/usr/bin/env bash
# The Debian package on a clean Debian 12: `apt-get install ./predrop_….deb` into a copy of a
# debootstrap minbase root (nothing but the essential and required packages, so a runtime library
# the package does not declare is missing and predrop does not start), then, inside it:
# `predrop --version`, `check-config` on the shipped /etc/predrop/predrop.yaml (as the unit's
# ExecStartPre runs it, and with the operator's predrop.env applied), and the unit's ExecStart
# command line, read from the installed unit, run as its User in front of the test cluster. psql
# connects through it and drops a table, whose snapshot must be in the store.
# Env: PREDROP_DEB (the package; deploy.deb_package builds it), PGHOST/PGPORT/PGUSER (the cluster
# of scripts/test.sh, reachable on 127.0.0.1), PREDROP_SOURCE_DIR.
set -euo pipefail
SRC=${PREDROP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
. "$SRC/tests/deploy/deb_root.sh"
: "${PREDROP_DEB:?set PREDROP_DEB to the .deb under test}"
: "${PGPORT:?PGPORT unset: the test cluster (scripts/test.sh)}"
pguser=${PGUSER:-postgres}
[ -f "$PREDROP_DEB" ] || { echo "FAIL: $PREDROP_DEB missing (deploy.deb_package builds it)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (debootstrap, chroot, mount namespace)" >&2; exit 1; }
for tool in unshare chroot psql dpkg-deb python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool missing" >&2; exit 1; }
done
version=$(dpkg-deb -f "$PREDROP_DEB" Version)
started=$(date +%s)
step() { echo "[$(( $(date +%s) - started ))s] $*"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/predrop-deb-install.XXXXXX")
R=$work/root
pid=""
store_db=predrop_deb_store_$$
table=deb_probe_$$
psql_direct() { psql -X -v ON_ERROR_STOP=1 -qAt -h 127.0.0.1 -p "$PGPORT" -U "$pguser" "$@"; }
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  psql_direct -d postgres -c "DROP DATABASE IF EXISTS $store_db WITH (FORCE)" >/dev/null 2>&1 || true
  psql_direct -d postgres -c "DROP TABLE IF EXISTS public.$table" >/dev/null 2>&1 || true
  root_remove "$work" || true
}
trap cleanup EXIT

cached=$("$SRC/scripts/debian-root.sh" bookworm bookworm-clean)
step "copying the clean Debian 12 root $cached"
root_copy "$cached" "$R"
chroot "$R" dpkg-query -W -f='${Package}\n' | sort >"$work/before"
cp "$PREDROP_DEB" "$R/tmp/"
deb_in_root=/tmp/$(basename "$PREDROP_DEB")

step "apt-get install ./$(basename "$PREDROP_DEB")"
# No recommends: only what the package declares may make it work.
if ! in_root "$R" sh -c "apt-get update -qq && apt-get install -y -q --no-install-recommends $deb_in_root" \
    >"$work/apt.log" 2>&1; then
  cat "$work/apt.log" >&2
  echo "FAIL: apt-get install of the package failed" >&2; exit 1
fi
chroot "$R" dpkg-query -W -f='${Package}\n' | sort >"$work/after"
echo "installed with it: $(comm -13 "$work/before" "$work/after" | tr '\n' ' ')"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# ---- what the package put in place ----------------------------------------------------------
[ "$(chroot "$R" dpkg-query -W -f='${Status}' predrop)" = "install ok installed" ] || fail "predrop is not installed"
for f in /usr/bin/predrop /usr/share/man/man1/predrop.1.gz /usr/share/predrop/migrations/0001_store.sql \
         /usr/share/predrop/sql/capture-role.sql /usr/share/predrop/grafana/predrop-dashboard.json \
         /usr/share/predrop/prometheus/predrop-alerts.yml /usr/share/doc/predrop/copyright; do
  [ -f "$R$f" ] || fail "$f not installed"
done
conffiles=$(chroot "$R" dpkg-query -W -f='${Conffiles}' predrop)
for f in /etc/predrop/predrop.yaml /etc/predrop/predrop.env; do
  grep -q "^ $f " <<<"$conffiles" || fail "$f is not a conffile (dpkg says: $conffiles)"
done
[ "$(stat -c '%a %U:%G' "$R/etc/predrop/predrop.env")" = "600 root:root" ] \
  || fail "predrop.env is $(stat -c '%a %U:%G' "$R/etc/predrop/predrop.env"), want 600 root:root"
unit=$(chroot "$R" dpkg -L predrop | grep '/systemd/system/predrop\.service$' || true)
[ -n "$unit" ] || { fail "the package installs no predrop.service"; exit 1; }
unit_value() { sed -n "/^\[Service\]/,/^\[/{s/^$1=//p}" "$R$unit" | tail -n1; }
user=$(unit_value User); group=$(unit_value Group)
[ -n "$user" ] && [ "$user" != root ] || fail "the unit's User= is '$user'"
[ -z "$(unit_value DynamicUser)" ] || fail "the packaged unit keeps DynamicUser= next to the package's user"
passwd_line=$(chroot "$R" getent passwd "$user" || true)
IFS=: read -r _ _ uid gid _ home shell <<<"$passwd_line"
[ -n "$passwd_line" ] && [ "$uid" -lt 1000 ] && [ "$shell" = /usr/sbin/nologin ] \
  || fail "user '$user' is not a system user with no login: '$passwd_line'"
chroot "$R" getent group "${group:-$user}" >/dev/null || fail "group '${group:-$user}' missing"
man_head=$(gzip -dc "$R/usr/share/man/man1/predrop.1.gz" | grep -c '^\.SH' || true)
[ "$man_head" -ge 3 ] || fail "the man page has $man_head sections"
gzip -dc "$R/usr/share/man/man1/predrop.1.gz" | grep -q -- '--hold-timeout-ms' || fail "the man page lacks serve's options"

# ---- predrop runs in the clean root --------------------------------------------------------
step "predrop --version"
got=$(in_root "$R" predrop --version 2>&1) || { echo "$got" >&2; fail "predrop --version failed (a library missing?)"; exit 1; }
[ "$got" = "predrop $version" ] || fail "predrop --version says '$got', the package is $version"

# The Exec lines exactly as the unit has them: plain words (no quoting, specifiers or variables,
# which this test would have to expand as systemd does).
exec_line() {
  local v; v=$(unit_value "$1")
  case $v in *[\"\'%\$\\]*) fail "$1='$v' needs systemd's expansion; this test runs plain words"; return 1 ;; esac
  printf '%s\n' "$v"
}
read -ra pre <<<"$(exec_line ExecStartPre)"
read -ra start <<<"$(exec_line ExecStart)"
envfile=$(unit_value EnvironmentFile); envfile=${envfile#-}
[ "${start[0]:-}" = /usr/bin/predrop ] || fail "ExecStart runs '${start[0]:-}', not the packaged /usr/bin/predrop"
[ "${pre[0]:-}" = /usr/bin/predrop ] && [ "${pre[1]:-}" = check-config ] || fail "ExecStartPre is '${pre[*]}'"
[ "$envfile" = /etc/predrop/predrop.env ] || fail "EnvironmentFile='$envfile'"

# Every command the unit runs is installed (ExecReload's /bin/kill is no library dpkg-shlibdeps sees).
while read -r cmd; do
  cmd=${cmd#[-@:+!]}; cmd=${cmd#[-@:+!]}
  [ -x "$R$cmd" ] || fail "the unit runs $cmd, which the package's dependencies do not install"
done < <(sed -n 's/^Exec[A-Za-z]*=\([^ ]*\).*/\1/p' "$R$unit")

# The installed unit passes this machine's systemd-analyze (the root has no systemd), its binary and
# man page those of the root, and stays as locked down as deploy/systemd's (tests/deploy/systemd_test.sh).
if ! command -v systemd-analyze >/dev/null; then
  fail "systemd-analyze not installed (apt-get install systemd): the installed unit cannot be verified"
else
  sed "s#/usr/bin/predrop#$R/usr/bin/predrop#g" "$R$unit" >"$work/predrop.service"
  MANPATH=$R/usr/share/man systemd-analyze verify "$work/predrop.service" >"$work/verify.log" 2>&1 \
    && ! grep -q 'predrop' "$work/verify.log" || { cat "$work/verify.log" >&2; fail "systemd-analyze verify of the installed unit"; }
  systemd-analyze security --offline=yes --threshold=20 "$work/predrop.service" >"$work/security.log" 2>&1 \
    || { grep -E '✗|exposure' "$work/security.log" >&2; fail "systemd-analyze security of the installed unit above 2.0"; }
fi

# The shipped files as they are, with the shipped env file's placeholders: ExecStartPre passes.
as_unit_user=(setpriv --reuid="$user" --regid="${group:-$user}" --init-groups --no-new-privs --)
unit_env() {  # EnvironmentFile's KEY=VALUE lines, as env(1) arguments (values may hold spaces)
  sed -n 's/^\(PREDROP_[A-Z0-9_]*=.*\)$/\1/p' "$R$envfile"
}
step "ExecStartPre on the shipped config and env file"
mapfile -t shipped_env < <(unit_env)
[ ${#shipped_env[@]} -gt 0 ] || fail "the shipped $envfile sets no PREDROP_* variable"
out=$(in_root "$R" "${shipped_env[@]}" "${as_unit_user[@]}" "${pre[@]}" 2>&1) \
  || fail "ExecStartPre (${pre[*]}) failed on the shipped files: $out"
out=$(in_root "$R" predrop check-config /etc/predrop/predrop.yaml 2>&1) \
  || fail "predrop check-config /etc/predrop/predrop.yaml failed: $out"
grep -q '6432' <<<"$out" || fail "check-config printed no listen address: $out"

# ---- the service in front of the test cluster ----------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port); admin_port=$(free_port)
psql_direct -d postgres -c "CREATE DATABASE $store_db" >/dev/null
# What an operator does: the secrets into predrop.env; the addresses too, so the shipped
# predrop.yaml stays as installed. The hold's bound too, raised from the shipped 2 s: this test
# is of the package, not of timing, and under the loaded start of a full `make test` the first
# hold (which opens the capture's and the store's sessions) once overran 2 s: the snapshot was
# written, the ledger said timeout.
cat >"$R$envfile" <<EOF
PREDROP_CAPTURE_CONNINFO=host=127.0.0.1 port=$PGPORT user=$pguser
PREDROP_STORE_CONNINFO=host=127.0.0.1 port=$PGPORT user=$pguser dbname=$store_db
PREDROP_LISTEN=127.0.0.1:$port
PREDROP_UPSTREAM=127.0.0.1:$PGPORT
PREDROP_ADMIN=127.0.0.1:$admin_port
PREDROP_SNAPSHOTS_HOLD_TIMEOUT_MS=60000
EOF
mapfile -t service_env < <(unit_env)
in_root "$R" "${service_env[@]}" "${as_unit_user[@]}" "${pre[@]}" >"$work/pre.log" 2>&1 \
  || { cat "$work/pre.log" >&2; fail "ExecStartPre failed with the test's env file"; }
step "ExecStart as $user: ${start[*]}"
(exec_in_root "$R" "${service_env[@]}" "${as_unit_user[@]}" "${start[@]}" >"$work/serve.log" 2>&1 </dev/null) &
pid=$!
accepting=0
for _ in $(seq 1 200); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then accepting=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ "$accepting" != 1 ]; then
  cat "$work/serve.log" >&2
  fail "the unit's ExecStart did not accept on 127.0.0.1:$port"; exit 1
fi
# The same file, not the same spelling: how /proc spells a chrooted process's path depends on
# where the reader's own root is.
[ "/proc/$pid/exe" -ef "$R/usr/bin/predrop" ] \
  || fail "pid $pid is $(readlink "/proc/$pid/exe" 2>/dev/null), not the packaged predrop"
[ "$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")" = "$uid" ] || fail "predrop does not run as $user (uid $uid)"

step "psql through predrop: DROP TABLE $table"
psql -X -v ON_ERROR_STOP=1 -qAt -h 127.0.0.1 -p "$port" -U "$pguser" -d postgres >"$work/psql.log" 2>&1 <<SQL \
  || { cat "$work/psql.log" >&2; fail "psql through predrop failed"; }
CREATE TABLE public.$table (id int, name text);
INSERT INTO public.$table SELECT g, 'n' || g FROM generate_series(1, 100) g;
ANALYZE public.$table;
DROP TABLE public.$table;
SQL
[ -z "$(psql_direct -d postgres -c "SELECT to_regclass('public.$table')")" ] || fail "the DROP did not happen"
snap=$(psql_direct -d "$store_db" -F' ' -c "SELECT column_count, drop_outcome FROM predrop.schema_snapshots
  WHERE schema_name = 'public' AND table_name = '$table'" 2>&1) || fail "no store in $store_db: $snap"
event=$(psql_direct -d "$store_db" -c "SELECT outcome FROM predrop.drop_events
  WHERE table_name = '$table'" 2>&1) || fail "no drop_events in $store_db: $event"
echo "snapshot: ${snap:-none}; ledger: ${event:-none}"
[ "${snap%% *}" = 2 ] || fail "no snapshot of public.$table with its 2 columns (got '$snap')"
grep -qx written <<<"$event" || fail "the ledger has no 'written' row for $table (got '$event')"

step "SIGTERM"
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || { tail -n 20 "$work/serve.log" >&2; fail "predrop exited $rc on SIGTERM"; }

# ---- the maintainer scripts' other paths ---------------------------------------------------
step "reinstall (postinst configure as an upgrade), remove, purge"
in_root "$R" dpkg -i "$deb_in_root" >"$work/reinstall.log" 2>&1 || { cat "$work/reinstall.log" >&2; fail "dpkg -i over the installed package failed"; }
grep -q "^PREDROP_LISTEN=127.0.0.1:$port$" "$R$envfile" || fail "the reinstall replaced the edited conffile $envfile"
[ "$(chroot "$R" getent passwd "$user" | cut -d: -f3)" = "$uid" ] || fail "the reinstall changed user $user"
in_root "$R" dpkg --remove predrop >"$work/remove.log" 2>&1 || { cat "$work/remove.log" >&2; fail "dpkg --remove failed"; }
[ ! -e "$R/usr/bin/predrop" ] && [ ! -e "$R$unit" ] || fail "dpkg --remove left the binary or the unit"
[ -f "$R/etc/predrop/predrop.yaml" ] || fail "dpkg --remove took the conffiles (only purge does)"
in_root "$R" dpkg --purge predrop >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge failed"; }
[ ! -e "$R/etc/predrop/predrop.yaml" ] && [ ! -e "$R$envfile" ] || fail "dpkg --purge left the conffiles"

if [ "$failures" -gt 0 ]; then
  echo "--- predrop's log" >&2; tail -n 30 "$work/serve.log" >&2
  echo "$failures failure(s)" >&2; exit 1
fi
step "ok: predrop $version installed on a clean Debian 12, ran as $user, snapshotted the DROP"
