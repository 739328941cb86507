#!/usr/bin/env bash
# The MariaDB make bench and make bench-scale measure: a standalone server
# of their own, started for the run and removed after it. The benchmark
# never uses, nor reconfigures, the shared MariaDB on 3306: it once raised
# that server's buffer pool and redo log with SET GLOBAL for a run and
# shrank them back at the end, and the shrink from 4 GB to 128 MB made
# tests running beside it fail ("Lock table is full", "The total number of
# locks exceeds the lock table size").
#
# Its settings are what docs/performance.md ("What to give MySQL") asks
# for and scripts/services.sh writes for a MariaDB it installs:
#   innodb_buffer_pool_size  a quarter of the RAM, 512 MB to 4 GB (what
#                            loadgen's wantedServerSettings computes)
#   innodb_log_file_size     512M
# and, so that its figures compare with the earlier runs on the shared
# server (BENCHMARKS.md), that server's durability, as read from it with
# SELECT @@log_bin, @@innodb_flush_log_at_trx_commit, @@sync_binlog:
#   binlog off (log_bin 0 there; so no binlog_format of services.sh's),
#   innodb_flush_log_at_trx_commit=1, sync_binlog=0 (no binlog to sync),
#   doublewrite on and O_DIRECT (both the defaults), and the shared
#   server's character set (utf8mb4, utf8mb4_general_ci) and
#   skip-name-resolve. The rest are MariaDB's defaults, as there
#   (max_connections 151 included): SHOW GLOBAL VARIABLES of the two
#   differs in the buffer pool, the redo log and the paths only.
# Its data lives under /tmp, on the same file system as /var/lib/mysql on
# this machine.
#
# scripts/bench-db.sh up     start it (fails, touching nothing, if its port
#                            is taken: another run's server, or one a
#                            killed run left: `down` removes that)
# scripts/bench-db.sh down   stop it and delete its data
# scripts/bench-db.sh status one line
# scripts/bench-db.sh env    CALLGATE_BENCH_* for `env $(...)`: its port,
#                            folder and DSN
# scripts/bench-db.sh flags  the loadgen flags that measure it: -mysql DSN
#                            -db-proc DATADIR (the mariadbd metered)
#
# CALLGATE_BENCH_DB_PORT (default 3400: no slot of scripts/ha.sh uses it,
# their MariaDB ports end in 7, 8 or 9) and CALLGATE_BENCH_DB_DIR (default
# /tmp/callgate-bench-db-PORT) pick another server, e.g. for two runs at
# once. As scripts/ha.sh, it runs mariadbd as the mysql user in a folder it
# gives it: up and down take root (sudo -E).
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${CALLGATE_BENCH_DB_PORT:-3400}
if ! [[ $PORT =~ ^[0-9]{4,5}$ ]] || [ "$PORT" = 3306 ]; then
  echo "bench-db: CALLGATE_BENCH_DB_PORT=$PORT: want a free port, not 3306" >&2; exit 2
fi
DIR=${CALLGATE_BENCH_DB_DIR:-/tmp/callgate-bench-db-$PORT}
DATA=$DIR/data
# A folder this script made holds this file; down deletes no other.
MARK=$DIR/.callgate-bench-db

case "${1:-}" in
  up | down)
    if [ "$(id -u)" != 0 ]; then exec sudo -E "$0" "$@"; fi ;;
esac
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

log() { echo "bench-db: $*" >&2; }

db() { mariadb --no-defaults --protocol=tcp -h127.0.0.1 -P"$PORT" -uroot -N -B -e "$*"; }

# pool_mb: a quarter of the RAM, 512 MB to 4 GB (services.sh's rule).
pool_mb() {
  local mb
  mb=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 / 4))
  [ "$mb" -lt 512 ] && mb=512
  [ "$mb" -gt 4096 ] && mb=4096
  echo "$mb"
}

# own_server: the server answering on PORT is this folder's.
own_server() { [ "$(db "SELECT @@datadir" 2>/dev/null)" = "$DATA/" ]; }

up() {
  # One up at a time per folder: a second one would remove the first's
  # data while it starts (the server must not inherit the lock: 8>&-).
  exec 8>"$DIR.lock"
  flock -n 8 || { log "another scripts/bench-db.sh up of $DIR is under way"; exit 1; }
  if port_open "$PORT"; then
    log "127.0.0.1:$PORT is taken (another run's server, or one left running: scripts/bench-db.sh down removes a server of this script's; CALLGATE_BENCH_DB_PORT picks another port)"
    exit 1
  fi
  if [ -e "$DIR" ] && [ ! -e "$MARK" ] && [ -n "$(ls -A "$DIR")" ]; then
    log "$DIR exists and was not made by this script: CALLGATE_BENCH_DB_DIR picks another folder"; exit 1
  fi
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server mariadb-client
  # Interrupted or failed half-way: nothing is left.
  trap 'log "up failed: removing what it started"; down; exit 1' ERR
  trap 'down; exit 130' INT TERM
  rm -rf "$DATA" && mkdir -p "$DATA" && touch "$MARK" && chown mysql:mysql "$DIR" "$DATA"
  log "initialising $DATA"
  mariadb-install-db --no-defaults --datadir="$DATA" --user=mysql \
    --auth-root-authentication-method=normal --skip-test-db >"$DIR/install.log" 2>&1
  local pool; pool=$(pool_mb)
  log "starting on 127.0.0.1:$PORT (buffer pool ${pool} MB, redo log 512 MB, binlog off, innodb_flush_log_at_trx_commit=1)"
  setsid /usr/sbin/mariadbd --no-defaults --datadir="$DATA" --socket="$DIR/mariadbd.sock" \
    --port="$PORT" --bind-address=127.0.0.1 --user=mysql --skip-name-resolve \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --innodb-buffer-pool-size="${pool}M" --innodb-log-file-size=512M \
    --innodb-flush-log-at-trx-commit=1 --sync-binlog=0 \
    --pid-file="$DIR/mariadbd.pid" --log-error="$DIR/mariadbd.err" </dev/null >/dev/null 2>&1 8>&- &
  wait_for "MariaDB on $PORT" 120 own_server
  trap - ERR INT TERM
  log "up: $(status)"
}

# pids: the mariadbd of this folder (its pid file, and any process whose
# command line names exactly its datadir).
pids() {
  local p
  p=$(cat "$DIR/mariadbd.pid" 2>/dev/null || true)
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
  pgrep -f -- "--datadir=$(printf '%s' "$DATA" | sed 's/[][\\.*^$+?(){}|]/\\&/g')( |$)" || true
}

down() {
  local p
  for p in $(pids | sort -u); do kill -9 "$p" 2>/dev/null || true; done
  for _ in $(seq 1 80); do
    [ -z "$(pids)" ] && ! port_open "$PORT" && break
    sleep 0.25
  done
  if [ -n "$(pids)" ]; then log "mariadbd of $DATA still runs"; return 1; fi
  if [ -e "$MARK" ]; then rm -rf "$DIR"; elif [ -e "$DIR" ]; then log "$DIR was not made by this script: left as it is"; fi
  log "down ($PORT)"
}

status() {
  if port_open "$PORT"; then
    echo "127.0.0.1:$PORT up: $(db "SELECT CONCAT(VERSION(), ', buffer pool ', @@innodb_buffer_pool_size DIV 1048576, ' MB, redo log ', @@innodb_log_file_size DIV 1048576, ' MB, log_bin ', @@log_bin, ', innodb_flush_log_at_trx_commit ', @@innodb_flush_log_at_trx_commit)" 2>&1), $DATA"
  else
    echo "127.0.0.1:$PORT down"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  env)
    echo "CALLGATE_BENCH_DB_PORT=$PORT"
    echo "CALLGATE_BENCH_DB_DIR=$DIR"
    echo "CALLGATE_BENCH_MYSQL_DSN=root:@tcp(127.0.0.1:$PORT)/"
    # (the sizes it starts with: scripts/bench-ha.sh gives the HA servers the same)
    echo "CALLGATE_BENCH_DB_POOL=$(pool_mb)M"
    echo "CALLGATE_BENCH_DB_REDO=512M" ;;
  flags) echo "-mysql root:@tcp(127.0.0.1:$PORT)/ -db-proc $DATA" ;;
  *) echo "usage: scripts/bench-db.sh up|down|status|env|flags" >&2; exit 2 ;;
esac
