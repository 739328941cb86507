#!/usr/bin/env bash
# govulncheck against a local copy of the Go vulnerability database. This
# machine reaches the Go module proxy but not vuln.go.dev, so the database
# is built from the OSV files that the golang.org/x/vulndb module ships
# (its own cmd/indexdb writes the index govulncheck reads). Pin VULNDB to a
# newer pseudo-version to refresh it.
#
# A vulnerability our code reaches in a third-party module fails the check:
# upgrade the module. One in the Go standard library is reported loudly but
# does not fail: the fix is a newer Go patch release, which this project's
# machines cannot install (see docs/security.md).
#
# Output: one line per vulnerability our code reaches (id, standard library
# package or module at the version found, version that fixes it, title). VULNCHECK_VERBOSE=1 prints
# govulncheck's full report instead, with the call traces.
# VULNCHECK_REPORT=FILE reads a saved govulncheck text report instead of
# running govulncheck (the same summary and exit status).
set -euo pipefail
verbose=${VULNCHECK_VERBOSE:-0}
report=$(mktemp)
trap 'rm -f "$report"' EXIT
if [ -n "${VULNCHECK_REPORT:-}" ]; then
  cp "$VULNCHECK_REPORT" "$report"
  rc=0
  if grep -q '^Vulnerability #' "$report"; then rc=3; fi
else
  VULNDB=${VULNDB:-v0.0.0-20261105234957-e22db6528018}
  out=${VULNDB_DIR:-${TMPDIR:-/tmp}/callgate-vulndb-$VULNDB}
  if [ ! -f "$out/index/db.json" ]; then
    dir=$(go mod download -json "golang.org/x/vulndb@$VULNDB" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    rm -rf "$out.tmp" && mkdir -p "$out.tmp"
    (cd "$dir" && GOFLAGS=-mod=mod go run ./cmd/indexdb -vulns "$dir/data/osv" -out "$out.tmp")
    rm -rf "$out" && mv "$out.tmp" "$out"
  fi
  set +e
  govulncheck -db "file://$out" ./... >"$report" 2>&1
  rc=$?
  set -e
fi
if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then
  cat "$report"
  echo "vulncheck: govulncheck failed to run (exit $rc)" >&2; exit $rc
fi
if [ "$verbose" = 1 ]; then
  cat "$report"
else
  # One line per "Found in"/"Fixed in" pair of each vulnerability block of
  # the symbol results (what our code calls; a -show verbose report's
  # package and module results are left out), then govulncheck's closing
  # paragraph without its -show hint.
  awk '
    /^Your code is affected|^No vulnerabilities found/ { tail = 1 }
    tail { if ($0 !~ /^Use .-show/) print; next }
    /^=== (Package|Module) Results ===/ { other = 1 }
    other { next }
    /^Vulnerability #/ { id = $3; title = ""; intitle = 1; module = ""; next }
    intitle && /^  More info:/ { intitle = 0; next }
    intitle { t = $0; sub(/^ +/, "", t); title = title (title == "" ? "" : " ") t; next }
    /^  Standard library$/ { module = "stdlib"; next }
    /^  Module: / { module = $2; next }
    /^    Found in: / { found = $3; next }
    /^    Fixed in: / {
      fixed = $3; sub(/^.*@/, "", fixed); if (fixed == "N/A") fixed = "no fix yet"
      if (length(title) > 90) title = substr(title, 1, 87) "..."
      if (!n++) print "vulncheck: vulnerabilities our code reaches:"
      where = (module == "stdlib") ? "stdlib " found : found
      printf "  %-14s %s, fixed in %s: %s\n", id, where, fixed, title
    }
  ' "$report"
fi
# "Found in: <path>@<version>" lines of called vulnerabilities; a module
# path has a dot in its first element, a standard library package has not.
modules=$(sed -n '/^Your code is affected/q; s/^ *Found in: \([^@]*\)@.*/\1/p' "$report" | awk -F/ '$1 ~ /\./' | sort -u)
if [ -n "$modules" ]; then
  echo "vulncheck: FAIL: our code reaches known vulnerabilities in: $modules" >&2
  exit 1
fi
if [ $rc -eq 3 ]; then
  echo "vulncheck: WARNING: the standard library vulnerabilities above are fixed in a newer Go patch release than this machine's Go; upgrade Go where you deploy." >&2
  if [ "$verbose" != 1 ]; then
    echo "vulncheck: VULNCHECK_VERBOSE=1 shows govulncheck's full report with the call traces" >&2
  fi
fi
echo "vulncheck: no known vulnerability reached in third-party modules"
