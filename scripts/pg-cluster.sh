#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL 15 cluster for tests and `make run`.
#   pg-cluster.sh start DIR   -> initdb into DIR, start on a free port, print KEY=VALUE lines (also in DIR/env)
#   pg-cluster.sh stop DIR    -> stop it (fast), leave DIR for inspection
# The cluster runs as a non-root OS user: the postgres user of Debian's package when invoked as root.
# It has SSL on with a self-signed certificate, trust for the OS superuser on 127.0.0.1,
# and scram/md5 rules for the test roles, so that auth and TLS tests can run against it.
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:?start|stop}; dir=${2:?cluster directory}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
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
  port=$(free_port)
  as_owner "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1
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
  as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
  {
    echo "PGHOST=127.0.0.1"
    echo "PGPORT=$port"
    echo "PGUSER=postgres"
    echo "PGDATABASE=postgres"
    echo "PG_CLUSTER_DIR=$dir"
    echo "PG_SERVER_CERT=$dir/data/server.crt"
  } | tee "$dir/env"
  ;;
stop)
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null || true
  fi
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2;;
esac
