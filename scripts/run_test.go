// Package scripts holds the tests of the shell scripts beside them, run for
// real the way a user runs them: run.sh with the built binaries,
// demo-callback.sh against a running gateway and worker, vulncheck.sh's
// summary on saved govulncheck reports. There is no Go code to import here.
package scripts

import (
	"database/sql"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/testenv"
)

// TestRunStopsGracefully runs scripts/run.sh as `make run` does, in a
// process group of its own like a terminal's foreground job, and stops it
// the two ways a user does: Ctrl-C (SIGINT to the whole group) and SIGTERM
// to the script alone. A payment callback is in flight when the signal
// comes (its order row is locked by the test until the worker says it is
// stopping). Either way the callback is finished, both processes log their
// graceful stop and exit 0, and the worker gives the scheduler lease up.
func TestRunStopsGracefully(t *testing.T) {
	t.Parallel()
	dir := buildBinaries(t)
	for _, tc := range []struct {
		name string
		stop func(pgid int) error
	}{
		// The terminal sends SIGINT to every process of the foreground job.
		{"CtrlC", func(pgid int) error { return syscall.Kill(-pgid, syscall.SIGINT) }},
		// A supervisor or `kill PID` signals the script only.
		{"TermToScript", func(pgid int) error { return syscall.Kill(pgid, syscall.SIGTERM) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRun(t, dir)
			url := r.waitRunning(t)

			// Hold the order's row so that the worker's transaction waits
			// on it: the callback is in flight when the signal comes.
			order := testenv.CreateOrders(t, r.cfg, "run", 1)[0]
			tx, err := r.db.Begin()
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			_, err = tx.Exec("SELECT order_code FROM orders WHERE order_code = ? FOR UPDATE", order)
			require.NoError(t, err)
			body := testenv.PaymentBody(order, "PAY-"+order, 1000)
			a := testenv.Post(t, url, "paydemo", body, testenv.PaydemoHeaders(t, r.cfg, "msg_run_"+testenv.Suffix(), time.Now(), body))
			require.Equal(t, http.StatusOK, a.Status, string(a.Body))
			r.waitLockWait(t, 30*time.Second)

			require.NoError(t, tc.stop(r.cmd.Process.Pid))
			require.Eventually(t, func() bool {
				return strings.Contains(r.output(t), `"msg":"worker: stopping, waiting for in-flight callbacks"`)
			}, 30*time.Second, 20*time.Millisecond, "the worker did not start stopping")
			require.NoError(t, tx.Rollback())
			code := r.wait(t, time.Minute)

			// Every expectation is checked (assert, not require) so that a
			// failure shows the whole picture.
			out := r.output(t)
			for _, want := range []string{`"msg":"gateway: stopped"`, `"msg":"worker: stopped"`} {
				assert.Contains(t, out, want, "graceful stop logged")
			}
			assert.NotContains(t, out, "second signal", "a process took a signal as its second and exited at once")
			assert.Equal(t, 0, r.leases(t), "scheduler_lease rows left (the worker did not release the lease)")
			cb, err := testenv.Store(t, r.cfg).GetCallback(t.Context(), a.LogID)
			require.NoError(t, err)
			assert.Equal(t, callback.StatusSuccess, cb.Status, "the callback in flight at the signal was finished")
			for _, want := range []string{"callgate: gateway exited with status 0", "callgate: worker exited with status 0"} {
				assert.Contains(t, out, want, "exit status reported by run.sh")
			}
			assert.Equal(t, 0, code, "run.sh exit status")
		})
	}
}

// TestRunStartsTheWorkerFirst: `make run` on a machine where something
// else holds the worker's metrics port (9090 is Prometheus's own) used to
// print the gateway's "listening" and its console banner, then lose the
// worker. Now the worker starts first: when it cannot, the gateway is not
// started (no "listening", no banner), and run.sh's last line says why,
// with the setting and the variable that move the port.
func TestRunStartsTheWorkerFirst(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	addr := taken.Addr().String()

	r := startRun(t, buildBinaries(t), "CALLGATE_WORKER_METRICS_ADDR="+addr)
	code := r.wait(t, time.Minute)
	out := r.output(t)
	require.Equal(t, 1, code, "run.sh exit status\n%s", out)
	require.NotContains(t, out, "gateway: listening", "the gateway was started")
	require.NotContains(t, out, "the console is at", "the console banner was printed")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Equal(t, "callgate: the worker did not start (status 1), so neither did the gateway: "+
		"worker: CALLGATE_WORKER_METRICS_ADDR: worker.metrics_addr: listen "+addr+": address already in use; "+
		"set worker.metrics_addr (or CALLGATE_WORKER_METRICS_ADDR) to a free address", lines[len(lines)-1], "the last line")
}

// buildBinaries builds the gateway and the worker into dir/bin, where
// run.sh looks for them, and returns dir.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(goTool(), "build", "-trimpath", "-o", filepath.Join(dir, "bin")+"/", "./cmd/gateway", "./cmd/worker")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build\n%s", out)
	return dir
}

// TestQuickStart follows the README's quick start on what `make run`
// starts (run.sh, the shipped file, demo mode, no admin token): the
// gateway prints the console's URL and the demo token, the demo script's
// payment is processed and printed, and the console and its API show it
// with the printed token.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	r := startRun(t, buildBinaries(t))
	url := r.waitRunning(t)
	var console, token string
	require.Eventually(t, func() bool {
		for line := range strings.Lines(r.output(t)) {
			var l struct{ Msg, URL, Token string }
			if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "gateway: demo: the console is at ") {
				console, token = l.URL, l.Token
			}
		}
		return console != ""
	}, 10*time.Second, 20*time.Millisecond, "no console line")
	require.Equal(t, url+"/admin/", console)

	d := &demo{t: t, cfg: r.cfg, url: url}
	out := d.runArgs("paydemo", "ORD-1001", "1999")
	id := d.logID(out)
	require.Contains(t, out, "SUCCESS after 1 attempt(s)")
	require.Contains(t, out, "demo: notification warehouse.ship (")

	resp, err := http.Get(console + "login")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the console's login page")
	var got struct {
		Status  string
		Lineage []struct {
			RoutingKey string `json:"routing_key"`
		}
	}
	require.Equal(t, http.StatusOK, testenv.AdminCall(t, url, http.MethodGet, "/admin/api/callbacks/"+strconv.FormatInt(id, 10), token, nil, &got))
	require.Equal(t, "SUCCESS", got.Status)
	require.Len(t, got.Lineage, 2, "the notifications it produced, as the console's callback page shows them")
	require.Contains(t, r.output(t), `"msg":"worker: batch processed"`, "the worker said it processed something")
}

// run is one scripts/run.sh process and its database.
type run struct {
	cfg *config.Config
	cmd *exec.Cmd
	log string
	db  *sql.DB
}

// startRun starts scripts/run.sh from dir on a fresh database and prefix,
// in a new process group, logging to a file; env is added to its
// environment (and wins).
func startRun(t *testing.T, dir string, env ...string) *run {
	t.Helper()
	cfg := testenv.Config(t)
	db, err := sql.Open("mysql", cfg.MySQL.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	// The shipped file, with the worker's metrics on a free port: 9090
	// may be taken by another worker on this machine.
	cfgPath := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")

	logPath := filepath.Join(t.TempDir(), "run.log")
	f, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })

	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "run.sh"), cfgPath)
	cmd.Dir = dir
	cmd.Env = append(environWithout("CALLGATE_"),
		"CALLGATE_MYSQL_DSN="+cfg.MySQL.DSN,
		"CALLGATE_AMQP_URL="+cfg.AMQP.URL,
		"CALLGATE_AMQP_PREFIX="+cfg.AMQP.Prefix,
		"CALLGATE_HTTP_ADDR=127.0.0.1:0",
		"CALLGATE_WORKER_METRICS_ADDR=127.0.0.1:0",
		"CALLGATE_DEMO=1", // as make run sets it
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	r := &run{cfg: cfg, cmd: cmd, log: logPath, db: db}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("run.sh output:\n%s", r.output(t))
		}
	})
	return r
}

// waitRunning waits until the gateway listens, the worker has started and
// holds the scheduler lease (so that releasing it can be checked), and
// returns the gateway's URL.
func (r *run) waitRunning(t *testing.T) string {
	t.Helper()
	var addr string
	require.Eventually(t, func() bool {
		out := r.output(t)
		for line := range strings.Lines(out) {
			var l struct{ Msg, Public string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "gateway: listening" {
				addr = l.Public
			}
		}
		return addr != "" && strings.Contains(out, `"msg":"worker: started"`) && r.leases(t) == 1
	}, 30*time.Second, 20*time.Millisecond, "gateway and worker did not come up with the lease held")
	return "http://" + addr
}

// wait waits for run.sh to exit and returns its status; past timeout it
// kills the group and fails.
func (r *run) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case <-done:
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		require.FailNow(t, "run.sh did not stop", "%s", r.output(t))
		return -1
	}
}

func (r *run) output(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(r.log)
	require.NoError(t, err)
	return string(raw)
}

// waitLockWait waits until a transaction of this test's database waits
// for a row lock. It polls every 200 ms, not faster: InnoDB refreshes what
// information_schema.innodb_trx shows only when it was last read more than
// 100 ms before, so faster polling keeps reading the first snapshot.
func (r *run) waitLockWait(t *testing.T, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := r.db.QueryRow(`SELECT COUNT(*) FROM information_schema.innodb_trx x
			JOIN information_schema.processlist p ON p.id = x.trx_mysql_thread_id
			WHERE x.trx_state = 'LOCK WAIT' AND p.db = DATABASE()`).Scan(&n)
		return err == nil && n > 0
	}, timeout, 200*time.Millisecond, "the worker never waited on the order's row")
}

func (r *run) leases(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, r.db.QueryRow("SELECT COUNT(*) FROM scheduler_lease").Scan(&n))
	return n
}

// environWithout is the test's environment minus the variables starting
// with any of prefixes, so the shell running the tests cannot change what
// the scripts and processes see.
func environWithout(prefixes ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}
