#!/usr/bin/env bash
# TLS policy of both legs: TLS 1.0/1.1 refused by default, min/max versions, TLS 1.2 ciphers and TLS 1.3
# suites honoured on the client leg (openssl s_client, psql) and on the upstream leg (the server's own
# pg_stat_ssl); verify-full clients refuse a self-signed or wrong-host predrop certificate; upstream
# verify-full refuses a certificate for another host with 08006 and accepts the right one; SCRAM over
# every combination of legs; bad TLS settings stop predrop at start with a message naming the key.
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init tls_policy
: "${PG_SERVER_CERT:?PG_SERVER_CERT unset: certificate of the cluster (pg-cluster.sh env)}"
here=$(cd "$(dirname "$0")" && pwd)
pki=$TL_WORK/pki
tl_make_pki "$pki" "predrop security CA" 'openssl req -x509 -new -nodes -newkey rsa:2048 -days 2 -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout self.key -out self.crt'
system_roots=/etc/ssl/certs/ca-certificates.crt
client_tls="tls:
  cert_file: $pki/server.crt
  key_file: $pki/server.key"

# handshake PORT s_client-args...: "TLSv1.x CIPHER" on success, "refused: reason" otherwise.
handshake() {
  local port=$1; shift
  local out
  out=$(echo | timeout 15 openssl s_client -starttls postgres -connect "127.0.0.1:$port" "$@" 2>&1) || true
  # "New, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384"; a failed handshake says "New, (NONE), Cipher is (NONE)".
  local line
  line=$(sed -n 's/^New, \(TLSv[0-9.]*\), Cipher is \(.*\)$/\1 \2/p' <<<"$out" | head -n 1)
  if [ -n "$line" ]; then
    echo "$line"
  else
    echo "refused: $(grep -oE 'alert [a-z ]+|no protocols available|no ciphers available|wrong version number|unsupported protocol|handshake failure|unexpected eof' <<<"$out" | head -n 1)"
  fi
}
expect_refused() {  # LABEL RESULT
  case "$2" in
    refused:*) tl_ok "$1 ($2)";;
    *) tl_fail "$1: the handshake succeeded: $2";;
  esac
}
q() {  # q PORT CONNINFO-EXTRA SQL...: psql output, errors folded in
  local port=$1 extra=$2; shift 2
  local args=() s
  for s in "$@"; do args+=(-c "$s"); done
  psql -X -At "host=$PGHOST port=$port dbname=postgres user=postgres $extra" "${args[@]}" 2>&1 || echo "exit status $?"
}
client_ssl="SELECT 'client ' || version || ' ' || cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
conninfo_ssl() { q "$@" '\conninfo' | sed -n 's/^SSL connection (protocol: \([^,]*\), cipher: \([^,]*\),.*/\1 \2/p'; }

# ---- client leg, defaults: TLS 1.2 and 1.3 only ----------------------------------------------------
tl_start_predrop --config "$(tl_config default "$client_tls")"
P=$PREDROP_PORT
expect_refused "default: a TLS 1.1 client is refused" "$(handshake "$P" -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0')"
expect_refused "default: a TLS 1.0 client is refused" "$(handshake "$P" -tls1 -cipher 'DEFAULT:@SECLEVEL=0')"
r=$(handshake "$P" -tls1_2); [[ $r == TLSv1.2* ]] && tl_ok "default: TLS 1.2 accepted ($r)" || tl_fail "default: TLS 1.2: $r"
r=$(handshake "$P" -tls1_3); [[ $r == TLSv1.3* ]] && tl_ok "default: TLS 1.3 accepted ($r)" || tl_fail "default: TLS 1.3: $r"
out=$(q "$P" "sslmode=require ssl_min_protocol_version=TLSv1 ssl_max_protocol_version=TLSv1.1" "SELECT 'must not connect'")
if grep -q 'must not connect' <<<"$out"; then tl_fail "libpq with ssl_max_protocol_version=TLSv1.1 connected"; else
  tl_ok "libpq with ssl_max_protocol_version=TLSv1.1 refused ($(grep -oE 'SSL error: .*|error: .*' <<<"$out" | head -n 1 | cut -c1-120))"; fi
tl_expect "default: psql gets TLS 1.3" "TLSv1.3" "$(conninfo_ssl "$P" "sslmode=require" | cut -d' ' -f1)"

# verify-full against predrop: the right CA and host work; another root, a wrong host are refused.
tl_expect "verify-full with the right CA and host" "ok" \
  "$(q "$P" "host=localhost sslmode=verify-full sslrootcert=$pki/ca.crt" "SELECT 'ok'")"
out=$(q "$P" "host=localhost sslmode=verify-full sslrootcert=$system_roots" "SELECT 'must not connect'")
grep -q 'certificate verify failed' <<<"$out" && tl_ok "verify-full with the system roots refuses a private-CA certificate" ||
  tl_fail "verify-full with the system roots: $out"
out=$(q "$P" "host=127.0.0.2 hostaddr=127.0.0.1 sslmode=verify-full sslrootcert=$pki/ca.crt" "SELECT 'must not connect'")
grep -q 'does not match host name "127.0.0.2"' <<<"$out" && tl_ok "verify-full refuses the certificate for a wrong host" ||
  tl_fail "verify-full, wrong host: $out"
tl_stop_predrop

# A self-signed certificate on the client leg.
tl_start_predrop --config "$(tl_config selfsigned "tls:
  cert_file: $pki/self.crt
  key_file: $pki/self.key")"
P=$PREDROP_PORT
out=$(q "$P" "host=localhost sslmode=verify-full sslrootcert=$system_roots" "SELECT 'must not connect'")
grep -q 'certificate verify failed' <<<"$out" && tl_ok "verify-full refuses predrop's self-signed certificate ($(grep -oE 'certificate verify failed.*' <<<"$out" | head -n 1))" ||
  tl_fail "verify-full, self-signed: $out"
out=$(q "$P" "host=localhost sslmode=verify-ca sslrootcert=$pki/ca.crt" "SELECT 'must not connect'")
grep -q 'certificate verify failed' <<<"$out" && tl_ok "verify-ca with another CA refuses the self-signed certificate" ||
  tl_fail "verify-ca, self-signed: $out"
tl_expect "sslmode=require (no verification) still connects to the self-signed predrop" "ok" \
  "$(q "$P" "sslmode=require" "SELECT 'ok'")"
tl_stop_predrop

# ---- client leg: versions and ciphers configured ----------------------------------------------------
tl_start_predrop --config "$(tl_config min13 "$client_tls
  min_version: \"1.3\"")"
P=$PREDROP_PORT
expect_refused "tls.min_version 1.3: a TLS 1.2 client is refused" "$(handshake "$P" -tls1_2)"
r=$(handshake "$P" -tls1_3); [[ $r == TLSv1.3* ]] && tl_ok "tls.min_version 1.3: TLS 1.3 accepted" || tl_fail "min 1.3, TLS 1.3: $r"
out=$(q "$P" "sslmode=require ssl_max_protocol_version=TLSv1.2" "SELECT 'must not connect'")
grep -q 'must not connect' <<<"$out" && tl_fail "libpq limited to TLS 1.2 connected to min_version 1.3" ||
  tl_ok "libpq limited to TLS 1.2 refused by tls.min_version 1.3"
tl_stop_predrop

tl_start_predrop --config "$(tl_config ciphers12 "$client_tls
  max_version: \"1.2\"
  ciphers: ECDHE-RSA-AES256-GCM-SHA384")"
P=$PREDROP_PORT
expect_refused "tls.max_version 1.2: a TLS 1.3-only client is refused" "$(handshake "$P" -tls1_3)"
expect_refused "tls.ciphers: a client offering only another cipher is refused" \
  "$(handshake "$P" -tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256)"
tl_expect "tls.ciphers: the configured cipher is used (s_client)" "TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384" \
  "$(handshake "$P" -tls1_2 -cipher 'ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384')"
tl_expect "tls.ciphers: psql's session uses TLS 1.2 and the configured cipher" "TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384" \
  "$(conninfo_ssl "$P" "sslmode=require")"
tl_stop_predrop

tl_start_predrop --config "$(tl_config suites13 "$client_tls
  ciphersuites: TLS_CHACHA20_POLY1305_SHA256")"
P=$PREDROP_PORT
expect_refused "tls.ciphersuites: a client offering only another TLS 1.3 suite is refused" \
  "$(handshake "$P" -tls1_3 -ciphersuites TLS_AES_256_GCM_SHA384)"
tl_expect "tls.ciphersuites: psql's session uses the configured suite" "TLSv1.3 TLS_CHACHA20_POLY1305_SHA256" \
  "$(conninfo_ssl "$P" "sslmode=require")"
tl_stop_predrop

# ---- upstream leg -----------------------------------------------------------------------------------
server_view="SELECT 'server sees ' || version || ' ' || cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
upstream_sees() {  # LABEL EXPECTED YAML
  if tl_start_predrop --config "$(tl_config "up$RANDOM" "$3")"; then
    tl_expect "$1" "$2" "$(q "$PREDROP_PORT" "sslmode=disable" "$server_view")"
    tl_stop_predrop
  else
    tl_fail "$1: predrop did not start"
  fi
}
upstream_sees "upstream default: TLS 1.3" "server sees TLSv1.3 TLS_AES_256_GCM_SHA384" "upstream_tls:
  sslmode: require"
upstream_sees "upstream_tls.max_version 1.2 + ciphers" "server sees TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256" "upstream_tls:
  sslmode: require
  max_version: \"1.2\"
  ciphers: ECDHE-RSA-AES128-GCM-SHA256"
upstream_sees "upstream_tls.ciphersuites" "server sees TLSv1.3 TLS_CHACHA20_POLY1305_SHA256" "upstream_tls:
  sslmode: require
  ciphersuites: TLS_CHACHA20_POLY1305_SHA256"
upstream_sees "upstream verify-full, server_name localhost (the certificate's name)" \
  "server sees TLSv1.3 TLS_AES_256_GCM_SHA384" "upstream_tls:
  sslmode: verify-full
  root_cert: $PG_SERVER_CERT
  server_name: localhost"

# verify-full with a name the certificate does not carry: 08006 to the client, naming the host checked.
tl_start_predrop --config "$(tl_config upwrong "upstream_tls:
  sslmode: verify-full
  root_cert: $PG_SERVER_CERT
  server_name: db.wrong.example")"
got=$(python3 "$here/startup_error.py" "$PREDROP_PORT" postgres postgres)
echo "  raw startup: $got"
case "$got" in
  "error 08006: "*"db.wrong.example"*) tl_ok "upstream verify-full refuses a certificate for another host with 08006";;
  *) tl_fail "upstream verify-full, wrong host: $got";;
esac
out=$(q "$PREDROP_PORT" "sslmode=disable" "SELECT 'must not connect'")
grep -q 'must not connect' <<<"$out" && tl_fail "psql got a session through a wrong-host upstream" ||
  tl_ok "psql sees: $(grep -oE 'FATAL: .*' <<<"$out" | head -n 1)"
tl_predrop_alive || tl_fail "predrop died after refusing the upstream certificate"
tl_stop_predrop

# ---- SCRAM-SHA-256 over every combination of legs --------------------------------------------------
# channel_binding=require can only hold when the client's TLS session is the server's: never through
# predrop. It must be refused cleanly (libpq's own check), never half-authenticated.
scram_matrix() {  # LABEL CLIENT-SSLMODE YAML
  local label=$1 mode=$2 yaml=$3
  if [ -n "$yaml" ]; then tl_start_predrop --config "$(tl_config "scram$RANDOM" "$yaml")"; else tl_start_predrop; fi
  local P=$PREDROP_PORT
  tl_expect "$label: SCRAM, channel_binding=disable" "scram_user" \
    "$(PGPASSWORD=scram-secret q "$P" "user=scram_user sslmode=$mode channel_binding=disable" "SELECT current_user")"
  local out
  out=$(PGPASSWORD=wrong q "$P" "user=scram_user sslmode=$mode channel_binding=disable" "SELECT 1")
  grep -q 'password authentication failed for user "scram_user"' <<<"$out" && tl_ok "$label: SCRAM, wrong password refused" ||
    tl_fail "$label: SCRAM, wrong password: $out"
  out=$(PGPASSWORD=scram-secret q "$P" "user=scram_user sslmode=$mode channel_binding=require" "SELECT 'bound ' || current_user")
  if grep -q '^bound' <<<"$out"; then tl_fail "$label: channel_binding=require succeeded through a terminating proxy: $out"
  elif grep -qi 'channel binding' <<<"$out"; then tl_ok "$label: channel_binding=require refused ($(grep -oiE '(error|FATAL): .*channel binding.*' <<<"$out" | head -n 1 | cut -c1-110))"
  else tl_fail "$label: channel_binding=require: unexpected outcome: $out"; fi
  tl_expect "$label: md5" "md5_user" "$(PGPASSWORD=md5-secret q "$P" "user=md5_user sslmode=$mode" "SELECT current_user")"
  tl_stop_predrop
}
scram_matrix "plain/plain" disable ""
scram_matrix "TLS client/plain upstream" require "$client_tls"
scram_matrix "plain client/TLS upstream" disable "upstream_tls:
  sslmode: require"
scram_matrix "TLS/TLS" require "$client_tls
upstream_tls:
  sslmode: require"
# plaintext client, TLS upstream: predrop removes -PLUS from the offer, so libpq's default works.
tl_start_predrop --config "$(tl_config plusstrip "upstream_tls:
  sslmode: require")"
tl_expect "plain client/TLS upstream: SCRAM with libpq's default channel_binding=prefer" "scram_user" \
  "$(PGPASSWORD=scram-secret q "$PREDROP_PORT" "user=scram_user sslmode=disable" "SELECT current_user")"
tl_stop_predrop

# ---- bad TLS settings: refused at load or at start, naming the key ---------------------------------
bad_start() {  # LABEL EXPECTED-TEXT YAML
  local cfg out
  cfg=$(tl_config "bad$RANDOM" "$3")
  out=$(timeout 20 "$PREDROP_BIN" serve --listen 127.0.0.1:1 --upstream "$PGHOST:$PGPORT" --config "$cfg" 2>&1) && rc=0 || rc=$?
  if [ "$rc" -ne 0 ] && grep -qF "$2" <<<"$out"; then tl_ok "$1 (exit $rc: $(grep -F "$2" <<<"$out" | head -n 1 | cut -c1-150))"
  else tl_fail "$1: exit $rc: $out"; fi
}
bad_start "tls.ciphers nobody knows stops predrop" "tls.ciphers: OpenSSL accepts none of 'NO-SUCH-CIPHER'" "$client_tls
  ciphers: NO-SUCH-CIPHER"
bad_start "tls.ciphersuites nobody knows stops predrop" "tls.ciphersuites: OpenSSL does not accept" "$client_tls
  ciphersuites: TLS_NO_SUCH_SUITE"
bad_start "upstream_tls.ciphers nobody knows stops predrop" "upstream_tls.ciphers: OpenSSL accepts none of" "upstream_tls:
  sslmode: require
  ciphers: NO-SUCH-CIPHER"
bad_start "tls.min_version 1.1 is not a choice" "tls.min_version" "$client_tls
  min_version: \"1.1\""
bad_start "min_version above max_version" "upstream_tls.min_version (1.3) is above upstream_tls.max_version (1.2)" "upstream_tls:
  sslmode: require
  min_version: \"1.3\"
  max_version: \"1.2\""
tl_finish
