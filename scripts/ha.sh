#!/usr/bin/env bash
# The replicated servers the HA scenarios (make test-ha) run against, on
# this one machine, from the distribution's packages. They never touch the MariaDB on 3306 or the RabbitMQ on 5672.
#
#   MariaDB  db1 127.0.0.1:3307 (primary), db2 :3308 and db3 :3309
#            (replicas): GTIDs, row binlogs, lossless semi-synchronous
#            replication (wait point AFTER_SYNC) on the primary.
#   RabbitMQ callgate-ha-1@localhost :5681, -2 :5682, -3 :5683, joined
#            into one cluster (their dist ports are 20000 higher).
#   RabbitMQ callgate-fault@localhost :5684, on its own: the broker the
#            fault suite's TestBrokerRestart stops and starts (the one on
#            5672 is never stopped).
#
# scripts/ha.sh up       install what is missing, start, replicate, cluster
#                        (idempotent: a running cluster is reset to that
#                        shape, its data kept)
# scripts/ha.sh up fault only the fault suite's broker (make test-faults)
# scripts/ha.sh down     stop everything and delete its data
# scripts/ha.sh status   one line per server
# scripts/ha.sh env      the environment the HA tests read (CALLGATE_HA_*)
# scripts/ha.sh env fault the fault suite's (CALLGATE_FAULT_*)
#
# What the HA scenarios do to it (docs/operations/mysql-failover.md has the runbook the
# promote step follows):
# scripts/ha.sh kill-db N | start-db N | kill-mq N | start-mq N
# scripts/ha.sh mq-safe-to-lose N   wait until losing node N leaves every
#                        quorum queue a majority (a node started again
#                        has caught up), as before any planned restart
# scripts/ha.sh promote  after the primary died: wait until each live
#                        replica has applied what it received, promote the
#                        most advanced, point the other at it; prints the
#                        new primary's number
# scripts/ha.sh reset-db the three MariaDB servers from scratch, db1 primary
#
# State lives in CALLGATE_HA_DIR (default /tmp/callgate-ha).
set -euo pipefail
cd "$(dirname "$0")/.."
# The servers run as the mysql and rabbitmq users, in folders this script
# gives them: that takes root.
if [ "$(id -u)" != 0 ]; then exec sudo -E "$0" "$@"; fi
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

HA_DIR=${CALLGATE_HA_DIR:-/tmp/callgate-ha}
DB_PORTS=(3307 3308 3309)
MQ_PORTS=(5681 5682 5683)
FAULT_MQ_PORT=5684
FAULT_MQ_NODE=callgate-fault@localhost
# SEMI_SYNC_TIMEOUT_MS is rpl_semi_sync_master_timeout on the primary. The
# scenarios stop replication for 10 s and must see what a fallback to
# asynchronous replication does, so the test cluster falls back after 1 s;
# docs/deployment.md says what production needs.
SEMI_SYNC_TIMEOUT_MS=${CALLGATE_HA_SEMI_SYNC_TIMEOUT_MS:-1000}

log() { echo "ha: $*" >&2; }

db_sock() { echo "$HA_DIR/db$1.sock"; }
db() { # n, sql...
  local n=$1; shift
  mariadb --no-defaults --protocol=tcp -h127.0.0.1 -P"${DB_PORTS[$((n - 1))]}" -uroot -N -B -e "$*"
}

ensure_packages() {
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server mariadb-client
  command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
}

start_db() { # n
  local n=$1 port=${DB_PORTS[$(($1 - 1))]} dir="$HA_DIR/db$1"
  if port_open "$port"; then return 0; fi
  if [ ! -d "$dir/mysql" ]; then
    log "db$n: initialising $dir"
    mkdir -p "$dir" && chown mysql:mysql "$HA_DIR" "$dir"
    mariadb-install-db --no-defaults --datadir="$dir" --user=mysql \
      --auth-root-authentication-method=normal --skip-test-db >"$HA_DIR/db$n.install.log" 2>&1
  fi
  log "db$n: starting on 127.0.0.1:$port"
  setsid /usr/sbin/mariadbd --no-defaults --datadir="$dir" --socket="$(db_sock "$n")" \
    --port="$port" --bind-address=127.0.0.1 --user=mysql --server-id=$((100 + n)) \
    --log-bin="$dir/binlog" --log-slave-updates=1 --binlog-format=ROW --gtid-strict-mode=1 \
    --rpl-semi-sync-slave-enabled=ON --innodb-buffer-pool-size=256M --innodb-log-file-size=128M \
    --max-connections=500 --skip-name-resolve \
    --pid-file="$HA_DIR/db$n.pid" --log-error="$HA_DIR/db$n.err" </dev/null >/dev/null 2>&1 9>&- &
  wait_for "db$n" 60 db "$n" "SELECT 1"
}

# make_primary n: semi-sync master on (lossless), writable, no replication.
make_primary() {
  db "$1" "STOP SLAVE; RESET SLAVE ALL;
    SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC;
    SET GLOBAL rpl_semi_sync_master_timeout = $SEMI_SYNC_TIMEOUT_MS;
    SET GLOBAL rpl_semi_sync_master_enabled = ON;
    SET GLOBAL read_only = 0"
}

# make_replica n primary: replicate from primary with GTIDs, semi-sync
# slave on, master side off (on a replica it stalls its SQL thread).
make_replica() {
  local primary_port=${DB_PORTS[$(($2 - 1))]}
  db "$1" "SET GLOBAL rpl_semi_sync_master_enabled = OFF;
    STOP SLAVE;
    CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$primary_port, MASTER_USER='root',
      MASTER_PASSWORD='', MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos;
    SET GLOBAL read_only = 1;
    START SLAVE"
}

mq_node() { # n: node n's name (n "fault": the fault suite's broker)
  if [ "$1" = fault ]; then echo "$FAULT_MQ_NODE"; else echo "callgate-ha-$1@localhost"; fi
}

mq_port() { # n: node n's AMQP port
  if [ "$1" = fault ]; then echo "$FAULT_MQ_PORT"; else echo "${MQ_PORTS[$(($1 - 1))]}"; fi
}

mq_env() { # n: the environment of node n
  local port dir="$HA_DIR/mq$1"
  port=$(mq_port "$1")
  echo RABBITMQ_NODENAME="$(mq_node "$1")" RABBITMQ_NODE_PORT="$port" \
    RABBITMQ_DIST_PORT=$((port + 20000)) RABBITMQ_MNESIA_BASE="$dir/mnesia" \
    RABBITMQ_LOG_BASE="$dir/log" RABBITMQ_PID_FILE="$dir/pid" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_CONFIG_FILE="$dir/rabbitmq"
}

mqctl() { # n, args...
  local n=$1; shift
  rabbitmqctl -q -n "callgate-ha-$n@localhost" "$@"
}

start_mq() { # n
  local n=$1 port dir="$HA_DIR/mq$1"
  port=$(mq_port "$1")
  if port_open "$port"; then return 0; fi
  mkdir -p "$dir/mnesia" "$dir/log"
  [ -f "$dir/enabled_plugins" ] || echo '[].' >"$dir/enabled_plugins"
  [ -f "$dir/rabbitmq.conf" ] || echo '# callgate HA test node: the defaults' >"$dir/rabbitmq.conf"
  chown -R rabbitmq:rabbitmq "$dir" 2>/dev/null || true
  log "mq$n: starting $(mq_node "$n") on 127.0.0.1:$port"
  # shellcheck disable=SC2046
  env $(mq_env "$n") rabbitmq-server -detached >/dev/null 2>&1 9>&- || true
}

join_mq() { # n: join node n to node 1's cluster, unless it is in it
  if mqctl "$1" cluster_status 2>/dev/null | grep -q "callgate-ha-1@localhost"; then return 0; fi
  log "mq$1: joining callgate-ha-1@localhost"
  mqctl "$1" stop_app
  mqctl "$1" join_cluster callgate-ha-1@localhost
  mqctl "$1" start_app
}

# up_fault: the fault suite's broker alone, up and taking connections.
up_fault() {
  ensure_packages
  mkdir -p "$HA_DIR"
  start_mq fault
  wait_for "mqfault" 120 port_open "$FAULT_MQ_PORT"
}

up() {
  ensure_packages
  mkdir -p "$HA_DIR"
  for n in 1 2 3; do start_db "$n"; done
  for n in 1 2 3 fault; do start_mq "$n"; done
  # Replication: db1 primary, db2 and db3 its replicas, unless a
  # replica is already the primary (a scenario promoted it): then the
  # cluster is rebuilt from scratch by `down` first.
  if promoted; then
    log "a replica was promoted since the servers were set up: rebuilding them (db1 primary)"
    reset_db
  else
    make_primary 1
    make_replica 2 1
    make_replica 3 1
  fi
  for n in 1 2 3 fault; do wait_for "mq$n" 120 port_open "$(mq_port "$n")"; done
  join_mq 2
  join_mq 3
  wait_for "semi-sync replicas" 30 semi_sync_ready
  log "up: $(status | tr '\n' ';')"
}

# promoted: some server holds transactions another server than db1
# (server id 101) wrote, so db1 is no longer everyone's primary.
promoted() {
  local n
  for n in 1 2 3; do
    db "$n" "SELECT @@gtid_current_pos" | grep -Eq -- '-10[23]-' && return 0
  done
  return 1
}

semi_sync_ready() {
  [ "$(db 1 "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'" | awk '{print $2}')" = 2 ]
}

kill_pidfile() { # file
  [ -f "$1" ] || return 0
  local pid; pid=$(cat "$1" 2>/dev/null || true)
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  rm -f "$1"
}

down() {
  for n in 1 2 3; do
    kill_pidfile "$HA_DIR/db$n.pid"
    kill_pidfile "$HA_DIR/mq$n/pid"
  done
  kill_pidfile "$HA_DIR/mqfault/pid"
  # Whatever the pid files missed: the servers by their data folders, the
  # Erlang VMs of the nodes by their names.
  pkill -9 -f -- "--datadir=$HA_DIR/db[123]( |$)" 2>/dev/null || true
  pkill -9 -f -- "callgate-ha-[123]@localhost|$FAULT_MQ_NODE" 2>/dev/null || true
  for p in "${DB_PORTS[@]}" "${MQ_PORTS[@]}" "$FAULT_MQ_PORT"; do port_gone "$p"; done
  rm -rf "$HA_DIR"
  log "down"
}

status() {
  for n in 1 2 3; do
    if port_open "${DB_PORTS[$((n - 1))]}"; then
      echo "db$n :${DB_PORTS[$((n - 1))]} up read_only=$(db "$n" "SELECT @@read_only") gtid=$(db "$n" "SELECT @@gtid_current_pos")"
    else
      echo "db$n :${DB_PORTS[$((n - 1))]} down"
    fi
  done
  for n in 1 2 3; do
    if port_open "${MQ_PORTS[$((n - 1))]}"; then echo "mq$n :${MQ_PORTS[$((n - 1))]} up"; else echo "mq$n :${MQ_PORTS[$((n - 1))]} down"; fi
  done
  if port_open "$FAULT_MQ_PORT"; then echo "mqfault :$FAULT_MQ_PORT up"; else echo "mqfault :$FAULT_MQ_PORT down"; fi
}

env_out() {
  if [ "${1:-}" = fault ]; then
    # The broker TestBrokerRestart stops (the rest of the fault suite
    # runs on 3306 and 5672).
    echo "CALLGATE_FAULT_AMQP_URL=amqp://guest:guest@127.0.0.1:$FAULT_MQ_PORT/"
    echo "CALLGATE_FAULT_MQ_NODE=$FAULT_MQ_NODE"
    return
  fi
  echo "CALLGATE_HA_DIR=$HA_DIR"
  echo "CALLGATE_HA_DB_PORTS=$(IFS=,; echo "${DB_PORTS[*]}")"
  echo "CALLGATE_HA_MQ_PORTS=$(IFS=,; echo "${MQ_PORTS[*]}")"
  # Where the tests create their databases and prefixes: the primary and
  # the first node (internal/testenv).
  echo "CALLGATE_TEST_MYSQL_DSN=root:@tcp(127.0.0.1:${DB_PORTS[0]})/"
  echo "CALLGATE_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:${MQ_PORTS[0]}/"
}

kill_db() {
  kill_pidfile "$HA_DIR/db$1.pid"
  pkill -9 -f -- "--datadir=$HA_DIR/db$1( |$)" 2>/dev/null || true
  port_gone "${DB_PORTS[$(($1 - 1))]}"
}

port_gone() { # port: wait until nothing listens there
  for _ in $(seq 1 40); do port_open "$1" || return 0; sleep 0.25; done
  log "something still listens on $1"; return 1
}

kill_mq() {
  kill_pidfile "$HA_DIR/mq$1/pid"
  pkill -9 -f -- "callgate-ha-$1@localhost" 2>/dev/null || true
  port_gone "${MQ_PORTS[$(($1 - 1))]}"
}

mq_safe_to_lose() { # n
  wait_for "quorum queues without mq$1" 120 rabbitmq-queues -q -n "callgate-ha-$1@localhost" check_if_node_is_quorum_critical
}

slave_field() { # n field: a field of SHOW SLAVE STATUS on db n
  # (vertical output needs the field names: not db's -N)
  mariadb --no-defaults --protocol=tcp -h127.0.0.1 -P"${DB_PORTS[$(($1 - 1))]}" -uroot -e "SHOW SLAVE STATUS\G" |
    awk -v f="$2:" '$1 == f {print $2}'
}

seq_no() { # the sequence number of a single-domain GTID position
  echo "${1##*-}"
}

# promote follows the runbook: the old primary is dead; each live replica
# first applies everything it received (its SQL thread reaches its IO
# thread's position), then the most advanced becomes the primary and the
# other replicates from it. Prints the new primary's number.
promote() {
  local live=() best="" best_seq=-1
  for n in 1 2 3; do
    port_open "${DB_PORTS[$((n - 1))]}" || continue
    [ "$(db "$n" "SELECT @@read_only")" = 1 ] || continue
    live+=("$n")
  done
  [ "${#live[@]}" -gt 0 ] || { log "promote: no live replica"; exit 1; }
  for n in "${live[@]}"; do
    local io="" applied=""
    for _ in $(seq 1 120); do
      io=$(slave_field "$n" Gtid_IO_Pos)
      applied=$(db "$n" "SELECT @@gtid_slave_pos")
      [ "$applied" = "$io" ] && break
      sleep 0.25
    done
    if [ "$applied" != "$io" ]; then
      # Promoting now would throw away what it received (RESET SLAVE
      # deletes the relay logs): stop and let a person look.
      log "promote: db$n has not applied what it received (applied $applied, received $io) after 30 s"; exit 1
    fi
    db "$n" "STOP SLAVE"
    local s; s=$(seq_no "$(db "$n" "SELECT @@gtid_current_pos")")
    [ -n "$s" ] || s=0
    if [ "$s" -gt "$best_seq" ]; then best=$n best_seq=$s; fi
  done
  make_primary "$best"
  for n in "${live[@]}"; do
    [ "$n" = "$best" ] || make_replica "$n" "$best"
  done
  log "promote: db$best is the primary (gtid seq $best_seq)"
  echo "$best"
}

reset_db() {
  for n in 1 2 3; do kill_db "$n"; rm -rf "${HA_DIR:?}/db$n"; done
  for n in 1 2 3; do start_db "$n"; done
  make_primary 1
  make_replica 2 1
  make_replica 3 1
  wait_for "semi-sync replicas" 30 semi_sync_ready
}

# up and down take a lock: make test starts the servers in the background
# while the other suites run, and its test-ha step (or a down after a
# failure) waits for that start to finish. (The servers must not inherit
# the lock's descriptor: they start with 9>&-.)
locked() {
  exec 9>"${HA_DIR%/}.lock"
  flock 9
  "$@"
}

case "${1:-}" in
  up) if [ "${2:-}" = fault ]; then locked up_fault; else locked up; fi ;;
  down) locked down ;;
  status) status ;;
  env) env_out "${2:-}" ;;
  kill-db) kill_db "$2" ;;
  start-db) start_db "$2" ;;
  kill-mq) kill_mq "$2" ;;
  start-mq) start_mq "$2"; wait_for "mq$2" 120 port_open "${MQ_PORTS[$(($2 - 1))]}" ;;
  mq-safe-to-lose) mq_safe_to_lose "$2" ;;
  promote) promote ;;
  reset-db) reset_db ;;
  *) echo "usage: scripts/ha.sh up [fault]|down|status|env [fault]|kill-db N|start-db N|kill-mq N|start-mq N|mq-safe-to-lose N|promote|reset-db" >&2; exit 2 ;;
esac
