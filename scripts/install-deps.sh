#!/usr/bin/env bash
# Installs the Debian 12 packages predrop builds, runs and tests with. Only what is missing.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libboost1.81-dev libssl-dev libpq-dev libpg-query-dev libprotobuf-c-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev
  postgresql-15 postgresql-client-15 pgbouncer openssl
  python3-psycopg2 python3-sqlalchemy python3-pandas
  openjdk-17-jdk-headless libpostgresql-jdbc-java
  clang libclang-rt-14-dev
  prometheus chromium
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"

  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v npm >/dev/null || { echo "install-deps: node/npm missing, installing nodejs"; $SUDO apt-get install -y -qq nodejs npm >/dev/null; }
# Debian's packaged cluster is not used: tests and `make run` start their own.
