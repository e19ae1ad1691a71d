#!/usr/bin/env bash
# Start/stop a pgbouncer 1.18 in session mode, trust, big limits (max_client_conn 3000, pool 300).
#   pgbouncer.sh start WORKDIR UPSTREAM_PORT   -> prints PGB_PORT=, PGB_PID=, PGB_LOG=
#   pgbouncer.sh stop PID
# As root it runs as the postgres OS user (runuser), with its fd limit raised to 20000 inside
# (runuser resets the soft limit).
set -euo pipefail
cmd=${1:?start|stop}

case "$cmd" in
start)
  work=${2:?workdir}; upstream_port=${3:?upstream port}
  mkdir -p "$work"
  dir=$(mktemp -d "$work/pgbouncer.XXXXXX")
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$upstream_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = session
max_client_conn = 3000
default_pool_size = 300
server_reset_query = DISCARD ALL
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
  echo '"postgres" ""' >"$dir/userlist.txt"
  chmod 0755 "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres: "$dir"
    runuser -u postgres -- bash -c "ulimit -n 20000 && exec pgbouncer -d -q '$dir/pgbouncer.ini'"
  else
    bash -c "ulimit -n 20000 2>/dev/null || ulimit -n \$(ulimit -Hn); exec pgbouncer -d -q '$dir/pgbouncer.ini'"
  fi
  for _ in $(seq 1 200); do
    if [ -s "$dir/pgbouncer.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "PGB_PORT=$port"
      echo "PGB_PID=$(cat "$dir/pgbouncer.pid")"
      echo "PGB_LOG=$dir/pgbouncer.log"
      exit 0
    fi
    sleep 0.05
  done
  echo "pgbouncer did not start; log:" >&2
  cat "$dir/pgbouncer.log" >&2 || true
  exit 1
  ;;
stop)
  pid=${2:?pid}
  kill -TERM "$pid" 2>/dev/null || exit 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  ;;
*) echo "usage: $0 start WORKDIR UPSTREAM_PORT | stop PID" >&2; exit 2;;
esac
