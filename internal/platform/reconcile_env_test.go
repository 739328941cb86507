package platform_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/reconcile"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// reconciled is a gateway and a worker whose source reconciles against a
// platform simulator: what every reconciliation test of a payment source
// shares.
type reconciled struct {
	*testenv.Platform
	source, currency string
	// metrics is the worker's /metrics.
	metrics string
}

// startReconciled starts the preset source name (platform p) with the
// reconcile credentials set by creds and the scheduler's reconcile
// settings rc (a run every 100 ms unless rc says otherwise).
func startReconciled(t *testing.T, name, currency string, p platform.Config, rc reconcile.Config, creds func(*source.Reconcile)) *reconciled {
	t.Helper()
	r := &reconciled{source: name, currency: currency}
	r.Platform = testenv.StartPlatform(t, name, p, func(c *config.Config) {
		r.metrics = workerMetricsOn(t, c)
		for i := range c.Sources {
			if c.Sources[i].Name == name {
				creds(&c.Sources[i].Reconcile)
			}
		}
		if rc.Interval == 0 {
			rc.Interval = 100 * time.Millisecond
		}
		c.Scheduler.Reconcile = rc.WithDefaults()
	})
	return r
}

// order creates an UNPAID order paid through the source, created age ago.
func (r *reconciled) order(t *testing.T, code string, amount int64, age time.Duration) {
	t.Helper()
	r.CreateOrder(t, code, amount, r.currency)
	_, err := r.St.SQL.Exec(`UPDATE orders SET payment_source = ?, created_at = ? WHERE order_code = ?`,
		r.source, time.Now().UTC().Add(-age), code)
	require.NoError(t, err)
}

// state waits until order's reconciliation satisfies ok and returns it.
func (r *reconciled) state(t *testing.T, order string, ok func(store.ReconcileState) bool) store.ReconcileState {
	t.Helper()
	var st store.ReconcileState
	require.Eventually(t, func() bool {
		var err error
		st, err = r.St.GetReconcile(t.Context(), order)
		return err == nil && ok(st)
	}, 15*time.Second, 20*time.Millisecond, "reconciliation of %s: last %+v", order, st)
	return st
}

// waitStatus waits until order's payment status is status.
func (r *reconciled) waitStatus(t *testing.T, order, status string) payment.Order {
	t.Helper()
	var o payment.Order
	require.Eventually(t, func() bool { o = r.Order(t, order); return o.PaymentStatus == status }, 20*time.Second, 20*time.Millisecond,
		"order %s, want %s", order, status)
	return o
}
