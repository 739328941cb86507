package scripts

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/testenv"
)

// TestVulncheckSummary runs scripts/vulncheck.sh on saved govulncheck
// reports (VULNCHECK_REPORT): one line per reached vulnerability instead of
// the call traces unless VULNCHECK_VERBOSE=1, and the failure rule kept: a
// reached third-party vulnerability fails, a standard library one warns.
func TestVulncheckSummary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		report  string
		verbose bool
		code    int
		lines   []string // each a whole line of the output
		absent  []string // regular expressions
	}{
		{
			name: "standard library only", report: "govulncheck-stdlib.txt", code: 0,
			lines: []string{
				"  GO-2026-6809   stdlib crypto/x509@go1.26.8, fixed in go1.26.10: Distrust compromised intermediate certificates in crypto/x509",
				"  GO-2026-6617   stdlib net/http@go1.26.8, fixed in go1.26.9: HTTP/2 server crash due to HPACK encoder race in net/http",
				"Your code is affected by 2 vulnerabilities from the Go standard library.",
				"vulncheck: no known vulnerability reached in third-party modules",
			},
			absent: []string{`Example traces`, `#1: `, `-show verbose`, `vulncheck: FAIL`},
		},
		{
			name: "standard library, verbose", report: "govulncheck-stdlib.txt", verbose: true, code: 0,
			lines: []string{
				"    Example traces found:",
				"      #1: internal/intake/source.go:81:30: intake.NewSource calls http.CanonicalHeaderKey",
				"vulncheck: no known vulnerability reached in third-party modules",
			},
		},
		{
			name: "third-party module reached", report: "govulncheck-module.txt", code: 1,
			lines: []string{
				"  GO-2026-6809   stdlib crypto/x509@go1.26.8, fixed in go1.26.10: Distrust compromised intermediate certificates in crypto/x509",
				"  GO-2021-0265   github.com/tidwall/gjson@v1.6.5, fixed in v1.9.3: A maliciously crafted path can cause Get and other query functions to consume excessive...",
				"vulncheck: FAIL: our code reaches known vulnerabilities in: github.com/tidwall/gjson",
			},
			absent: []string{`Example traces`, `no known vulnerability reached`},
		},
		{
			name: "nothing found", report: "govulncheck-none.txt", code: 0,
			lines:  []string{"No vulnerabilities found.", "vulncheck: no known vulnerability reached in third-party modules"},
			absent: []string{`WARNING`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "vulncheck.sh"))
			cmd.Env = append(environWithout("VULNCHECK_"), "VULNCHECK_REPORT="+filepath.Join("testdata", tc.report))
			if tc.verbose {
				cmd.Env = append(cmd.Env, "VULNCHECK_VERBOSE=1")
			}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if tc.code == 0 {
				require.NoError(t, err, "%s", out)
			} else {
				require.True(t, errors.As(err, &exit), "%v\n%s", err, out)
				require.Equal(t, tc.code, exit.ExitCode(), "%s", out)
			}
			for _, l := range tc.lines {
				require.Regexp(t, "(?m)^"+regexp.QuoteMeta(l)+"$", string(out))
			}
			for _, re := range tc.absent {
				require.NotRegexp(t, re, string(out))
			}
		})
	}
}
