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

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/demo"
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
	bin := testenv.Self(t)
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

// TestBinaryStartNamesTheRefusedSetting builds the worker and starts it
// with what MySQL or RabbitMQ refuses, and with its metrics on an address
// already taken: each stops it at start with exit status 1 and one ERROR
// line that names the setting and where its value came from, never the
// password, before it consumes ("worker: started" is not logged).
func TestBinaryStartNamesTheRefusedSetting(t *testing.T) {
	bin := testenv.Self(t)
	cfg := testenv.Config(t)
	// The shipped file, with the worker's metrics on a free port (9090 may
	// be another worker's on this machine).
	cfgPath := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()

	const password = "not-the-password-0123"
	c, err := mysql.ParseDSN(cfg.MySQL.DSN)
	require.NoError(t, err)
	wrongPassword := *c
	wrongPassword.Passwd = password
	unknownDB := *c
	unknownDB.DBName = "callgate_t_none_" + testenv.Suffix()
	wrongAMQP := strings.Replace(cfg.AMQP.URL, "guest:guest@", "guest:"+password+"@", 1)
	require.NotEqual(t, cfg.AMQP.URL, wrongAMQP, "the test broker's URL is guest:guest@")
	env := func(dsn, url string, more ...string) []string {
		return append([]string{"CALLGATE_MYSQL_DSN=" + dsn, "CALLGATE_AMQP_URL=" + url, "CALLGATE_AMQP_PREFIX=" + cfg.AMQP.Prefix,
			"CALLGATE_WORKER_METRICS_ADDR=127.0.0.1:0"}, more...)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"MySQL wrong password", env(wrongPassword.FormatDSN(), cfg.AMQP.URL),
			[]string{`worker: CALLGATE_MYSQL_DSN: mysql.dsn: MySQL at ` + c.Addr + ` refused user \"` + c.User + `\": wrong user or password`}},
		{"MySQL unknown database", env(unknownDB.FormatDSN(), cfg.AMQP.URL),
			[]string{`worker: CALLGATE_MYSQL_DSN: mysql.dsn: database \"` + unknownDB.DBName + `\" does not exist (MySQL at ` + c.Addr + `)`}},
		{"AMQP wrong password", env(cfg.MySQL.DSN, wrongAMQP),
			[]string{`worker: CALLGATE_AMQP_URL: amqp.url: RabbitMQ at `, `refused user \"guest\": wrong user or password`}},
		{"metrics address in use", env(cfg.MySQL.DSN, cfg.AMQP.URL, "CALLGATE_WORKER_METRICS_ADDR="+taken.Addr().String()),
			[]string{`worker: CALLGATE_WORKER_METRICS_ADDR: worker.metrics_addr: listen ` + taken.Addr().String() +
				`: address already in use; set worker.metrics_addr (or CALLGATE_WORKER_METRICS_ADDR) to a free address`}},
		{"profiler address in use", env(cfg.MySQL.DSN, cfg.AMQP.URL, "CALLGATE_WORKER_PPROF_ADDR="+taken.Addr().String()),
			[]string{`worker: CALLGATE_WORKER_PPROF_ADDR: worker.pprof_addr: listen ` + taken.Addr().String() +
				`: address already in use; set worker.pprof_addr (or CALLGATE_WORKER_PPROF_ADDR) to a free address`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := testenv.Exec(t, bin, tc.env, "-config", cfgPath)
			require.Equal(t, 1, code, stderr)
			var errorLines []string
			for line := range strings.Lines(stderr) {
				if strings.Contains(line, `"level":"ERROR"`) {
					errorLines = append(errorLines, line)
				}
			}
			require.Len(t, errorLines, 1, "one ERROR line:\n%s", stderr)
			for _, want := range tc.want {
				require.Contains(t, errorLines[0], want)
			}
			require.NotContains(t, stderr, password)
			require.NotContains(t, stderr, "worker: started", "nothing consumed")
		})
	}
}

// TestBinaryReplayWithTheDemoToken: against the gateway `make run` starts
// (demo mode, no admin token configured), `worker replay` works at once
// without CALLGATE_ADMIN_TOKEN, with the demo token; a gateway with tokens
// of its own refuses it, and the CLI says what to set.
func TestBinaryReplayWithTheDemoToken(t *testing.T) {
	bin := testenv.Self(t)
	t.Setenv("CALLGATE_DEMO", "1")
	t.Setenv("CALLGATE_ADMIN_TOKEN", "")
	cfg := testenv.Config(t) // the shipped file, as make run reads it
	require.Equal(t, demo.AdminToken, cfg.Admin.Token)
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	code, stdout, stderr := testenv.Exec(t, bin, []string{"CALLGATE_ADMIN_URL=" + gw.URL}, "replay", "--since", "24h", "--reason", "trying it", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "dry run: 0 callbacks match")

	own := testenv.Config(t, func(c *config.Config) { c.Admin.Token = "ops:a-token-of-our-own" })
	gw = testenv.StartGateway(t, own)
	gw.WaitReady(t)
	code, _, stderr = testenv.Exec(t, bin, []string{"CALLGATE_ADMIN_URL=" + gw.URL}, "replay", "--since", "24h", "--reason", "trying it", "--dry-run")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "replay: the gateway refused the demo admin token (HTTP 401): it works only with a gateway in demo mode, as make run starts it; set CALLGATE_ADMIN_TOKEN")
	code, stdout, stderr = testenv.Exec(t, bin, []string{"CALLGATE_ADMIN_URL=" + gw.URL, "CALLGATE_ADMIN_TOKEN=ops:a-token-of-our-own"}, "replay", "--since", "24h", "--reason", "trying it", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "dry run: 0 callbacks match")
}

// TestMain makes this test binary the command too, for the tests that
// run it as a process (testenv.Self, testenv.Exec).
func TestMain(m *testing.M) { testenv.RunMainOrTests(m, main) }
