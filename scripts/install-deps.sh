#!/usr/bin/env bash
# Installs the Debian 12 packages a command needs, only those that are missing.
#   install-deps.sh run     `make build` / `make run`: PKGS
#   install-deps.sh test    `make test`: PKGS and TEST_PKGS, and node/npm
#   install-deps.sh bench   `make bench`: the same as test (it builds the test targets, e.g.
#                           rename_quality, and runs pgbouncer, pgbench and the psycopg2 soak)
#   install-deps.sh deb     `make deb`: PKGS and DEB_PKGS
# Debian's packaged cluster is not used: tests and `make run` start their own (scripts/pg-cluster.sh).
set -euo pipefail
what=${1:-test}

# Building and running predrop: the toolchain, the libraries it links, curl for libpg_query 17's
# source (scripts/build-pg-query.sh: Debian 12's libpg-query-dev has PostgreSQL 15's grammar), and
# what scripts/run.sh and scripts/pg-cluster.sh use for the throwaway cluster (PostgreSQL 15 server
# and client, openssl for its certificate, python3 for a free port). deploy/Dockerfile's build stage
# installs a subset of this.
PKGS=(
  build-essential cmake ninja-build ccache pkg-config curl ca-certificates
  libboost1.81-dev libssl-dev libpq-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  postgresql-15 postgresql-client-15 openssl python3
)
# Only the tests and the bench: gtest (tests/CMakeLists.txt), the real clients (psycopg2 with
# SQLAlchemy and pandas, pgjdbc; node-postgres comes from npm), pgbouncer, clang for the fuzz phase,
# promtool and PyYAML for the deployment checks, systemd-analyze for the unit, Chromium for the
# HTML report's screenshot, man for systemd-analyze verify's check of the package unit's
# Documentation=man:predrop(1), pgrep (procps) and column (bsdextrautils), debootstrap for the Debian 13
# root PostgreSQL 17 runs from (scripts/debian-root.sh).
TEST_PKGS=(
  libgtest-dev libgmock-dev
  pgbouncer
  python3-psycopg2 python3-sqlalchemy python3-pandas python3-yaml
  openjdk-17-jdk-headless libpostgresql-jdbc-java
  clang libclang-rt-14-dev
  prometheus chromium systemd man-db procps bsdextrautils debootstrap
)
# Only the bench: perf stat counts the proxies' system calls and context switches per transaction;
# liburing-dev builds the io_uring floor of tests/bench/relay_floor.
BENCH_PKGS=(linux-perf liburing-dev)
# The Debian package (scripts/build-deb.sh): dpkg-deb and dpkg-shlibdeps, help2man for the man
# page. The tests build and install it, so test and bench have them too.
DEB_PKGS=(dpkg-dev help2man)

case "$what" in
  run) wanted=("${PKGS[@]}") ;;
  test) wanted=("${PKGS[@]}" "${TEST_PKGS[@]}" "${DEB_PKGS[@]}") ;;
  bench) wanted=("${PKGS[@]}" "${TEST_PKGS[@]}" "${DEB_PKGS[@]}" "${BENCH_PKGS[@]}") ;;
  deb) wanted=("${PKGS[@]}" "${DEB_PKGS[@]}") ;;
  *) echo "usage: $0 run|test|bench|deb" >&2; exit 2 ;;
esac

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update_once() { [ "$updated" = 1 ] || { $SUDO apt-get update -qq; updated=1; }; }
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  apt_update_once
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Any node/npm on PATH will do (nvm, NodeSource); Debian's only when there is none.
if { [ "$what" = test ] || [ "$what" = bench ]; } && ! command -v npm >/dev/null; then
  echo "install-deps: node/npm missing, installing nodejs"
  apt_update_once
  $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
