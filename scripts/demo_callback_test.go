package scripts

import (
	"errors"
	"fmt"
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
	// The script waited for the outcome and says it, with what was published.
	require.Contains(t, out, fmt.Sprintf("demo: callback %d SUCCESS after 1 attempt(s)", first))
	require.Contains(t, out, fmt.Sprintf("demo: notification warehouse.ship (cb%d.", first))
	require.Contains(t, out, fmt.Sprintf("demo: notification points.add (cb%d.", first))
	require.Regexp(t, `demo: notification warehouse.ship \(\S+\) SENT`, out, "the worker published it before the script printed")

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
	require.Contains(t, out, "demo: notification warehouse.cancel (", "the full refund's notifications, printed")

	// A carrier event, by default for the order created last.
	out = d.runArgs("paydemo", "ORD-2002", "700")
	require.Contains(t, out, "SUCCESS after 1 attempt(s)")
	out = d.runArgs("shipdemo")
	require.Contains(t, out, "demo: waybill WB-ORD-2002 of order ORD-2002: event 1 PICKED_UP")
	require.Regexp(t, `demo: callback \d+ SUCCESS`, out)
	var order string
	require.NoError(t, testenv.Store(t, cfg).SQL.QueryRow(
		"SELECT IFNULL(order_code, '') FROM shipments WHERE waybill_no = 'WB-ORD-2002'").Scan(&order))
	require.Equal(t, "ORD-2002", order)

	// An amount other than the order's: the warning is what happens.
	_, err := testenv.Store(t, cfg).SQL.Exec(
		"INSERT INTO orders (order_code, user_id, amount, payment_source) VALUES ('ORD-3003', 42, 1000, 'paydemo')")
	require.NoError(t, err)
	out = d.runArgs("paydemo", "ORD-3003", "999")
	require.Contains(t, out, "will report this payment as payment.exception amount_mismatch")
	require.Contains(t, out, "demo: notification payment.exception (")
	out = d.runArgs("paydemo", "ORD-3003", "999")
	require.NotContains(t, out, "amount_mismatch", "sent again, it is a duplicate, not another mismatch")
	require.Contains(t, out, `"duplicate":true`)
}

// TestDemoCallbackMistakesWriteNothing: each mistake is one line of the
// script's, and leaves no order and no callback behind.
func TestDemoCallbackMistakesWriteNothing(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	d := &demo{t: t, cfg: cfg, url: gw.URL}
	st := testenv.Store(t, cfg)
	nothingWritten := func(out string) {
		t.Helper()
		var orders, callbacks int
		require.NoError(t, st.SQL.QueryRow("SELECT (SELECT COUNT(*) FROM orders), (SELECT COUNT(*) FROM callback_log)").Scan(&orders, &callbacks))
		require.Equal(t, []int{0, 0}, []int{orders, callbacks}, "orders and callbacks after\n%s", out)
	}
	for _, c := range []struct {
		name string
		args []string
		env  []string
		code int
		says string
	}{
		{"a secret of another source", []string{"paydemo", "ORD-9"}, []string{"PAYDEMO_SECRET=whsec_" + "b3RoZXItc291cmNlLW90aGVyLWtleS0zMmJ5dGVzISE="}, 1,
			"demo: the gateway refused the signature: PAYDEMO_SECRET is not paydemo's secret on this gateway"},
		{"a secret that is not base64", []string{"paydemo", "ORD-9"}, []string{"PAYDEMO_SECRET=whsec_not*base64"}, 2,
			"demo: PAYDEMO_SECRET is not a Standard Webhooks secret (whsec_ followed by the key in base64)"},
		{"a wrong amount", []string{"paydemo", "ORD-9", "12.50"}, nil, 2, "usage: "},
		{"a database it cannot read", []string{"paydemo", "ORD-9"}, []string{"CALLGATE_MYSQL_DSN=root:@tcp(127.0.0.1:3306)/no_such_db_callgate"}, 2,
			"demo: cannot read the orders of database no_such_db_callgate on 127.0.0.1:3306"},
		{"a gateway that is not there", []string{"shipdemo"}, []string{"CALLGATE_URL=http://127.0.0.1:1"}, 2,
			"demo: cannot reach the gateway at http://127.0.0.1:1"},
		// The order created for the payment is removed whenever the
		// payment was not accepted, here because the gateway is down
		// (it was left behind, though removed after a 401).
		{"a payment to a gateway that is not there", []string{"paydemo", "ORD-9"}, []string{"CALLGATE_URL=http://127.0.0.1:1"}, 2,
			"demo: removed the order ORD-9 created for this payment\ndemo: cannot reach the gateway at http://127.0.0.1:1"},
	} {
		code, out := d.exec(c.args, c.env)
		require.Equal(t, c.code, code, "%s: exit status\n%s", c.name, out)
		require.Contains(t, out, c.says, c.name)
		nothingWritten(out)
	}
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
	code, out := d.exec(args, env)
	require.Zero(d.t, code, "demo-callback.sh exit status\n%s", out)
	return out
}

// exec runs `demo-callback.sh args...` with env added (later entries win)
// and returns its exit status and output.
func (d *demo) exec(args, env []string) (int, string) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "demo-callback.sh"), args...)
	cmd.Env = append(environWithout("CALLGATE_", "DEMO_"),
		append([]string{"CALLGATE_URL=" + d.url, "CALLGATE_MYSQL_DSN=" + d.cfg.MySQL.DSN}, env...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	require.NoError(d.t, err, "demo-callback.sh\n%s", out)
	return 0, string(out)
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
