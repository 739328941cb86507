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
