package testenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// envRunMain, in a test binary's environment, makes RunMainOrTests run
// the command instead of its tests.
const envRunMain = "TESTENV_RUN_MAIN"

// RunMainOrTests is the TestMain of a command's package: run by Exec on
// Self, the test binary is the command (main); otherwise it runs the tests.
// The tests so run the very code they test, race detector and all, with
// no `go build` of their own (one took minutes with the rest of the suite
// compiling beside it).
func RunMainOrTests(m *testing.M, main func()) {
	if os.Getenv(envRunMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Self returns the path of the running test binary, for Exec: in a
// package whose TestMain is RunMainOrTests, it runs as the command.
func Self(t testing.TB) string {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	return bin
}

// execLimit bounds a command Exec runs: one that should have stopped at
// start but serves (a setting it did not take) is killed and the test
// fails saying so, rather than the suite hanging until go test's timeout.
// Not a measure of speed: every command the tests run exits in seconds.
const execLimit = 3 * time.Minute

// Exec runs bin (Self: the command) with args in the repository's root,
// with this process's environment less every CALLGATE_* variable, plus
// env ("K=V"). It
// returns the exit status and what the binary wrote to stdout and stderr.
func Exec(t testing.TB, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), execLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = RepoRoot()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CALLGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envRunMain+"=1")
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		require.FailNow(t, "the command did not exit", "%s %s: killed after %s\nstderr:\n%s", bin, strings.Join(args, " "), execLimit, errOut.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), errOut.String()
	}
	require.NoError(t, err, "running %s", bin)
	return 0, out.String(), errOut.String()
}
