#!/usr/bin/env bash
# Makes sure headless Chromium is installed for the admin page's browser
# test (Debian/Ubuntu package "chromium"). If no package manager can
# install it, says so loudly; the browser test then skips with a message.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then exit 0; fi
SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
# Another clone's make test may be installing at the same time: wait for
# its apt lock rather than fail on it.
WAIT=(-o DPkg::Lock::Timeout=600)
if command -v apt-get >/dev/null 2>&1; then
  echo "chromium: installing the Debian package for the browser test" >&2
  $SUDO apt-get "${WAIT[@]}" update -qq >/dev/null 2>&1
  if $SUDO env DEBIAN_FRONTEND=noninteractive apt-get "${WAIT[@]}" install -y -qq chromium >/dev/null 2>&1; then exit 0; fi
  # Ubuntu names it chromium-browser.
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get "${WAIT[@]}" install -y -qq chromium-browser >/dev/null 2>&1 && exit 0
fi
echo "!!! chromium: could not be installed; the admin browser test will be SKIPPED !!!" >&2
exit 0
