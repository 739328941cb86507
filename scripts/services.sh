#!/usr/bin/env bash
# Makes sure MariaDB (127.0.0.1:3306) and RabbitMQ (127.0.0.1:5672) answer.
# A running service is used as it is. A stopped one is started. A missing
# one is installed from the distribution's packages (Debian/Ubuntu, as root
# or with sudo) and started. Safe to run any number of times.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

log() { echo "services: $*" >&2; }

# mariadb_login succeeds once callgate's demo DSN (root, empty password,
# TCP to 127.0.0.1) can log in. (mariadb-admin ping would not do: it
# answers success on "Access denied" too, so a machine whose first run
# installed MariaDB but stopped before the root set-up was never repaired.)
mariadb_login() { mariadb --protocol=tcp -h127.0.0.1 -uroot -e 'SELECT 1' >/dev/null 2>&1; }

# mariadb_tuning writes callgate's server settings for a MariaDB this
# script installed: a buffer pool that holds a realistic backlog (a quarter
# of the RAM, between 512 MB and 4 GB: at about 1.5 KB a callback with its
# indexes, 1 GB holds some 600,000 PENDING callbacks and their outbox
# rows), and a redo log sized for bursts of group commits. A server that
# was already installed keeps its own settings (see docs/deployment.md and docs/performance.md).
mariadb_tuning() {
  local dir=/etc/mysql/mariadb.conf.d
  [ -d "$dir" ] || dir=/etc/mysql/conf.d
  $SUDO mkdir -p "$dir"
  local mem_kb pool_mb
  mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
  pool_mb=$(( mem_kb / 1024 / 4 ))
  [ "$pool_mb" -lt 512 ] && pool_mb=512
  [ "$pool_mb" -gt 4096 ] && pool_mb=4096
  log "MariaDB: innodb_buffer_pool_size=${pool_mb}M ($dir/90-callgate.cnf)"
  printf '%s\n' "# Written by callgate's scripts/services.sh when it installed MariaDB." \
    "[mariadbd]" \
    "innodb_buffer_pool_size = ${pool_mb}M" \
    "innodb_log_file_size = 512M" \
    "binlog_format = ROW" | $SUDO tee "$dir/90-callgate.cnf" >/dev/null
}

ensure_mariadb() {
  if port_open 3306; then return 0; fi
  local fresh=""
  if [ ! -x /usr/sbin/mariadbd ]; then
    log "installing MariaDB"; apt_install mariadb-server mariadb-client; fresh=1
    mariadb_tuning
  fi
  log "starting MariaDB"
  $SUDO mkdir -p /run/mysqld && $SUDO chown mysql:mysql /run/mysqld
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
  wait_for MariaDB 60 $SUDO mariadb-admin ping
  if [ -n "$fresh" ] || ! mariadb_login; then
    # Debian's root logs in through the unix socket only; callgate's demo
    # DSN uses root with an empty password over TCP on 127.0.0.1.
    log "allowing root with an empty password on 127.0.0.1 (demo set-up)"
    $SUDO mariadb -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('')" || true
    $SUDO mariadb -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION" || true
  fi
  wait_for "MariaDB over TCP" 30 mariadb_login
  $SUDO mariadb -e "CREATE DATABASE IF NOT EXISTS test" || true
}

ensure_rabbitmq() {
  if port_open 5672; then return 0; fi
  if ! command -v rabbitmq-server >/dev/null; then
    log "installing RabbitMQ"; apt_install rabbitmq-server
  fi
  if port_open 5672; then return 0; fi
  log "starting RabbitMQ"
  $SUDO rabbitmq-server -detached || true
  # rabbitmqctl calls take seconds each; the port is the cheaper signal.
  wait_for RabbitMQ 120 port_open 5672
}

ensure_mariadb
ensure_rabbitmq
log "MariaDB and RabbitMQ are up"
