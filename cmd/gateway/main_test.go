package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/testenv"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "callgate.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestInvalidConfigStopsAtStart(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml"))
	require.NoError(t, err)
	bad := strings.Replace(string(shipped), "kind: logistics", "kind: freight", 1)
	bad = strings.Replace(bad, "name: shipdemo", "name: paydemo", 1)

	var stderr bytes.Buffer
	code := run([]string{"-config", writeConfig(t, bad), "migrate"}, &stderr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), `sources[1] (paydemo).kind: unknown kind "freight"`)
	require.Contains(t, stderr.String(), `sources[1] (paydemo).name: duplicate source name "paydemo"`)
}

func TestConfigFromEnvironmentAndMigrate(t *testing.T) {
	cfg := testenv.Config(t) // a fresh database, already migrated once
	shipped := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	t.Setenv("CALLGATE_CONFIG", shipped)
	t.Setenv("CALLGATE_MYSQL_DSN", cfg.MySQL.DSN)
	var stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"migrate"}, &stderr), stderr.String())
	require.Contains(t, stderr.String(), "schema up to date")
}

func TestUnknownSubcommand(t *testing.T) {
	var stderr bytes.Buffer
	require.Equal(t, 2, run([]string{"launch"}, &stderr))
	require.Contains(t, stderr.String(), `unknown subcommand "launch"`)
}

// TestMistypedRoleStopsAtStart: a token whose third field is not exactly
// a role stops the gateway with an error naming the token, not its
// secret, before it connects to anything.
func TestMistypedRoleStopsAtStart(t *testing.T) {
	shipped := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	t.Setenv("CALLGATE_CONFIG", shipped)
	const secret = "audit-secret-0123456789"
	t.Setenv("CALLGATE_ADMIN_TOKEN", "ops:ops-secret-0123456789,audit:"+secret+":Viewer")
	// Nothing listens here: a start that got past the tokens would fail
	// on the database, with another message.
	t.Setenv("CALLGATE_MYSQL_DSN", "root@tcp(127.0.0.1:1)/test")
	var stderr bytes.Buffer
	require.Equal(t, 1, run([]string{"serve"}, &stderr), stderr.String())
	require.Contains(t, stderr.String(), "admin.token[1] (audit)")
	require.NotContains(t, stderr.String(), secret)
}
