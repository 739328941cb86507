#!/usr/bin/env bash
# Runs the built processes in the foreground until Ctrl-C, which stops them
# gracefully. Used by `make run`.
set -euo pipefail
config=${1:-configs/callgate.yaml}
pids=()
stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait; }
trap stop INT TERM
if [ -x bin/worker ]; then
  bin/worker -config "$config" & pids+=($!)
fi
bin/gateway -config "$config" & pids+=($!)
echo "callgate: gateway on ${CALLGATE_HTTP_ADDR:-:8080}; try scripts/demo-callback.sh paydemo" >&2
wait -n || true
stop
