# Shell helpers for the real-client tests: source it from bash.
#
#   . "$PREDROP_SOURCE_DIR/tests/support/test-lib.sh"
#   tl_init psql                      # work dir, cleanup trap; fails without a cluster
#   tl_start_predrop [extra args]     # sets PREDROP_PORT / PREDROP_PID / PREDROP_LOG
#   tl_recreate_db cl_psql            # fresh database, created directly
#   ... run the same thing with -p "$PGPORT" and -p "$PREDROP_PORT" into two files ...
#   tl_compare "what" direct.out proxy.out
#   tl_finish                         # exit 1 if any check failed
#
# The cluster is the one scripts/test.sh started: PGHOST, PGPORT, PGUSER, PGDATABASE.
# PREDROP_TEST_WORKDIR (set by scripts/test.sh) is where work dirs go; /tmp otherwise.

TL_SUPPORT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TL_FAILURES=0
TL_PIDS=()
TL_LOGS=()

tl_init() {
  TL_NAME=${1:?test name}
  if [ -z "${PGHOST:-}" ] || [ -z "${PGPORT:-}" ]; then
    echo "FAIL: PGHOST/PGPORT unset (run through scripts/test.sh, or source the env file scripts/pg-cluster.sh start writes)"
    exit 1
  fi
  export PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-postgres}
  export PGCONNECT_TIMEOUT=${PGCONNECT_TIMEOUT:-10}
  unset PGPASSWORD PGSSLMODE PGSERVICE PGOPTIONS
  export PSQLRC=/dev/null
  local base=${PREDROP_TEST_WORKDIR:-/tmp}
  TL_WORK=$(mktemp -d "$base/clients-$TL_NAME.XXXXXX")
  chmod 0755 "$TL_WORK"
  trap tl_cleanup EXIT
  echo "# $TL_NAME: work dir $TL_WORK, cluster $PGHOST:$PGPORT, predrop ${PREDROP_HARNESS_RELAY:+(python relay) }${PREDROP_BIN:-}"
}

tl_cleanup() {
  local rc=$?
  local pid
  for pid in "${TL_PIDS[@]}"; do
    "$TL_SUPPORT/stop-predrop.sh" "$pid" 10 || { echo "FAIL: predrop $pid did not stop on SIGTERM"; rc=1; }
  done
  if [ "$rc" -ne 0 ]; then
    local log
    for log in "${TL_LOGS[@]}"; do
      echo "----- tail of $log -----"; tail -n 40 "$log"; echo "-----"
    done
  fi
  exit "$rc"
}

# tl_start_predrop [extra predrop args...]: a fresh instance for this test.
tl_start_predrop() {
  local out
  out=$(PREDROP_OWNER_PID=$$ "$TL_SUPPORT/start-predrop.sh" "$TL_WORK" "$@") || { echo "FAIL: predrop did not start"; exit 1; }
  eval "$out"
  TL_PIDS+=("$PREDROP_PID")
  TL_LOGS+=("$PREDROP_LOG")
  export PREDROP_PORT PREDROP_PID PREDROP_LOG
}

tl_stop_predrop() {
  local pid=${1:-$PREDROP_PID} keep=() p
  "$TL_SUPPORT/stop-predrop.sh" "$pid" 10 || tl_fail "predrop $pid did not stop on SIGTERM within 10 s"
  for p in "${TL_PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
  TL_PIDS=("${keep[@]}")
}

tl_predrop_alive() { kill -0 "${1:-$PREDROP_PID}" 2>/dev/null; }

# psql as the superuser, directly, for setup: tl_admin "SQL"
tl_admin() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -c "$1" >/dev/null; }

tl_recreate_db() {
  local db=${1:?database}
  tl_admin "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)"
  tl_admin "CREATE DATABASE \"$db\" TEMPLATE template0"
}

tl_drop_db() { tl_admin "DROP DATABASE IF EXISTS \"$1\" WITH (FORCE)" || true; }

# Normalise what legitimately differs between a direct and a proxied run: backend PIDs, cancel keys,
# ports in connection errors, timings. stdin -> stdout.
tl_normalize() {
  sed -E \
    -e 's/(server process with PID|process|PID|pid) [0-9]+/\1 <pid>/g' \
    -e 's/(port|PORT) [0-9]+/\1 <port>/g' \
    -e 's/at port "[0-9]+"/at port "<port>"/g' \
    -e "s/:${PGPORT}\b/:<port>/g" \
    -e "s/:${PREDROP_PORT:-PREDROP_PORT_UNSET}\b/:<port>/g" \
    -e 's/[Tt]ime: [0-9.]+ ms.*/Time: <t>/' \
    -e 's/[0-9]+\.[0-9]+ s\b/<t> s/g' \
    -e 's/(latency average|initial connection time|tps) = [0-9.]+/\1 = <n>/g'
}

# tl_compare LABEL DIRECT_FILE PROXY_FILE: normalised diff; records a failure, does not exit.
tl_compare() {
  local label=$1
  tl_normalize <"$2" >"$TL_WORK/cmp.a"
  tl_normalize <"$3" >"$TL_WORK/cmp.b"
  if diff -u --label "direct: $label" --label "predrop: $label" "$TL_WORK/cmp.a" "$TL_WORK/cmp.b" >"$TL_WORK/diff.tmp"; then
    echo "ok: $label ($(wc -l <"$TL_WORK/cmp.a") lines identical)"
  else
    echo "FAIL: $label differs direct vs through predrop:"
    head -n 80 "$TL_WORK/diff.tmp"
    TL_FAILURES=$((TL_FAILURES + 1))
  fi
}

# tl_compare_bytes LABEL FILE_A FILE_B: byte-identical files (no normalisation).
tl_compare_bytes() {
  local label=$1 a=$2 b=$3
  if cmp -s "$a" "$b"; then
    echo "ok: $label ($(stat -c %s "$a") bytes identical)"
  else
    echo "FAIL: $label: files differ ($(stat -c %s "$a") vs $(stat -c %s "$b") bytes): $(cmp "$a" "$b" 2>&1 | head -1)"
    TL_FAILURES=$((TL_FAILURES + 1))
  fi
}

# tl_make_pki DIR "CA CN" [EXTRA-COMMANDS]: a throwaway CA (DIR/ca.crt, ca.key) and a server
# certificate it signed for localhost (DIR/server.crt, server.key; SAN DNS:localhost, IP:127.0.0.1),
# then EXTRA-COMMANDS (openssl lines of the caller's own) run in DIR; keys end up mode 0600.
# Stops the test with the openssl output when any of it fails.
tl_make_pki() {
  local dir=$1 ca_cn=$2 extra=${3:-}
  mkdir -p "$dir"
  (
    cd "$dir"
    openssl req -x509 -new -nodes -newkey rsa:2048 -days 2 -subj "/CN=$ca_cn" -keyout ca.key -out ca.crt
    openssl req -new -nodes -newkey rsa:2048 -subj "/CN=localhost" -keyout server.key -out server.csr
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt
    eval "$extra"
    chmod 0600 ./*.key
  ) >"$dir/openssl.log" 2>&1 || { cat "$dir/openssl.log"; tl_fail "openssl could not make the test PKI"; tl_finish; }
}

# tl_config NAME YAML-BODY: writes $TL_WORK/NAME.yaml and prints its path.
tl_config() {
  printf '%s\n' "$2" >"$TL_WORK/$1.yaml"
  echo "$TL_WORK/$1.yaml"
}

tl_fail() { echo "FAIL: $*"; TL_FAILURES=$((TL_FAILURES + 1)); }
tl_ok() { echo "ok: $*"; }

# tl_expect LABEL "expected" "actual"
tl_expect() {
  if [ "$2" = "$3" ]; then tl_ok "$1"; else tl_fail "$1: expected [$2], got [$3]"; fi
}

tl_finish() {
  if [ "$TL_FAILURES" -ne 0 ]; then
    echo "$TL_NAME: $TL_FAILURES check(s) FAILED"
    exit 1
  fi
  echo "$TL_NAME: all checks passed"
  exit 0
}
