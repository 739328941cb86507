#!/usr/bin/env bash
# Runs the built processes in the foreground until Ctrl-C, which stops them
# gracefully. Used by `make run`.
#
#   scripts/run.sh [CONFIG]    (default configs/callgate.yaml), from the
#                              directory holding bin/gateway and bin/worker
#
# Start. The worker starts first, and the gateway only once the worker
# says "worker: started": the gateway's "listening" line and its demo
# banner come when both run. A worker that cannot start (its metrics port
# taken, the database refusing it) starts nothing else, and the script's
# last line says why, from the worker's own error: "callgate: the worker
# did not start (status 1), so neither did the gateway: worker:
# configs/callgate.yaml: line N: worker.metrics_addr: listen
# 127.0.0.1:9090: address already in use; set worker.metrics_addr (or
# CALLGATE_WORKER_METRICS_ADDR) to a free address".
#
# Signals. Ctrl-C makes the terminal send SIGINT to the whole foreground
# process group: the gateway and the worker get it themselves, so this
# script sends them nothing more (a further signal would be their second,
# which exits at once with status 1) and waits for their graceful stop. A
# second Ctrl-C is their second signal and forces the exit. SIGTERM sent to
# this script alone (a supervisor, `kill PID`) is passed on to both; a second
# SIGTERM is passed on again and forces the exit. From another terminal,
# stop it with `kill PID` (or SIGINT to its process group, as Ctrl-C does;
# SIGINT to this script alone is not passed on). If a process fails (ends
# with a status other than 0), the others are stopped with SIGTERM; one that
# ends with 0 was told to stop by a signal the others got too (the group's),
# so they are left to finish their own stop.
#
# Exit status: 0 when every process stopped with 0, else the first other
# status (128+N for a process killed by signal N).
set -uo pipefail
config=${1:-configs/callgate.yaml}

declare -A names=() # pid -> process name, while it runs
stopping=0
status=0
watcher= # the pid of watch_worker
tmp=$(mktemp -d "${TMPDIR:-/tmp}/callgate-run.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

term_all() {
  if [ ${#names[@]} -gt 0 ]; then kill -TERM "${!names[@]}" 2>/dev/null || true; fi
}
on_int() {
  if [ $stopping -eq 1 ]; then
    term_all # they got this Ctrl-C too: their second signal, they exit now
    return
  fi
  stopping=1
  echo "callgate: stopping (Ctrl-C again to force)" >&2
}
on_term() {
  stopping=1
  term_all
}
trap on_int INT
trap on_term TERM

# watch_worker passes the worker's log (its stderr, on stdin here) on to
# ours and, until the worker has started, notes the line saying so
# ($tmp/started) and the last error it wrote ($tmp/reason): the message
# of an ERROR line (JSON or text log), or a line of its own (a config
# file's problems, printed before the log is set up).
watch_worker() {
  trap '' INT # Ctrl-C: the worker's last lines must still get through
  local line
  while IFS= read -r line; do
    printf '%s\n' "$line" >&2
    case $line in
    *'worker: started"'*)
      : >"$tmp/started"
      exec cat >&2
      ;;
    *'"level":"ERROR"'* | *'level=ERROR'*)
      sed -n 's/.*msg"\{0,1\}[:=]"\(\([^"\\]\|\\.\)*\)".*/\1/p' <<<"$line" | sed 's/\\"/"/g' >"$tmp/reason"
      ;;
    '{'* | 'time='*) ;;
    *) printf '%s\n' "$line" >"$tmp/reason" ;;
    esac
  done
}

if [ -x bin/worker ]; then
  mkfifo "$tmp/worker.log"
  watch_worker <"$tmp/worker.log" &
  watcher=$!
  bin/worker -config "$config" 2>"$tmp/worker.log" &
  worker=$!
  names[$worker]=worker
  while [ ! -e "$tmp/started" ] && kill -0 "$worker" 2>/dev/null; do
    sleep 0.1
  done
  if [ ! -e "$tmp/started" ]; then
    wait "$worker"
    rc=$?
    wait "$watcher"
    if [ $stopping -eq 1 ]; then
      echo "callgate: stopped while the worker was starting (status $rc)" >&2
      exit $rc
    fi
    reason=$(cat "$tmp/reason" 2>/dev/null)
    echo "callgate: the worker did not start (status $rc), so neither did the gateway${reason:+: $reason}" >&2
    if [ $rc -eq 0 ]; then rc=1; fi
    exit $rc
  fi
fi
if [ $stopping -eq 0 ]; then
  bin/gateway -config "$config" &
  names[$!]=gateway
fi
# The gateway itself says where it listens once it does ("gateway:
# listening", and in demo mode the demo script to try): a line printed
# here would come before the bind, even when the bind then fails.

while [ ${#names[@]} -gt 0 ]; do
  pid=
  wait -n -p pid "${!names[@]}"
  rc=$?
  if [ -z "${pid:-}" ]; then
    continue # a trapped signal ended the wait, not a process
  fi
  if [ "${names[$pid]}" = worker ] && [ -n "$watcher" ]; then
    wait "$watcher" # its last lines first
  fi
  echo "callgate: ${names[$pid]} exited with status $rc" >&2
  unset "names[$pid]"
  if [ $rc -ne 0 ] && [ $status -eq 0 ]; then status=$rc; fi
  if [ $stopping -eq 0 ] && [ $rc -ne 0 ]; then
    stopping=1 # it failed: stop the others
    term_all
  fi
done
exit $status
