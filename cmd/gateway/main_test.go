package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
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

// shippedWith is the shipped config with old replaced by new once, and
// the line of the replacement.
func shippedWith(t *testing.T, old, new string) (body string, line int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml"))
	require.NoError(t, err)
	i := strings.Index(string(raw), old)
	require.GreaterOrEqual(t, i, 0, "%q not in the shipped config", old)
	return string(raw[:i]) + new + string(raw[i+len(old):]), strings.Count(string(raw[:i]), "\n") + 1
}

// TestBinaryErrorsSayWhatIsWrong builds the gateway and checks that each
// mistake is named (the setting, its line, the flag), with exit status 2
// for a usage error and 1 for a bad config, and that a migrate refused
// for its config writes nothing.
func TestBinaryErrorsSayWhatIsWrong(t *testing.T) {
	bin := testenv.Self(t)

	// A database that does not exist yet: migrate would create it.
	c, err := mysql.ParseDSN(testenv.MySQLServerDSN())
	require.NoError(t, err)
	c.DBName = "callgate_t_" + testenv.Suffix()
	dsn := c.FormatDSN()
	root, err := sql.Open("mysql", testenv.MySQLServerDSN())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = root.Exec("DROP DATABASE IF EXISTS `" + c.DBName + "`")
		root.Close()
	})
	tables := func() int {
		var n int
		require.NoError(t, root.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?", c.DBName).Scan(&n))
		return n
	}
	env := []string{"CALLGATE_MYSQL_DSN=" + dsn}

	t.Run("unknown key after migrate", func(t *testing.T) {
		body, line := shippedWith(t, "  batch_size: 64\n", "  batchsize: 64\n")
		broken := writeConfig(t, body)
		code, _, stderr := testenv.Exec(t, bin, env, "migrate", "-config", broken)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, fmt.Sprintf("gateway: %s: line %d: worker.batchsize: unknown key; did you mean batch_size?\n", broken, line))
		require.Zero(t, tables(), "nothing written")
		var schemas int
		require.NoError(t, root.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", c.DBName).Scan(&schemas))
		require.Zero(t, schemas, "not even the database created")
	})
	t.Run("wrong type", func(t *testing.T) {
		body, line := shippedWith(t, "  batch_size: 64\n", "  batch_size: \"ten\"\n")
		broken := writeConfig(t, body)
		code, _, stderr := testenv.Exec(t, bin, env, "-config", broken, "migrate")
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, fmt.Sprintf(`gateway: %s: line %d: worker.batch_size: want a whole number, got "ten"`, broken, line))
		require.NotContains(t, stderr, "unmarshal", "no Go type names")
	})
	t.Run("malformed CALLGATE_MYSQL_DSN", func(t *testing.T) {
		code, _, stderr := testenv.Exec(t, bin, []string{"CALLGATE_MYSQL_DSN=root:pw@tcp(127.0.0.1:3306)" + c.DBName}, "migrate")
		require.Equal(t, 1, code, stderr)
		require.Equal(t, "gateway: CALLGATE_MYSQL_DSN: mysql.dsn: invalid DSN: missing the slash separating the database name\n", stderr)
	})
	t.Run("malformed mysql.dsn in the file", func(t *testing.T) {
		body, line := shippedWith(t, `dsn: "root:@tcp(127.0.0.1:3306)/callgate"`, `dsn: "root:@tcp(127.0.0.1:3306)callgate"`)
		broken := writeConfig(t, body)
		code, _, stderr := testenv.Exec(t, bin, nil, "migrate", "-config="+broken)
		require.Equal(t, 1, code, stderr)
		require.Equal(t, fmt.Sprintf("gateway: %s: line %d: mysql.dsn: invalid DSN: missing the slash separating the database name\n", broken, line), stderr)
	})
	for _, args := range [][]string{{"migrate", "-verbose"}, {"migrate", "now"}, {"serve", "-config"}, {"launch"}, {"serve", "--create"}} {
		t.Run("usage "+strings.Join(args, " "), func(t *testing.T) {
			code, _, stderr := testenv.Exec(t, bin, env, args...)
			require.Equal(t, 2, code, stderr)
			require.Contains(t, stderr, "usage: gateway [-config PATH] [serve|migrate [--create]] [-config PATH]")
		})
	}
	require.Zero(t, tables(), "nothing written")

	// The database does not exist (a typo in its name looks the same):
	// migrate says so, naming the setting and where its value came from,
	// and creates nothing; --create creates it.
	shipped := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	code, _, stderr := testenv.Exec(t, bin, env, "migrate", "-config", shipped)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, `gateway: CALLGATE_MYSQL_DSN: mysql.dsn: database \"`+c.DBName+`\" does not exist (MySQL at `+c.Addr+`): `+
		"fix the name, or create it with `gateway migrate --create`")
	require.NotContains(t, stderr, "schema up to date")
	var schemas int
	require.NoError(t, root.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", c.DBName).Scan(&schemas))
	require.Zero(t, schemas, "the database was created without --create")

	// The same database, the shipped config named after migrate: applied.
	code, _, stderr = testenv.Exec(t, bin, env, "migrate", "-config", shipped, "--create")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "schema up to date")
	require.NotZero(t, tables())
	code, _, stderr = testenv.Exec(t, bin, env, "migrate", "-config", shipped)
	require.Equal(t, 0, code, "an existing database needs no --create: %s", stderr)
}

// TestBinaryStartNamesTheRefusedSetting builds the gateway and starts it
// with what MySQL or RabbitMQ refuses, and on an address already taken:
// each stops it at start with exit status 1 and one ERROR line that names
// the setting and where its value came from, never the password, before
// anything is served (no "listening" line).
func TestBinaryStartNamesTheRefusedSetting(t *testing.T) {
	bin := testenv.Self(t)
	cfg := testenv.Config(t) // a migrated database, a fresh prefix
	shipped := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	const password = "not-the-password-0123"
	c, err := mysql.ParseDSN(cfg.MySQL.DSN)
	require.NoError(t, err)
	wrongPassword := *c
	wrongPassword.Passwd = password
	unknownDB := *c
	unknownDB.DBName = "callgate_t_none_" + testenv.Suffix()
	wrongAMQP := strings.Replace(cfg.AMQP.URL, "guest:guest@", "guest:"+password+"@", 1)
	require.NotEqual(t, cfg.AMQP.URL, wrongAMQP, "the test broker's URL is guest:guest@")

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()

	env := func(kv ...string) []string {
		base := map[string]string{"CALLGATE_MYSQL_DSN": cfg.MySQL.DSN, "CALLGATE_AMQP_URL": cfg.AMQP.URL,
			"CALLGATE_AMQP_PREFIX": cfg.AMQP.Prefix, "CALLGATE_HTTP_ADDR": "127.0.0.1:0"}
		for i := 0; i+1 < len(kv); i += 2 {
			base[kv[i]] = kv[i+1]
		}
		var out []string
		for k, v := range base {
			out = append(out, k+"="+v)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"MySQL wrong password", env("CALLGATE_MYSQL_DSN", wrongPassword.FormatDSN()),
			[]string{`gateway: CALLGATE_MYSQL_DSN: mysql.dsn: MySQL at ` + c.Addr + ` refused user \"` + c.User + `\": wrong user or password`}},
		{"MySQL unknown database", env("CALLGATE_MYSQL_DSN", unknownDB.FormatDSN()),
			[]string{`gateway: CALLGATE_MYSQL_DSN: mysql.dsn: database \"` + unknownDB.DBName + `\" does not exist (MySQL at ` + c.Addr + `)`}},
		{"AMQP wrong password", env("CALLGATE_AMQP_URL", wrongAMQP),
			[]string{`gateway: CALLGATE_AMQP_URL: amqp.url: RabbitMQ at `, `refused user \"guest\": wrong user or password`}},
		{"address in use", env("CALLGATE_HTTP_ADDR", taken.Addr().String()),
			[]string{`gateway: CALLGATE_HTTP_ADDR: http.addr: listen ` + taken.Addr().String() +
				`: address already in use; set http.addr (or CALLGATE_HTTP_ADDR) to a free address`}},
		// Every listener is moved by a variable, and an address in use
		// names it.
		{"admin address in use", env("CALLGATE_HTTP_ADMIN_ADDR", taken.Addr().String()),
			[]string{`gateway: CALLGATE_HTTP_ADMIN_ADDR: http.admin_addr: listen ` + taken.Addr().String() +
				`: address already in use; set http.admin_addr (or CALLGATE_HTTP_ADMIN_ADDR) to a free address`}},
		{"profiler address in use", env("CALLGATE_HTTP_PPROF_ADDR", taken.Addr().String()),
			[]string{`gateway: CALLGATE_HTTP_PPROF_ADDR: http.pprof_addr: listen ` + taken.Addr().String() +
				`: address already in use; set http.pprof_addr (or CALLGATE_HTTP_PPROF_ADDR) to a free address`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := testenv.Exec(t, bin, tc.env, "-config", shipped)
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
			require.NotContains(t, stderr, "gateway: listening", "nothing served")
		})
	}

	t.Run("the file's line when the value is the file's", func(t *testing.T) {
		body, line := shippedWith(t, `dsn: "root:@tcp(127.0.0.1:3306)/callgate"`, `dsn: "`+wrongPassword.FormatDSN()+`"`)
		p := writeConfig(t, body)
		e := env()
		for i, kv := range e {
			if strings.HasPrefix(kv, "CALLGATE_MYSQL_DSN=") {
				e = append(e[:i], e[i+1:]...)
				break
			}
		}
		code, _, stderr := testenv.Exec(t, bin, e, "-config", p)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, fmt.Sprintf(`gateway: %s: line %d: mysql.dsn: MySQL at %s refused user`, p, line, c.Addr))
		require.NotContains(t, stderr, password)
	})
}

// TestMain makes this test binary the command too, for the tests that
// run it as a process (testenv.Self, testenv.Exec).
func TestMain(m *testing.M) { testenv.RunMainOrTests(m, main) }
