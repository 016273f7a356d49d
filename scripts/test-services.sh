#!/usr/bin/env bash
# test-services.sh CMD...: start throwaway MariaDB and etcd servers (when they
# are installed), export their addresses to CMD, run CMD, stop the servers.
#
# Tests read:
#   CHANGEFLOW_TEST_MYSQL_DSN   DSN of a MariaDB user allowed to CREATE DATABASE
#   CHANGEFLOW_TEST_ETCD        etcd client endpoint (http://127.0.0.1:PORT)
#   CHANGEFLOW_TEST_GALERA_*    a 3-node MariaDB Galera cluster and an HAProxy
#                               in front of it (scripts/test-galera.sh), when
#                               Debian's galera-4 is installed; set
#                               CHANGEFLOW_TEST_GALERA=0 to not start it (the
#                               Galera tests then skip, even in CI mode)
# A test that needs one and finds it unset skips with a loud one-line reason,
# unless CHANGEFLOW_TEST_REQUIRE_SERVICES=1 (set by .ci/run), where it fails.
#
# Ports are picked free at start so a developer's own servers and a second
# run of this script do not collide.
set -euo pipefail

work=$(mktemp -d "${TMPDIR:-/tmp}/changeflow-test.XXXXXX")
pids=()

# stop_pidfile FILE: end the process FILE names if it still runs — and is
# ours: its command line names this run's work directory (a pid file left
# by a killed node may name a pid the system has since given to someone
# else) — and wait until it is gone: TERM, then KILL after 30 s. The
# cleanup must not return while a process of this run still holds a port
# or a data directory: a run started right after this one would meet it.
stop_pidfile() {
  local pid
  [ -s "$1" ] || return 0
  pid=$(cat "$1" 2>/dev/null) || return 0
  case $pid in '' | *[!0-9]*) return 0 ;; esac
  ours() { tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$work/"; }
  ours || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do
    ours || return 0
    sleep 0.25
  done
  kill -9 "$pid" 2>/dev/null || true
}

cleanup() {
  # Only a cluster this run started (not one named by an inherited
  # CHANGEFLOW_TEST_GALERA_DIR).
  if [ -n "${galera_pid:-}" ]; then
    # Still starting (interrupted before the wait below): stop the
    # starter first, so it starts nothing more.
    if [ -n "${galera_starting:-}" ]; then
      kill "$galera_pid" >/dev/null 2>&1 || true
      wait "$galera_pid" >/dev/null 2>&1 || true
    fi
    local g="$work/galera"
    # Bounded: a node restarted by a test and still joining took its
    # shutdown request and then never finished (seen: 12 minutes).
    for sock in "$g/init.sock" "$g/node1/mysqld.sock" "$g/node2/mysqld.sock" "$g/node3/mysqld.sock"; do
      [ -S "$sock" ] && timeout 40 mariadb-admin --no-defaults --socket="$sock" -uroot \
        --shutdown-timeout=30 shutdown >/dev/null 2>&1 || true
    done
    # A node that did not stop, or that a test killed and restarted and
    # has no socket yet (still recovering or joining): its pid file still
    # names it.
    stop_pidfile "$g/init.pid"
    for n in 1 2 3; do stop_pidfile "$g/node$n/mysqld.pid"; done
    stop_pidfile "$g/haproxy.pid"
    for n in 1 2 3; do stop_pidfile "$g/node$n/clustercheck.pid"; done
  fi
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

# The Galera cluster takes the longest to come up (10–25 s on a loaded
# machine), so it starts first, in the background, and is waited for last.
galera_pid=""
if [ -n "${CHANGEFLOW_TEST_GALERA_DSNS:-}" ]; then
  echo "test-services: using the Galera cluster already named by CHANGEFLOW_TEST_GALERA_DSNS" >&2
elif [ "${CHANGEFLOW_TEST_GALERA:-1}" = 0 ]; then
  echo "test-services: CHANGEFLOW_TEST_GALERA=0 — Galera tests will SKIP" >&2
elif command -v mariadbd >/dev/null 2>&1 && { [ -e /usr/lib/galera/libgalera_smm.so ] || [ -e /usr/lib/libgalera_smm.so ]; }; then
  "$(dirname "$0")/test-galera.sh" "$work/galera" >"$work/galera.env" 2>"$work/galera.err" &
  galera_pid=$!
  galera_starting=1
else
  echo "test-services: galera-4 not installed — Galera tests will SKIP (apt-get install -y galera-4 haproxy)" >&2
fi

if command -v mariadbd >/dev/null 2>&1 && command -v mariadb-install-db >/dev/null 2>&1; then
  myport=$(free_port)
  mysock="$work/mysqld.sock"
  # A tmpdir of its own: a starting mariadbd deletes every "#sql*" file in
  # its tmpdir, so servers sharing /tmp (the Galera nodes starting beside
  # this one, another run's servers) would delete each other's temporary
  # tables (scripts/test-galera.sh).
  mkdir -p "$work/mysql-tmp"
  mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$work/mysql" --tmpdir="$work/mysql-tmp" \
    --auth-root-authentication-method=normal --skip-test-db >"$work/mysql-install.log" 2>&1 ||
    { head -n 30 "$work/mysql-install.log" >&2; echo "test-services: mariadb-install-db failed (above)" >&2; exit 1; }
  mariadbd --no-defaults --user="$(id -un)" --datadir="$work/mysql" --socket="$mysock" --tmpdir="$work/mysql-tmp" \
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

if [ -n "$galera_pid" ]; then
  if wait "$galera_pid"; then
    galera_starting=""
    # shellcheck disable=SC1091
    . "$work/galera.env"
    echo "test-services: Galera cluster of 3 on $CHANGEFLOW_TEST_GALERA_DSNS${CHANGEFLOW_TEST_GALERA_PROXY:+, HAProxy on $CHANGEFLOW_TEST_GALERA_PROXY}" >&2
  else
    rc=$?
    galera_starting=""
    # test-galera.sh reports its own failures on stderr (the failed
    # command, its logs, the sockets on its ports); an empty report means
    # it was killed before it could say anything — the status says how.
    cat "$work/galera.err" >&2
    [ -s "$work/galera.err" ] || echo "test-services: test-galera.sh wrote nothing on stderr" >&2
    echo "test-services: the Galera cluster did not start (test-galera.sh exited $rc$([ "$rc" -gt 128 ] && echo ", signal $((rc - 128))")) — Galera tests will SKIP (or fail in CI mode)" >&2
  fi
fi

"$@"
