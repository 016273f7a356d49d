#!/usr/bin/env bash
# test-galera.sh WORKDIR: start a throwaway 3-node MariaDB Galera cluster on
# loopback and print the variables tests read, as shell assignments, on
# stdout (scripts/test-services.sh sources them). Needs mariadbd and
# Debian's galera-4 (libgalera_smm.so).
#
#   CHANGEFLOW_TEST_GALERA_DSNS  three DSNs (comma-separated), one per node,
#                                of an account allowed to CREATE DATABASE
#   CHANGEFLOW_TEST_GALERA_DIR   WORKDIR; node N has WORKDIR/nodeN/start
#                                (restart after kill -9: recovers the
#                                position, rejoins by IST) and
#                                WORKDIR/nodeN/mysqld.pid
#   CHANGEFLOW_TEST_GALERA_PROXY host:port of an HAProxy in front of the
#                                three nodes (when haproxy is installed)
#
# A node that dies without saying goodbye stalls the others' commits until
# they evict it (evs.suspect_timeout, 5 s by default); the test cluster
# evicts after 2 s, the value docs/storage.md recommends for a LAN. The
# install timeout (agreeing on the new membership) stays long: with 2 s
# (half of an inactive timeout of 4 s) the two survivors of a kill on a
# loaded CI machine did not agree in time, fell to non-primary and stayed
# there ("install timer expired").
#
# Seeding: node 1 is initialised, stopped and copied cold to nodes 2 and 3,
# then node 1 bootstraps the cluster and the others join by IST — no SST
# method to configure, and a join takes about a second.
#
# Every port is below 32768, outside Linux's ephemeral range: while a node is
# down, a client's own outgoing socket could otherwise take its port and the
# restart would fail to bind. All ports are picked at once and distinct: they
# are bound seconds later, one by one, so a port checked free for node 3
# must not also be handed to node 1.
#
# Any failure prints the command that failed, every log this run wrote, the
# sockets on its ports and any other MariaDB, HAProxy or clustercheck
# process on the machine — most of what fails here (mariadb-install-db,
# haproxy -D) writes only to its own log, and the caller removes WORKDIR,
# so without that a failed start said nothing at all.
set -Eeuo pipefail

work=$1
mkdir -p "$work"
work=$(cd "$work" && pwd) # absolute: the node scripts and the build use it from elsewhere

sqlports=(); gports=(); iports=(); cports=(); pport=""

# report: what this run knows about itself, on stderr.
report() {
  local all f
  all="${sqlports[*]} ${gports[*]} ${iports[*]} ${cports[*]} $pport"
  echo "--- ports: SQL ${sqlports[*]:-?}, gcomm ${gports[*]:-?}, IST ${iports[*]:-?}, clustercheck ${cports[*]:-?}, proxy ${pport:-?}"
  echo "--- listening sockets on those ports (ss -tlnp)"
  if [ -n "${all// /}" ]; then
    ss -Htlnp 2>/dev/null | grep -E ":($(echo $all | tr ' ' '|'))[[:space:]]" || echo "(none)"
  fi
  echo "--- MariaDB, HAProxy and clustercheck processes not of this run"
  ps -eo pid,etimes,args 2>/dev/null | grep -E '[m]ariadbd|[h]aproxy|[c]lustercheck' | grep -vF -- "$work/" || echo "(none)"
  # mariadb-install-db's own reason comes first, its advice after it; a
  # successful install ("OK") is no news.
  if [ -s "$work/install.log" ] && ! grep -qx OK "$work/install.log"; then
    echo "--- install.log (first 30 lines)"
    head -n 30 "$work/install.log"
  fi
  for f in init.log node1/error.log node2/error.log node3/error.log \
    node1/clustercheck.log node2/clustercheck.log node3/clustercheck.log haproxy.log; do
    if [ -s "$work/$f" ]; then
      echo "--- $f (last 30 lines)"
      tail -n 30 "$work/$f"
    fi
  done
}

# fail MESSAGE: report and exit.
fail() {
  trap - ERR
  set +e
  { echo "test-galera: $1"; report; } >&2
  exit 1
}
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR
provider=""
for p in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so /usr/lib64/galera-4/libgalera_smm.so; do
  [ -e "$p" ] && { provider=$p; break; }
done
if [ -z "$provider" ]; then
  echo "test-galera: libgalera_smm.so not found (apt-get install -y galera-4)" >&2
  exit 2
fi

# low_ports N: N distinct ports in 20000–32000 that can be bound now. The
# probe binds without SO_REUSEADDR, so a port with a connection still in
# TIME_WAIT (a previous run's node) is not picked either.
low_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
n, picked = int(sys.argv[1]), []
while len(picked) < n:
    p = random.randint(20000, 32000)
    if p in picked:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    picked.append(p)
print(" ".join(map(str, picked)))
PY
}

user=$(id -un)
read -r -a ports <<<"$(low_ports 13)"
sqlports=("${ports[@]:0:3}"); gports=("${ports[@]:3:3}"); iports=("${ports[@]:6:3}")
cports=("${ports[@]:9:3}"); pport=${ports[12]}
gcomm="gcomm://127.0.0.1:${gports[0]},127.0.0.1:${gports[1]},127.0.0.1:${gports[2]}"

# Every server of this run, the install's bootstrap included, has a tmpdir
# of its own: a starting mariadbd deletes every "#sql*" file in its tmpdir
# (the leftovers of a crash, it assumes), so servers sharing /tmp delete
# each other's temporary tables. A mariadb-install-db racing another
# server's start failed that way ("ERROR: 1051 Unknown table
# 'mysql.tmp_user_sys'"; 3 of 20 installs run 4 at a time with /tmp, 0 of
# 20 with their own tmpdir) — most likely the cluster that "did not start"
# in CI with nothing on stderr, while test-services.sh started its single
# server beside it.
mkdir -p "$work/tmp" "$work/node1/tmp" "$work/node2/tmp" "$work/node3/tmp"

# Node 1's datadir with the test account, made by a plain (non-wsrep) run.
mariadb-install-db --no-defaults --user="$user" --datadir="$work/node1/data" --tmpdir="$work/tmp" \
  --auth-root-authentication-method=normal --skip-test-db >"$work/install.log" 2>&1
mariadbd --no-defaults --user="$user" --datadir="$work/node1/data" --socket="$work/init.sock" \
  --tmpdir="$work/tmp" --skip-networking --pid-file="$work/init.pid" --log-error="$work/init.log" >/dev/null 2>&1 &
initpid=$!
# up: wait (up to 2 minutes: a loaded machine) for the server of socket $1,
# process $2, to answer; a server that exited is a failure at once.
up() {
  for _ in $(seq 1 480); do
    mariadb-admin --no-defaults --socket="$1" -uroot ping >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || fail "the server of $1 exited while starting"
    sleep 0.25
  done
  fail "the server of $1 did not answer within 2 minutes"
}
up "$work/init.sock" "$initpid"
mariadb --no-defaults --socket="$work/init.sock" -uroot -e \
  "CREATE USER 'changeflow'@'%' IDENTIFIED BY 'changeflow'; GRANT ALL ON *.* TO 'changeflow'@'%';"
mariadb-admin --no-defaults --socket="$work/init.sock" -uroot shutdown
wait "$initpid" || true
for n in 2 3; do mkdir -p "$work/node$n"; cp -a "$work/node1/data" "$work/node$n/data"; done

for n in 1 2 3; do
  i=$((n - 1))
  d="$work/node$n"
  # start [--wsrep-new-cluster]: run the node in the background. After a
  # kill -9 it first recovers its last committed position, so it rejoins
  # by IST instead of asking for a full state transfer.
  cat >"$d/start" <<SH
#!/usr/bin/env bash
set -euo pipefail
cd "$d"
args=(--no-defaults --user=$user --datadir=$d/data --socket=$d/mysqld.sock --tmpdir=$d/tmp
  --port=${sqlports[$i]} --bind-address=127.0.0.1 --pid-file=$d/mysqld.pid
  --log-error=$d/error.log --skip-name-resolve
  --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci
  --default-time-zone=+00:00 --innodb-buffer-pool-size=48M
  --innodb-flush-log-at-trx-commit=2 --max-connections=300 --innodb-lock-wait-timeout=5
  --binlog-format=ROW --innodb-autoinc-lock-mode=2
  --wsrep-on=ON --wsrep-provider=$provider --wsrep-cluster-name=changeflow-test
  --wsrep-cluster-address=$gcomm --wsrep-node-address=127.0.0.1:${gports[$i]}
  "--wsrep-provider-options=base_host=127.0.0.1;base_port=${gports[$i]};ist.recv_addr=127.0.0.1:${iports[$i]};gcache.size=64M;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT10S;evs.install_timeout=PT8S;evs.inactive_check_period=PT0.5S;evs.keepalive_period=PT0.5S"
  --wsrep-sst-method=mysqldump --wsrep-sst-auth=changeflow:changeflow)
if grep -q '^seqno: *-1' data/grastate.dat 2>/dev/null; then
  # Killed, not shut down: the position is only in InnoDB's redo log.
  pos=\$(mariadbd "\${args[@]}" --wsrep-recover --skip-networking --log-error=$d/recover.log >/dev/null 2>&1; \
    sed -n 's/.*Recovered position: *\([^ ]*\).*/\1/p' $d/recover.log | tail -1)
  [ -n "\$pos" ] && args+=(--wsrep-start-position=\$pos)
fi
rm -f data/gvwstate.dat
nohup mariadbd "\${args[@]}" "\$@" >/dev/null 2>&1 &
SH
  chmod +x "$d/start"
  rm -f "$d/data/gvwstate.dat" "$d/data/grastate.dat"
done

synced() { # synced N: node N is Synced in a 3-node primary component
  local out
  out=$(mariadb --no-defaults --socket="$work/node$1/mysqld.sock" -uroot -N -e \
    "SELECT CONCAT((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='wsrep_cluster_size'),'/',(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='wsrep_local_state_comment'))" 2>/dev/null) || return 1
  [ "$out" = "3/Synced" ]
}

"$work/node1/start" --wsrep-new-cluster
for _ in $(seq 1 480); do # the start script is in the background: wait for its pid file
  [ -s "$work/node1/mysqld.pid" ] && break
  sleep 0.25
done
[ -s "$work/node1/mysqld.pid" ] || fail "node 1 wrote no pid file within 2 minutes"
up "$work/node1/mysqld.sock" "$(cat "$work/node1/mysqld.pid")"
"$work/node2/start"
"$work/node3/start"
# A liveness bound, not a latency one: the joiners' state transfer
# (mysqldump) on a loaded 2-core machine took over a minute, so wait up
# to three; on failure each node's own account of why goes to stderr,
# because the work directory is removed when the caller cleans up.
ok=""
for _ in $(seq 1 720); do
  if synced 1 && synced 2 && synced 3; then ok=1; break; fi
  sleep 0.25
done
[ -n "$ok" ] || fail "the cluster did not reach 3 Synced nodes within 3 minutes"

dsns=""
for i in 0 1 2; do dsns+="${dsns:+,}changeflow:changeflow@tcp(127.0.0.1:${sqlports[$i]})/"; done
echo "export CHANGEFLOW_TEST_GALERA_DSNS='$dsns'"
echo "export CHANGEFLOW_TEST_GALERA_DIR='$work'"

if command -v haproxy >/dev/null 2>&1; then
  # One `changeflow clustercheck` per node: HAProxy's httpchk asks it, and
  # it answers 200 only while its node is Synced in the primary component,
  # so a restarted node stays out of rotation until it has caught up (a
  # TCP check would let it in as soon as it accepts connections).
  (cd "$(dirname "$0")/.." && go build -o "$work/changeflow" ./cmd/changeflow)
  for i in 0 1 2; do
    n=$((i + 1))
    CHANGEFLOW_CLUSTERCHECK_DSN="changeflow:changeflow@tcp(127.0.0.1:${sqlports[$i]})/" \
      nohup "$work/changeflow" clustercheck --listen "127.0.0.1:${cports[$i]}" \
      >"$work/node$n/clustercheck.log" 2>&1 &
    echo $! >"$work/node$n/clustercheck.pid"
  done
  # The topology docs/storage.md describes: TCP mode, one node takes every
  # connection and the others are backups (single writer: no cross-node
  # write conflicts), a health check every 500 ms by the node's
  # clustercheck, a node out after two failures, existing sessions on a
  # dead node cut at once (on-marked-down) so clients reconnect to the next
  # node. When the preferred node is back (Synced, by its clustercheck) it
  # takes the new connections, and on-marked-up shutdown-backup-sessions
  # cuts the old ones on its stand-in: without that, pools would write on
  # both nodes at once — two writers. (A one-entry stick table on dst, the
  # other usual answer, did not keep the connections on the stand-in with
  # HAProxy 2.6: the restarted node took them back.)
  cat >"$work/haproxy.cfg" <<CFG
global
  maxconn 2000
defaults
  mode tcp
  retries 1
  option redispatch
  timeout connect 1s
  timeout client 60s
  timeout server 60s
listen galera
  bind 127.0.0.1:$pport
  option httpchk GET /
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
  server node1 127.0.0.1:${sqlports[0]} check port ${cports[0]} on-marked-up shutdown-backup-sessions
  server node2 127.0.0.1:${sqlports[1]} check port ${cports[1]} backup
  server node3 127.0.0.1:${sqlports[2]} check port ${cports[2]} backup
CFG
  haproxy -D -f "$work/haproxy.cfg" -p "$work/haproxy.pid" >"$work/haproxy.log" 2>&1
  echo "export CHANGEFLOW_TEST_GALERA_PROXY='127.0.0.1:$pport'"
fi
