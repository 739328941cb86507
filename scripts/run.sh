#!/usr/bin/env bash
# Runs the built processes in the foreground until Ctrl-C, which stops them
# gracefully. Used by `make run`.
#
#   scripts/run.sh [CONFIG]    (default configs/callgate.yaml), from the
#                              directory holding bin/gateway and bin/worker
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

if [ -x bin/worker ]; then
  bin/worker -config "$config" &
  names[$!]=worker
fi
bin/gateway -config "$config" &
names[$!]=gateway
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
  echo "callgate: ${names[$pid]} exited with status $rc" >&2
  unset "names[$pid]"
  if [ $rc -ne 0 ] && [ $status -eq 0 ]; then status=$rc; fi
  if [ $stopping -eq 0 ] && [ $rc -ne 0 ]; then
    stopping=1 # it failed: stop the others
    term_all
  fi
done
exit $status
