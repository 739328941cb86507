#!/usr/bin/env bash
# make bench-ha: what surviving one machine costs, in one run. The same
# phases of the benchmark (raw INSERT baseline, group-commit intake, worker
# drains) first against single servers (scripts/bench-db.sh's MariaDB,
# durability primary; RabbitMQ on 5672, classic queues), then against the
# servers scripts/ha.sh starts: mysql.durability replica on a primary with
# two semi-synchronous replicas, quorum queues on a three-node cluster
# whose every node the processes know (amqp.urls). Figures go to stdout and
# to bench-single.json and bench-ha.json; BENCHMARKS.md records them.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
PHASES=${PHASES:-baseline,group,drain}

# Every MariaDB measured gets the buffer pool and redo log the benchmark
# wants (loadgen refuses a server below them, and changes none).
while IFS='=' read -r k v; do export "$k=$v"; done < <(scripts/bench-db.sh env)
export CALLGATE_HA_DB_POOL=${CALLGATE_HA_DB_POOL:-$CALLGATE_BENCH_DB_POOL} CALLGATE_HA_DB_REDO=${CALLGATE_HA_DB_REDO:-$CALLGATE_BENCH_DB_REDO}
# The HA servers in a slot of their own (scripts/ha.sh slot), never one a
# make test running beside uses.
CALLGATE_HA_SLOT=${CALLGATE_HA_SLOT:-$(scripts/ha.sh slot $$)}
export CALLGATE_HA_SLOT
bench_db=""
trap '[ -z "$bench_db" ] || scripts/bench-db.sh down; [ -n "${HA_KEEP:-}" ] || scripts/ha.sh down' EXIT
scripts/ha.sh up
scripts/bench-db.sh up || exit 1
bench_db=1
while IFS='=' read -r k v; do export "$k=$v"; done < <(scripts/ha.sh env)
urls=""
for p in ${CALLGATE_HA_MQ_PORTS//,/ }; do urls="${urls:+$urls,}amqp://guest:guest@127.0.0.1:$p/"; done

echo "== single servers: MariaDB $(scripts/bench-db.sh flags | awk '{print $2}') (durability primary), RabbitMQ 5672 (classic queues) =="
# shellcheck disable=SC2046
"$BIN/loadgen" -bin "$BIN" -phases "$PHASES" $(scripts/bench-db.sh flags) -json bench-single.json
echo
echo "== replicated: durability replica (primary 127.0.0.1:${CALLGATE_HA_DB_PORTS%%,*}, two semi-sync replicas), quorum queues on $urls =="
"$BIN/loadgen" -bin "$BIN" -phases "$PHASES" -mysql "$CALLGATE_TEST_MYSQL_DSN" -amqp "$CALLGATE_TEST_AMQP_URL" \
  -amqp-urls "$urls" -queue-type quorum -durability replica -db-proc "$CALLGATE_HA_DIR/db1" -mq-proc "${CALLGATE_HA_MQ_NODES%%,*}" \
  -json bench-ha.json
