#!/usr/bin/env bash
# test-services.sh CMD...: start throwaway MariaDB and etcd servers (when they
# are installed), export their addresses to CMD, run CMD, stop the servers.
#
# Tests read:
#   CHANGEFLOW_TEST_MYSQL_DSN   DSN of a MariaDB user allowed to CREATE DATABASE
#   CHANGEFLOW_TEST_ETCD        etcd client endpoint (http://127.0.0.1:PORT)
# A test that needs one and finds it unset skips with a loud one-line reason,
# unless CHANGEFLOW_TEST_REQUIRE_SERVICES=1 (set by .ci/run), where it fails.
#
# Ports are picked free at start so a developer's own servers and a second
# run of this script do not collide.
set -euo pipefail

work=$(mktemp -d "${TMPDIR:-/tmp}/changeflow-test.XXXXXX")
pids=()
cleanup() {
  if [ -n "${mysock:-}" ] && [ -S "$mysock" ]; then
    mariadb-admin --no-defaults --socket="$mysock" -uroot shutdown >/dev/null 2>&1 || true
  fi
  for p in "${pids[@]}"; do kill "$p" >/dev/null 2>&1 || true; done
  for p in "${pids[@]}"; do wait "$p" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

if command -v mariadbd >/dev/null 2>&1 && command -v mariadb-install-db >/dev/null 2>&1; then
  myport=$(free_port)
  mysock="$work/mysqld.sock"
  mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$work/mysql" \
    --auth-root-authentication-method=normal --skip-test-db >"$work/mysql-install.log" 2>&1
  mariadbd --no-defaults --user="$(id -un)" --datadir="$work/mysql" --socket="$mysock" \
    --port="$myport" --bind-address=127.0.0.1 --pid-file="$work/mysqld.pid" \
    --log-error="$work/mysql-error.log" --skip-name-resolve \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
    --default-time-zone=+00:00 --innodb-buffer-pool-size=128M \
    --innodb-flush-log-at-trx-commit=2 --max-connections=500 >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 1 120); do
    mariadb-admin --no-defaults --socket="$mysock" -uroot ping >/dev/null 2>&1 && break
    sleep 0.25
  done
  mariadb --no-defaults --socket="$mysock" -uroot -e \
    "CREATE USER 'changeflow'@'%' IDENTIFIED BY 'changeflow'; GRANT ALL ON *.* TO 'changeflow'@'%' WITH GRANT OPTION;"
  export CHANGEFLOW_TEST_MYSQL_DSN="changeflow:changeflow@tcp(127.0.0.1:$myport)/"
  echo "test-services: MariaDB $(mariadbd --version | awk '{print $3}') on 127.0.0.1:$myport" >&2
else
  echo "test-services: mariadbd not installed — MariaDB tests will SKIP (apt-get install -y mariadb-server)" >&2
fi

if command -v etcd >/dev/null 2>&1; then
  cport=$(free_port); pport=$(free_port)
  etcd --name t --data-dir "$work/etcd" \
    --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
    --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "t=http://127.0.0.1:$pport" --initial-cluster-state new >"$work/etcd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 80); do
    if command -v etcdctl >/dev/null 2>&1; then
      ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$cport" endpoint health >/dev/null 2>&1 && break
    else
      python3 -c "import socket;socket.create_connection(('127.0.0.1',$cport),0.2)" 2>/dev/null && break
    fi
    sleep 0.25
  done
  export CHANGEFLOW_TEST_ETCD="http://127.0.0.1:$cport"
  echo "test-services: etcd on 127.0.0.1:$cport" >&2
else
  echo "test-services: etcd not installed — etcd config-source tests will SKIP (apt-get install -y etcd-server)" >&2
fi

"$@"
