package scripts

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// TestDemoCallbackPaysTheOrderOnce follows docs/getting-started.md's "Send a
// signed callback" on an empty database: the first run creates the demo order
// and pays it, a second run is the same payment again (answered as a
// duplicate, no possible double charge), and only DEMO_NEW_PAYMENT=1 sends
// another payment, which the worker flags.
func TestDemoCallbackPaysTheOrderOnce(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	testenv.StartWorker(t, cfg, worker.Options{})
	d := &demo{t: t, cfg: cfg, url: gw.URL}

	out := d.run()
	first := d.logID(out)
	require.Equal(t, "SUCCESS", d.waitSettled(first), "the first payment, sent before anything else existed\n%s", out)
	require.Contains(t, out, "demo: created order ORD-1001 (user 42, amount 1999)")
	require.Contains(t, out, `"duplicate":false`)
	require.Equal(t, []string{"PAID", "PAY-ORD-1001"}, d.order("ORD-1001"))

	out = d.run()
	require.Contains(t, out, "demo: order ORD-1001 exists (amount 1999, PAID by PAY-ORD-1001)")
	require.Contains(t, out, `"duplicate":true`)
	require.Equal(t, first, d.logID(out), "a re-run is the same event")
	require.Equal(t, 1, d.callbacks(), "callback_log rows after two runs")

	out = d.run("DEMO_NEW_PAYMENT=1")
	second := d.logID(out)
	require.NotEqual(t, first, second)
	require.Equal(t, "SUCCESS", d.waitSettled(second), "another payment for a paid order is reported, not failed\n%s", out)
	require.Equal(t, []string{"PAID", "PAY-ORD-1001"}, d.order("ORD-1001"))

	// The refund: part, then the rest.
	out = d.runArgs("refund", "ORD-1001", "500")
	require.Contains(t, out, "demo: refund RF-ORD-1001-500 of 500 for ORD-1001 (payment PAY-ORD-1001)")
	require.Equal(t, "SUCCESS", d.waitSettled(d.logID(out)), out)
	require.Equal(t, []string{"PARTIALLY_REFUNDED", "PAY-ORD-1001"}, d.order("ORD-1001"))
	out = d.runArgs("refund", "ORD-1001", "1499")
	require.Equal(t, "SUCCESS", d.waitSettled(d.logID(out)), out)
	require.Equal(t, []string{"REFUNDED", "PAY-ORD-1001"}, d.order("ORD-1001"))
}

// demo runs scripts/demo-callback.sh against one test's gateway and
// database.
type demo struct {
	t   *testing.T
	cfg *config.Config
	url string
}

// run runs `demo-callback.sh paydemo` with env added and returns its
// output (stdout and stderr).
func (d *demo) run(env ...string) string {
	d.t.Helper()
	return d.command([]string{"paydemo"}, env)
}

// runArgs runs `demo-callback.sh args...` and returns its output.
func (d *demo) runArgs(args ...string) string {
	d.t.Helper()
	return d.command(args, nil)
}

func (d *demo) command(args, env []string) string {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "demo-callback.sh"), args...)
	cmd.Env = append(environWithout("CALLGATE_", "DEMO_"),
		append([]string{"CALLGATE_URL=" + d.url, "CALLGATE_MYSQL_DSN=" + d.cfg.MySQL.DSN}, env...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(d.t, err, "demo-callback.sh\n%s", out)
	return string(out)
}

var logIDRe = regexp.MustCompile(`"log_id":(\d+)`)

func (d *demo) logID(out string) int64 {
	d.t.Helper()
	m := logIDRe.FindStringSubmatch(out)
	require.NotNil(d.t, m, "no log_id in\n%s", out)
	id, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(d.t, err)
	return id
}

// waitSettled waits until callback id is SUCCESS or FAILED and returns
// the status, with the error if FAILED.
func (d *demo) waitSettled(id int64) string {
	d.t.Helper()
	st := testenv.Store(d.t, d.cfg)
	var status string
	require.Eventually(d.t, func() bool {
		cb, err := st.GetCallback(d.t.Context(), id)
		require.NoError(d.t, err)
		status = string(cb.Status)
		if cb.Status.Terminal() && cb.LastError != nil {
			d.t.Logf("callback %d: %s: %s", id, status, *cb.LastError)
		}
		return cb.Status.Terminal()
	}, 20*time.Second, 20*time.Millisecond, "callback %d did not settle", id)
	return status
}

// order returns the order's payment status and payment number.
func (d *demo) order(code string) []string {
	d.t.Helper()
	var status, paymentNo string
	require.NoError(d.t, testenv.Store(d.t, d.cfg).SQL.QueryRow(
		"SELECT payment_status, IFNULL(payment_no, '') FROM orders WHERE order_code = ?", code).Scan(&status, &paymentNo))
	return []string{status, paymentNo}
}

func (d *demo) callbacks() int {
	d.t.Helper()
	var n int
	require.NoError(d.t, testenv.Store(d.t, d.cfg).SQL.QueryRow("SELECT COUNT(*) FROM callback_log").Scan(&n))
	return n
}
