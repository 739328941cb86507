package scripts

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/testenv"
)

// TestMakeRunListensOnThisMachine: `make run` serves demo mode, whose
// console accepts the published demo admin token, so it binds the gateway
// to 127.0.0.1:8080 unless CALLGATE_HTTP_ADDR says otherwise (as it used
// to bind :8080, every interface). The recipe's line (make -n runs
// nothing) is run by the shell with printenv in place of scripts/run.sh.
func TestMakeRunListensOnThisMachine(t *testing.T) {
	t.Parallel()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on this machine")
	}
	cmd := exec.Command(mk, "-n", "run")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = environWithout("CALLGATE_", "CONFIG=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var line string
	for l := range strings.Lines(string(out)) {
		if strings.Contains(l, "scripts/run.sh") {
			line = strings.TrimSpace(l)
		}
	}
	require.NotEmpty(t, line, "make -n run names scripts/run.sh:\n%s", out)
	run, _, ok := strings.Cut(line, "scripts/run.sh")
	require.True(t, ok)

	sees := func(env ...string) string {
		t.Helper()
		sh := exec.Command("bash", "-c", run+"printenv CALLGATE_HTTP_ADDR CALLGATE_DEMO")
		sh.Env = append(environWithout("CALLGATE_"), env...)
		got, err := sh.CombinedOutput()
		require.NoError(t, err, "%s: %s", run, got)
		return string(got)
	}
	require.Equal(t, "127.0.0.1:8080\n1\n", sees(), "by default, this machine only")
	require.Equal(t, ":8080\n1\n", sees("CALLGATE_HTTP_ADDR=:8080"), "an address of the user's own is kept")
}
