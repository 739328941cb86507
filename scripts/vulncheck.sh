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
# machines cannot install (see README, "Security").
set -euo pipefail
VULNDB=${VULNDB:-v0.0.0-20261105234957-e22db6528018}
out=${VULNDB_DIR:-${TMPDIR:-/tmp}/callgate-vulndb-$VULNDB}
if [ ! -f "$out/index/db.json" ]; then
  dir=$(go mod download -json "golang.org/x/vulndb@$VULNDB" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  (cd "$dir" && GOFLAGS=-mod=mod go run ./cmd/indexdb -vulns "$dir/data/osv" -out "$out.tmp")
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
report=$(mktemp)
trap 'rm -f "$report"' EXIT
set +e
govulncheck -db "file://$out" ./... >"$report" 2>&1
rc=$?
set -e
cat "$report"
if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then
  echo "vulncheck: govulncheck failed to run (exit $rc)" >&2; exit $rc
fi
# "Found in: <path>@<version>" lines of called vulnerabilities; a module
# path has a dot in its first element, a standard library package has not.
modules=$(sed -n '/^Your code is affected/q; s/^ *Found in: \([^@]*\)@.*/\1/p' "$report" | awk -F/ '$1 ~ /\./' | sort -u)
if [ -n "$modules" ]; then
  echo "vulncheck: FAIL: our code reaches known vulnerabilities in: $modules" >&2
  exit 1
fi
if [ $rc -eq 3 ]; then
  echo "vulncheck: WARNING: standard library vulnerabilities above are fixed in a newer Go patch release than this machine's Go; upgrade Go where you deploy." >&2
fi
echo "vulncheck: no known vulnerability reached in third-party modules"
