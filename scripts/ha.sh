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
#
# Slots: two make test runs at once on this machine (two clones) each run
# these servers in a slot of their own, so that neither reaches, nor stops,
# the other's. CALLGATE_HA_SLOT=N (default 0) picks the slot of every
# command above. Slot 0 is what this header describes. Slot N (1..99)
# shifts every port by 10*N and names its nodes and folder after N:
#   MariaDB  3307+10N, 3308+10N, 3309+10N
#   RabbitMQ callgate-ha-N-1..3@localhost on 5681+10N..5683+10N, and
#            callgate-fault-N@localhost on 5684+10N (dist ports +20000)
#   state    /tmp/callgate-ha-N (CALLGATE_HA_DIR still wins), its lock
#            /tmp/callgate-ha-N.lock
# `down` stops only its slot's servers: its kill patterns match the slot's
# node names and data folders and no other slot's (callgate-ha-1-2@ is not
# callgate-ha-11-2@, nor slot 0's callgate-ha-1@).
#
# scripts/ha.sh slot [PID] prints the lowest free slot of 0..9 and claims
#                        it for PID (default: the caller; make test gives
#                        its recipe's shell) until `down` of that slot.
#                        Free: no live claim, nothing listening on any of
#                        its ports, its lock not held (flock -n). A claim is
#                        a folder /tmp/callgate-ha-slots/N holding its
#                        owner's pid; it is live while that process is, so
#                        a run that starts its servers minutes after it
#                        claimed keeps its slot, and the claim of a run
#                        killed before its `down` is taken again once its
#                        ports are closed and its lock free. The choice
#                        and the claim happen under one machine-wide lock
#                        (/tmp/callgate-ha-slots.lock): two runs starting
#                        together get two slots.
set -euo pipefail
cd "$(dirname "$0")/.."
# The servers run as the mysql and rabbitmq users, in folders this script
# gives them: that takes root. (slot's default owner is the caller, not
# sudo.)
if [ "$(id -u)" != 0 ]; then
  if [ "${1:-}" = slot ] && [ $# -lt 2 ]; then set -- slot "$PPID"; fi
  exec sudo -E "$0" "$@"
fi
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

SLOT=${CALLGATE_HA_SLOT:-0}
if ! [[ $SLOT =~ ^[0-9]{1,2}$ ]]; then echo "ha: CALLGATE_HA_SLOT=$SLOT: want a number, 0 to 99" >&2; exit 2; fi
SLOT=$((10#$SLOT))
CLAIMS=/tmp/callgate-ha-slots

# slot_config n: the ports, node names and default folder of slot n.
slot_config() {
  local o=$((10 * $1)) s=""
  [ "$1" = 0 ] || s="-$1"
  DB_PORTS=($((3307 + o)) $((3308 + o)) $((3309 + o)))
  MQ_PORTS=($((5681 + o)) $((5682 + o)) $((5683 + o)))
  FAULT_MQ_PORT=$((5684 + o))
  MQ_NODES=("callgate-ha$s-1@localhost" "callgate-ha$s-2@localhost" "callgate-ha$s-3@localhost")
  FAULT_MQ_NODE="callgate-fault$s@localhost"
  SLOT_DIR="/tmp/callgate-ha$s"
}
slot_config "$SLOT"
HA_DIR=${CALLGATE_HA_DIR:-$SLOT_DIR}
# SEMI_SYNC_TIMEOUT_MS is rpl_semi_sync_master_timeout on the primary. The
# scenarios stop replication for 10 s and must see what a fallback to
# asynchronous replication does, so the test cluster falls back after 1 s;
# docs/deployment.md says what production needs.
SEMI_SYNC_TIMEOUT_MS=${CALLGATE_HA_SEMI_SYNC_TIMEOUT_MS:-1000}
# The servers' buffer pool and redo log: small for the scenarios (three
# servers per slot on one machine); make bench-ha gives them what the
# benchmark wants (scripts/bench-ha.sh), as loadgen measures no server
# below it.
DB_POOL=${CALLGATE_HA_DB_POOL:-256M}
DB_REDO=${CALLGATE_HA_DB_REDO:-128M}

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
  # (db$n.initialised: an initialisation that ended half-way is done again)
  if [ ! -d "$dir/mysql" ] || [ ! -e "$HA_DIR/db$n.initialised" ]; then
    # A failed initialisation is shown and tried once more from scratch
    # (a make test beside another once lost its up here, with no word:
    # the log went with the folder).
    local try
    for try in 1 2; do
      log "db$n: initialising $dir"
      rm -rf "$dir" && mkdir -p "$dir" && chown mysql:mysql "$HA_DIR" "$dir"
      if mariadb-install-db --no-defaults --datadir="$dir" --user=mysql \
        --auth-root-authentication-method=normal --skip-test-db >"$HA_DIR/db$n.install.log" 2>&1; then
        touch "$HA_DIR/db$n.initialised"
        break
      fi
      log "db$n: mariadb-install-db failed (try $try):"; tail -20 "$HA_DIR/db$n.install.log" >&2
      [ "$try" = 1 ] || return 1
    done
  fi
  log "db$n: starting on 127.0.0.1:$port"
  setsid /usr/sbin/mariadbd --no-defaults --datadir="$dir" --socket="$(db_sock "$n")" \
    --port="$port" --bind-address=127.0.0.1 --user=mysql --server-id=$((100 + n)) \
    --log-bin="$dir/binlog" --log-slave-updates=1 --binlog-format=ROW --gtid-strict-mode=1 \
    --rpl-semi-sync-slave-enabled=ON --innodb-buffer-pool-size="$DB_POOL" --innodb-log-file-size="$DB_REDO" \
    --max-connections=500 --skip-name-resolve \
    --pid-file="$HA_DIR/db$n.pid" --log-error="$HA_DIR/db$n.err" </dev/null >/dev/null 2>&1 9>&- &
  wait_for "db$n" 60 db "$n" "SELECT 1" || { log "db$n: the end of its error log:"; tail -20 "$HA_DIR/db$n.err" >&2 2>/dev/null; return 1; }
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
  if [ "$1" = fault ]; then echo "$FAULT_MQ_NODE"; else echo "${MQ_NODES[$(($1 - 1))]}"; fi
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
  rabbitmqctl -q -n "$(mq_node "$n")" "$@"
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
  if mqctl "$1" cluster_status 2>/dev/null | grep -qF "${MQ_NODES[0]}"; then return 0; fi
  log "mq$1: joining ${MQ_NODES[0]}"
  mqctl "$1" stop_app
  mqctl "$1" join_cluster "${MQ_NODES[0]}"
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
  # Erlang VMs of the nodes by their names (this slot's only: see the
  # header).
  pkill -9 -f -- "--datadir=$(re_quote "$HA_DIR")/db[123]( |$)" 2>/dev/null || true
  kill_nodes "${MQ_NODES[@]}" "$FAULT_MQ_NODE"
  for p in "${DB_PORTS[@]}" "${MQ_PORTS[@]}" "$FAULT_MQ_PORT"; do port_gone "$p"; done
  rm -rf "$HA_DIR" "${CLAIMS:?}/$SLOT"
  log "down (slot $SLOT)"
}

# kill_nodes node...: SIGKILL the Erlang VMs of these RabbitMQ nodes, and
# whatever names them on its command line (the CLI tools talking to
# them). RabbitMQ passes a server its node name in the environment
# (RABBITMQ_NODENAME), not on the command line: its VM is found by that
# exact line of /proc/PID/environ, which no other slot's node has (nor
# epmd, shared by all, which is no beam.smp).
kill_nodes() {
  local pid node
  for pid in $(pgrep -x beam.smp || true); do
    for node in "$@"; do
      if tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qxF "RABBITMQ_NODENAME=$node"; then
        kill -9 "$pid" 2>/dev/null || true
      fi
    done
  done
  pkill -9 -f -- "$(IFS='|'; echo "$*")" 2>/dev/null || true
}

re_quote() { # s: s as an extended regular expression matching s only
  printf '%s' "$1" | sed 's/[][\\.*^$+?(){}|]/\\&/g'
}

# slot_free n: nothing listens on slot n's ports (its AMQP ports' dist
# ports too) and nobody holds its lock.
slot_free() {
  (
    slot_config "$1"
    for p in "${DB_PORTS[@]}" "${MQ_PORTS[@]}" "$FAULT_MQ_PORT"; do port_open "$p" && exit 1; done
    for p in "${MQ_PORTS[@]}" "$FAULT_MQ_PORT"; do port_open $((p + 20000)) && exit 1; done
    [ ! -e "$SLOT_DIR.lock" ] || flock -n "$SLOT_DIR.lock" true
  )
}

# claim_slot owner: print the lowest free slot of 0..9 and claim it for
# the process owner (the header says how).
claim_slot() {
  local owner=$1 n c pid
  exec 8>"$CLAIMS.lock"
  flock 8
  mkdir -p "$CLAIMS"
  for n in 0 1 2 3 4 5 6 7 8 9; do
    c="$CLAIMS/$n"
    pid=$(cat "$c/owner" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then continue; fi
    slot_free "$n" || continue
    rm -rf "$c" && mkdir "$c" && echo "$owner" >"$c/owner"
    log "slot $n claimed for process $owner"
    echo "$n"
    return 0
  done
  log "slot: slots 0 to 9 are all taken (scripts/ha.sh down with CALLGATE_HA_SLOT=N frees N)"
  return 1
}

status() {
  echo "slot $SLOT $HA_DIR"
  for n in 1 2 3; do
    if port_open "${DB_PORTS[$((n - 1))]}"; then
      echo "db$n :${DB_PORTS[$((n - 1))]} up read_only=$(db "$n" "SELECT @@read_only") gtid=$(db "$n" "SELECT @@gtid_current_pos")"
    else
      echo "db$n :${DB_PORTS[$((n - 1))]} down"
    fi
  done
  for n in 1 2 3; do
    if port_open "${MQ_PORTS[$((n - 1))]}"; then echo "mq$n ${MQ_NODES[$((n - 1))]} :${MQ_PORTS[$((n - 1))]} up"; else echo "mq$n ${MQ_NODES[$((n - 1))]} :${MQ_PORTS[$((n - 1))]} down"; fi
  done
  if port_open "$FAULT_MQ_PORT"; then echo "mqfault $FAULT_MQ_NODE :$FAULT_MQ_PORT up"; else echo "mqfault $FAULT_MQ_NODE :$FAULT_MQ_PORT down"; fi
}

env_out() {
  if [ "${1:-}" = fault ]; then
    # The broker TestBrokerRestart stops (the rest of the fault suite
    # runs on 3306 and 5672).
    echo "CALLGATE_FAULT_AMQP_URL=amqp://guest:guest@127.0.0.1:$FAULT_MQ_PORT/"
    echo "CALLGATE_FAULT_MQ_NODE=$FAULT_MQ_NODE"
    return
  fi
  # The slot and folder too: the HA tests run this script again
  # (kill-mq, promote...) on the same servers.
  echo "CALLGATE_HA_SLOT=$SLOT"
  echo "CALLGATE_HA_DIR=$HA_DIR"
  echo "CALLGATE_HA_DB_PORTS=$(IFS=,; echo "${DB_PORTS[*]}")"
  echo "CALLGATE_HA_MQ_PORTS=$(IFS=,; echo "${MQ_PORTS[*]}")"
  echo "CALLGATE_HA_MQ_NODES=$(IFS=,; echo "${MQ_NODES[*]}")"
  # Where the tests create their databases and prefixes: the primary and
  # the first node (internal/testenv).
  echo "CALLGATE_TEST_MYSQL_DSN=root:@tcp(127.0.0.1:${DB_PORTS[0]})/"
  echo "CALLGATE_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:${MQ_PORTS[0]}/"
}

kill_db() {
  kill_pidfile "$HA_DIR/db$1.pid"
  pkill -9 -f -- "--datadir=$(re_quote "$HA_DIR")/db$1( |$)" 2>/dev/null || true
  port_gone "${DB_PORTS[$(($1 - 1))]}"
}

port_gone() { # port: wait until nothing listens there
  for _ in $(seq 1 40); do port_open "$1" || return 0; sleep 0.25; done
  log "something still listens on $1"; return 1
}

kill_mq() {
  kill_pidfile "$HA_DIR/mq$1/pid"
  kill_nodes "$(mq_node "$1")"
  port_gone "${MQ_PORTS[$(($1 - 1))]}"
}

mq_safe_to_lose() { # n
  wait_for "quorum queues without mq$1" 120 rabbitmq-queues -q -n "$(mq_node "$1")" check_if_node_is_quorum_critical
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
  slot) claim_slot "${2:-$PPID}" ;;
  env) env_out "${2:-}" ;;
  kill-db) kill_db "$2" ;;
  start-db) start_db "$2" ;;
  kill-mq) kill_mq "$2" ;;
  start-mq) start_mq "$2"; wait_for "mq$2" 120 port_open "${MQ_PORTS[$(($2 - 1))]}" ;;
  mq-safe-to-lose) mq_safe_to_lose "$2" ;;
  promote) promote ;;
  reset-db) reset_db ;;
  *) echo "usage: scripts/ha.sh up [fault]|down|status|slot [PID]|env [fault]|kill-db N|start-db N|kill-mq N|start-mq N|mq-safe-to-lose N|promote|reset-db" >&2; exit 2 ;;
esac
