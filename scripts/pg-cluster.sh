#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL cluster for tests and `make run`.
#   pg-cluster.sh start DIR        -> initdb into DIR, start on a free port, print KEY=VALUE lines (also in DIR/env)
#   pg-cluster.sh stop DIR         -> stop it (fast), leave DIR for inspection
#   pg-cluster.sh ctl DIR ARGS...  -> the cluster's own pg_ctl -D DIR/data ARGS (stop, start, restart), as its owner
# PG_MAJOR picks the server: 15 (default) is Debian 12's package on this machine; 17 is Debian 13's
# postgresql-17 in a cached debootstrap root (scripts/debian-root.sh; root only), whose server runs
# chrooted there in a mount namespace of its own that lives as long as the postmaster. stop and ctl
# read the version from DIR/env, whatever PG_MAJOR says.
# The cluster runs as a non-root OS user: the postgres user of Debian's package when invoked as root
# (inside the root too, with this machine's uid, so DIR's files belong to the same user on both sides).
# It has SSL on with a self-signed certificate, trust for the OS superuser on 127.0.0.1,
# and scram/md5 rules for the test roles, so that auth and TLS tests can run against it.
# DIR/env also names PG_MAJOR, PG_CLIENT_BIN, the directory of that version's client programs
# (psql, pg_dump, pg_restore, pgbench...), and for 17 PG_DEBIAN_ROOT, the root it runs in. pg_dump
# refuses a server newer than itself, so whoever tests against the cluster puts PG_CLIENT_BIN first
# in PATH (scripts/test.sh does).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:?start|stop|ctl}; dir=${2:?cluster directory}
shift 2

# The version of an existing cluster is the one its env file recorded (a cluster from before
# PG_MAJOR was recorded is a 15 one).
if [ "$cmd" != start ]; then
  [ -d "$dir" ] || { echo "pg-cluster.sh: no cluster directory $dir" >&2; exit 1; }
  dir=$(cd "$dir" && pwd)
  PG_MAJOR=$(sed -n 's/^PG_MAJOR=//p' "$dir/env" 2>/dev/null || true)
  PG_MAJOR=${PG_MAJOR:-15}
fi
PG_MAJOR=${PG_MAJOR:-15}

case "$PG_MAJOR" in
15)
  PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
  client_bin=$PGBIN
  ;;
17)
  [ "$(id -u)" -eq 0 ] || { echo "pg-cluster.sh: PostgreSQL 17 runs chrooted in a Debian 13 root: run as root" >&2; exit 1; }
  PGBIN=/usr/lib/postgresql/17/bin   # inside the root
  if [ "$cmd" = start ]; then
    pg_root=$("$here/debian-root.sh" trixie trixie-pg17 postgresql-17)
  else
    # The root the cluster was started from, wherever the cache is now.
    pg_root=$(sed -n 's/^PG_DEBIAN_ROOT=//p' "$dir/env" 2>/dev/null || true)
    [ -n "$pg_root" ] || pg_root=$("$here/debian-root.sh" --path trixie-pg17)
  fi
  ;;
*) echo "pg-cluster.sh: PG_MAJOR=$PG_MAJOR: only 15 and 17 are set up" >&2; exit 2;;
esac

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# in_root CMD...: CMD as postgres inside the Debian 13 root. The mounts are made in a new mount
# namespace (private propagation: nothing shows outside, and nothing is left behind when its last
# process, the postmaster, exits): /proc and /dev (shared memory is in /dev/shm), DIR at the same
# path, and the root's passwd and group with its postgres user given this machine's uid and gid.
in_root() {
  local root=$pg_root
  mkdir -p "$root$dir"
  unshare -m --propagation private sh -ec '
    root=$1 dir=$2; shift 2
    mount --rbind /proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --bind "$dir" "$root$dir"
    mount --bind "$dir/root-passwd" "$root/etc/passwd"
    mount --bind "$dir/root-group" "$root/etc/group"
    exec chroot "$root" runuser -u postgres -- "$@"' sh "$root" "$dir" "$@"
}

# The root's account files, with postgres renumbered to this machine's postgres user.
write_root_accounts() {
  local uid gid
  uid=$(id -u postgres); gid=$(id -g postgres)
  awk -F: -v OFS=: -v u="$uid" -v g="$gid" '$1 == "postgres" { $3 = u; $4 = g } { print }' \
    "$pg_root/etc/passwd" >"$dir/root-passwd"
  awk -F: -v OFS=: -v g="$gid" '$1 == "postgres" { $3 = g } { print }' "$pg_root/etc/group" >"$dir/root-group"
  chmod 0644 "$dir/root-passwd" "$dir/root-group"
}

# server BINARY ARGS...: one of the server's own programs (initdb, pg_ctl) as the cluster's owner.
server() {
  local prog=$1; shift
  if [ "$PG_MAJOR" = 17 ]; then in_root "$PGBIN/$prog" "$@"; else as_owner "$PGBIN/$prog" "$@"; fi
}

# Client programs of the root, run from this machine with the root's own dynamic loader and
# libraries (they need Debian 13's libc), so that their file arguments are this machine's paths.
write_client_wrappers() {
  local bin=$dir/bin prog
  mkdir -p "$bin"
  for prog in psql pg_dump pg_restore pgbench pg_isready createdb dropdb createuser dropuser vacuumdb reindexdb clusterdb; do
    [ -x "$pg_root$PGBIN/$prog" ] || { echo "pg-cluster.sh: $prog is missing from $pg_root$PGBIN" >&2; exit 1; }
    cat >"$bin/$prog" <<WRAP
#!/bin/sh
exec "$pg_root/lib64/ld-linux-x86-64.so.2" --library-path "$pg_root/usr/lib/x86_64-linux-gnu" "$pg_root$PGBIN/$prog" "\$@"
WRAP
    chmod 0755 "$bin/$prog"
  done
  client_bin=$bin
}

# The mount point made in the root for DIR and its parents, each empty once the server (the last
# process of its namespace) is gone; a directory of the root's own, one level under its /, is kept.
forget_mount_point() {
  [ "$PG_MAJOR" = 17 ] || return 0
  local d=$dir
  while [ "$(dirname "$d")" != / ] && rmdir "$pg_root$d" 2>/dev/null; do d=$(dirname "$d"); done
}

free_port() {
  python3 - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

case "$cmd" in
start)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  chmod 0755 "$dir"
  if [ "$PG_MAJOR" = 17 ]; then write_root_accounts; write_client_wrappers; fi
  port=$(free_port)
  server initdb -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  # A self-signed certificate so the upstream TLS leg can be tested.
  as_owner openssl req -new -x509 -days 2 -nodes -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$dir/data/server.key" -out "$dir/data/server.crt" >/dev/null 2>&1
  chmod 0600 "$dir/data/server.key"
  cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
# Room for two tests of hundreds of sessions side by side (ctest -j2), plus backends still exiting.
max_connections = 1000
shared_buffers = 256MB
# Two-phase commit through predrop is tested (PREPARE TRANSACTION, COMMIT PREPARED elsewhere).
max_prepared_transactions = 20
fsync = off
synchronous_commit = off
full_page_writes = off
ssl = on
password_encryption = 'scram-sha-256'
log_min_messages = warning
CONF
  cat >"$dir/data/pg_hba.conf" <<HBA
local all all trust
host all scram_user 127.0.0.1/32 scram-sha-256
host all md5_user   127.0.0.1/32 md5
host all all 127.0.0.1/32 trust
host all all ::1/128 trust
HBA
  server pg_ctl -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
    || { tail -n 20 "$dir/server.log" >&2; exit 1; }
  {
    echo "PGHOST=127.0.0.1"
    echo "PGPORT=$port"
    echo "PGUSER=postgres"
    echo "PGDATABASE=postgres"
    echo "PG_CLUSTER_DIR=$dir"
    echo "PG_SERVER_CERT=$dir/data/server.crt"
    echo "PG_MAJOR=$PG_MAJOR"
    echo "PG_CLIENT_BIN=$client_bin"
    [ -z "${pg_root:-}" ] || echo "PG_DEBIAN_ROOT=$pg_root"
  } | tee "$dir/env"
  ;;
stop)
  if [ -f "$dir/data/postmaster.pid" ]; then
    server pg_ctl -D "$dir/data" -m fast -w -t 60 stop >/dev/null || true
  fi
  forget_mount_point
  ;;
ctl)
  rc=0
  server pg_ctl -D "$dir/data" "$@" || rc=$?
  [ -f "$dir/data/postmaster.pid" ] || forget_mount_point
  exit $rc
  ;;
*) echo "usage: $0 start|stop|ctl DIR" >&2; exit 2;;
esac
