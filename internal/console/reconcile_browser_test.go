package console_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// TestReconcilePagesInBrowser drives the on-call side of reconciliation
// in a real headless Chromium: the callbacks list filtered by origin, the
// origin on the detail page, and the Reconciliation page's unresolved
// orders (empty first, then one), each linking to its callbacks.
func TestReconcilePagesInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("\n\n*** SKIPPING THE RECONCILIATION PAGE BROWSER TEST: %s not found (%v).\n"+
			"*** Install it with: apt-get update && apt-get install -y chromium\n\n", chromiumPath, err)
	}
	t.Parallel()
	e := &pageEnv{}
	e.cfg = testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = browserActor + ":" + browserSecret + ":viewer" // reading is a viewer's
		c.Scheduler.Compensation.Interval = 100 * time.Millisecond
		c.Worker.ShutdownTimeout = 5 * time.Second
	})
	e.st = testenv.Store(t, e.cfg)
	e.gw = testenv.StartGateway(t, e.cfg)
	e.gw.WaitReady(t)
	testenv.StartWorker(t, e.cfg, worker.Options{})

	// A notification (no such order: FAILED), and a reconciliation
	// query's answer for an order that exists, of another amount: stored
	// with origin reconcile, processed, and the order stays UNPAID.
	notifyID := e.pay(t, "ORD-BR-NOTIFY", "PAY-BR-NOTIFY", 1500)
	const unresolved = "ORD-BR-UNRES"
	for _, o := range []string{unresolved, "ORD-BR-SILENT", "ORD-BR-PAID"} {
		_, err := e.st.SQL.Exec("INSERT INTO orders (order_code, user_id, amount, currency, payment_source) VALUES (?, 42, 1500, 'CNY', 'paydemo')", o)
		require.NoError(t, err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	res, err := e.st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: "query:" + unresolved + ":paid",
		BusinessKey: unresolved, Status: callback.StatusPending, Payload: testenv.PaymentBody(unresolved, "PAY-BR-UNRES", 999),
		TraceID: fmt.Sprintf("%032x", now.UnixNano()), ReceivedAt: now, NextAttemptAt: &now, Origin: callback.OriginReconcile})
	require.NoError(t, err)
	reconcileID := res.ID
	e.waitStatus(t, notifyID, callback.StatusFailed)
	require.Eventually(t, func() bool {
		l, err := e.st.GetCallback(t.Context(), reconcileID)
		require.NoError(t, err)
		return l.Status.Terminal()
	}, 20*time.Second, 20*time.Millisecond, "the reconciled callback is processed")
	var paid string
	require.NoError(t, e.st.SQL.QueryRow("SELECT payment_status FROM orders WHERE order_code = ?", unresolved).Scan(&paid))
	require.Equal(t, "UNPAID", paid, "another amount pays nothing")

	e.startBrowser(t)
	base := e.gw.URL
	e.run(t, chromedp.Navigate(base+"/admin/login"))
	e.run(t, chromedp.SendKeys(chromedp.CSS("#token"), browserSecret))
	e.clickAndWait(t, `form.login button[type=submit]`)
	require.Equal(t, base+"/admin/", e.location(t))

	// Nothing given up on yet: the page says so.
	e.clickAndWait(t, `nav a[href="/admin/reconcile"]`)
	require.Equal(t, base+"/admin/reconcile", e.location(t))
	require.Equal(t, "Reconciliation", e.text(t, "h1"))
	require.Equal(t, 1, e.count(t, `nav a[href="/admin/reconcile"].active`))
	require.Contains(t, e.text(t, "#unresolved-none"), "No unresolved orders")
	require.Zero(t, e.count(t, "table.unresolved"))
	e.noCSPViolations(t)

	// The callbacks: both, then only the reconciled one.
	e.clickAndWait(t, `nav a[href="/admin/callbacks"]`)
	require.Equal(t, 2, e.count(t, "table.callbacks tbody tr"))
	e.run(t, chromedp.SetValue(chromedp.CSS("#f-origin"), "reconcile"))
	e.clickAndWait(t, "#search")
	require.Contains(t, e.location(t), "origin=reconcile")
	require.Equal(t, 1, e.count(t, "table.callbacks tbody tr"))
	require.Equal(t, strconv.FormatInt(reconcileID, 10), e.text(t, "table.callbacks tbody a.cb-link"))
	require.Equal(t, "reconcile", e.text(t, "table.callbacks tbody td.origin"))
	require.Equal(t, "reconcile", pgEval[string](t, e, `document.querySelector("#f-origin").value`), "the filter is shown back")
	e.noCSPViolations(t)
	e.screenshot(t, "admin-callbacks-origin.png")
	e.run(t, chromedp.SetValue(chromedp.CSS("#f-origin"), "notify"))
	e.clickAndWait(t, "#search")
	require.Equal(t, 1, e.count(t, "table.callbacks tbody tr"))
	require.Equal(t, strconv.FormatInt(notifyID, 10), e.text(t, "table.callbacks tbody a.cb-link"))
	require.Equal(t, "notify", e.text(t, "table.callbacks tbody td.origin"))
	e.clickAndWait(t, "table.callbacks tbody a.cb-link")
	require.Equal(t, "notify", e.text(t, "#cb-origin"))
	e.run(t, chromedp.Navigate(fmt.Sprintf("%s/admin/callbacks/%d", base, reconcileID)))
	require.Contains(t, e.text(t, "#cb-origin"), "reconcile")
	e.noCSPViolations(t)

	// Reconciliation gives up on three orders, one of which was paid
	// meanwhile; a fourth one is still being asked about.
	_, err = e.st.SQL.Exec("UPDATE orders SET payment_status = 'PAID' WHERE order_code = 'ORD-BR-PAID'")
	require.NoError(t, err)
	_, err = e.st.SQL.Exec("INSERT INTO orders (order_code, user_id, amount, currency, payment_source) VALUES ('ORD-BR-ASKING', 42, 1500, 'CNY', 'paydemo')")
	require.NoError(t, err)
	gaveUp := time.Now().UTC().Add(-time.Minute)
	for i, r := range []store.ReconcileResult{
		{Order: unresolved, Source: "paydemo", Queries: 7, Outcome: "found", FoundLogID: reconcileID, GaveUp: true},
		{Order: "ORD-BR-SILENT", Source: "paydemo", Queries: 7, Outcome: "unreachable", Error: "dial tcp: connection refused", GaveUp: true},
		{Order: "ORD-BR-PAID", Source: "paydemo", Queries: 7, Outcome: "nothing", GaveUp: true},
		{Order: "ORD-BR-ASKING", Source: "paydemo", Queries: 2, Outcome: "unreachable", Error: "context deadline exceeded"},
	} {
		at := gaveUp.Add(-time.Duration(i) * time.Second) // the first is the most recent
		r.NextAt = at.Add(time.Hour)
		require.NoError(t, e.st.RecordReconcile(t.Context(), r, at))
	}
	// Where the platforms stand: one whose circuit is open, one asked.
	openUntil := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	require.NoError(t, e.st.SetReconcilePlatform(t.Context(), store.PlatformState{Source: "paydemo", CircuitOpenUntil: &openUntil,
		Failures: 3, CircuitOpened: 1, LastError: "context deadline exceeded"}, time.Now()))
	require.NoError(t, e.st.SetReconcilePlatform(t.Context(), store.PlatformState{Source: "shipdemo"}, time.Now()))
	e.clickAndWait(t, `nav a[href="/admin/reconcile"]`)
	require.Equal(t, 2, e.count(t, "#platforms tbody tr"))
	require.Contains(t, e.text(t, `#platforms tr.stalled[data-source="paydemo"] td.state`), "circuit open until "+openUntil.Format(time.RFC3339))
	require.Equal(t, "yes", e.text(t, `#platforms tr[data-source="shipdemo"] td.state`))
	require.Zero(t, e.count(t, "#unresolved-none"))
	require.Equal(t, 2, e.count(t, "table.unresolved tbody tr"), "neither the paid order nor the one still asked about")
	cells := pgEval[[][]string](t, e, `Array.from(document.querySelectorAll("table.unresolved tbody tr")).map(tr =>
		Array.from(tr.children).map(td => td.textContent.trim()))`)
	require.Equal(t, [][]string{
		{unresolved, "paydemo", "7", "found", "", gaveUp.Format("2006-01-02 15:04:05")},
		{"ORD-BR-SILENT", "paydemo", "7", "unreachable", "dial tcp: connection refused", gaveUp.Add(-time.Second).Format("2006-01-02 15:04:05")},
	}, cells)
	e.noCSPViolations(t)
	e.screenshot(t, "admin-reconcile.png")

	// The order's link lists its callbacks: the reconciled one.
	e.clickAndWait(t, "table.unresolved a.order-link")
	require.Equal(t, base+"/admin/callbacks?key="+unresolved, e.location(t))
	require.Equal(t, unresolved, pgEval[string](t, e, `document.querySelector("#f-key").value`))
	require.Equal(t, 1, e.count(t, "table.callbacks tbody tr"))
	require.Equal(t, strconv.FormatInt(reconcileID, 10), e.text(t, "table.callbacks tbody a.cb-link"))
	require.Equal(t, "reconcile", e.text(t, "table.callbacks tbody td.origin"))
	e.noCSPViolations(t)
}
