# Shell helpers shared by scripts/services.sh and scripts/ha.sh (sourced;
# the caller defines log).

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name, seconds, command...
  local name=$1 secs=$2; shift 2
  for _ in $(seq 1 $((secs * 2))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  log "$name did not come up within ${secs}s"; return 1
}

apt_updated=""
apt_install() {
  if ! command -v apt-get >/dev/null; then
    log "cannot install $*: no apt-get on this machine; install it by hand"; exit 1
  fi
  # (DPkg::Lock::Timeout: another run installing at the same time is
  # waited for, not failed on.)
  if [ -z "$apt_updated" ]; then $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq; apt_updated=1; fi
  # No service manager may be running (containers): install without
  # starting, the scripts start the daemons themselves.
  $SUDO env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}
