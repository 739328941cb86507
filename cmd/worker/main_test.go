package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/testenv"
)

// brokenConfig is the shipped config with worker.batch_size misspelt,
// and the misspelling's line.
func brokenConfig(t *testing.T) (path string, line int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml"))
	require.NoError(t, err)
	i := strings.Index(string(raw), "  batch_size: 64\n")
	require.GreaterOrEqual(t, i, 0)
	path = filepath.Join(t.TempDir(), "broken.yaml")
	body := string(raw[:i]) + "  batchsize: 64\n" + string(raw[i+len("  batch_size: 64\n"):])
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path, strings.Count(string(raw[:i]), "\n") + 1
}

// TestBinaryErrorsSayWhatIsWrong builds the worker and checks that -config
// is honoured after each subcommand, that other stray arguments get the
// usage line and exit status 2, and that replay checks --since itself.
func TestBinaryErrorsSayWhatIsWrong(t *testing.T) {
	bin := testenv.Build(t, "./cmd/worker")
	shipped := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	broken, line := brokenConfig(t)
	name := func(args []string) string {
		return strings.NewReplacer(broken, "broken.yaml", shipped, "callgate.yaml").Replace(strings.Join(args, " "))
	}
	named := fmt.Sprintf("worker: %s: line %d: worker.batchsize: unknown key; did you mean batch_size?\n", broken, line)

	// A stand-in for the gateway's admin API, counting what reaches it.
	var requests atomic.Int32
	var lastBody atomic.Value
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		lastBody.Store(body)
		_, _ = w.Write([]byte(`{"matched": 0}`))
	}))
	defer api.Close()
	token := "CALLGATE_ADMIN_TOKEN=ops:ops-token-0123456789"

	for _, args := range [][]string{
		{"tail", "-config", broken},
		{"-config", broken, "tail"},
		{"reconcile", "--order", "ORD-1", "-config", broken},
		{"reconcile", "--config=" + broken, "--order", "ORD-1"},
		{"replay", "-config", broken, "--since", "24h", "--dry-run"},
	} {
		t.Run("config after: "+name(args), func(t *testing.T) {
			code, _, stderr := testenv.Exec(t, bin, []string{token, "CALLGATE_ADMIN_URL=" + api.URL}, args...)
			require.Equal(t, 1, code, stderr)
			require.Contains(t, stderr, named)
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tail", "-config", shipped, "--bogus"}, "usage: worker [-config PATH] tail"},
		{[]string{"tail", "-config", shipped, "extra"}, `tail: unexpected argument "extra"`},
		{[]string{"tail", "-config"}, "flag needs an argument: -config"},
		{[]string{"reconcile", "-config", shipped}, "usage: worker [-config PATH] reconcile --order CODE"},
		{[]string{"replay", "--since", "yesterday", "--reason", "r"}, `replay: --since: "yesterday" is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration like 24h (that long ago)`},
		{[]string{"replay", "--until", "2026-02-30", "--reason", "r"}, "replay: --until:"},
		{[]string{"replay", "--since", "-24h", "--reason", "r"}, "replay: --since:"},
		{[]string{"replay", "--source", "paydemo", "now"}, `replay: unexpected argument "now"`},
		{[]string{"frob"}, `worker: unknown subcommand "frob"`},
	} {
		t.Run("usage: "+name(tc.args), func(t *testing.T) {
			code, _, stderr := testenv.Exec(t, bin, []string{token, "CALLGATE_ADMIN_URL=" + api.URL}, tc.args...)
			require.Equal(t, 2, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
	require.Zero(t, requests.Load(), "the CLI refused its arguments before asking the gateway")

	t.Run("replay takes the gateway's address from -config", func(t *testing.T) {
		_, port, err := net.SplitHostPort(strings.TrimPrefix(api.URL, "http://"))
		require.NoError(t, err)
		env := []string{token, "CALLGATE_HTTP_ADDR=:" + port}
		code, stdout, stderr := testenv.Exec(t, bin, env, "replay", "-config", shipped, "--since", "24h", "--dry-run")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "dry run: 0 callbacks match")
		require.EqualValues(t, 1, requests.Load())
		since, err := time.Parse(time.RFC3339, lastBody.Load().(map[string]any)["filter"].(map[string]any)["since"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(-24*time.Hour), since, time.Minute)
	})
}
