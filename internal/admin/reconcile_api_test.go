package admin_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

const reconcileViewerToken = "watcher-token-0123456789"

// reconciledPayment stores, as reconciliation does (origin reconcile), a
// paydemo payment answer for order, due at once: the worker processes it
// like any callback. It returns its id.
func (e *apiEnv) reconciledPayment(t *testing.T, order string, amount int64) int64 {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	res, err := e.st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: "query:" + order + ":paid",
		BusinessKey: order, Status: callback.StatusPending, Payload: testenv.PaymentBody(order, "PAY-"+order, amount),
		TraceID: fmt.Sprintf("%032x", now.UnixNano()), ReceivedAt: now, NextAttemptAt: &now, Origin: callback.OriginReconcile})
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	return res.ID
}

// TestAdminOriginFilter: origin=reconcile lists only the callbacks
// reconciliation stored, origin=notify only the others, the origin is in
// the list and the detail, a bad origin is a 400 with the reason, and a
// bulk replay's dry run counts with the same filter.
func TestAdminOriginFilter(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	notified := e.failedPayment(t, "ORD-ORIGIN-N", 1500)
	reconciled := e.reconciledPayment(t, "ORD-ORIGIN-R", 1500)
	e.waitStatus(t, reconciled, callback.StatusFailed) // no such order

	type page struct {
		Items []struct {
			ID     int64  `json:"id"`
			Origin string `json:"origin"`
		} `json:"items"`
	}
	ids := func(p page) []int64 {
		var out []int64
		for _, it := range p.Items {
			out = append(out, it.ID)
		}
		return out
	}
	var all, rec, ntf page
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks", opsToken, nil, &all))
	require.ElementsMatch(t, []int64{notified, reconciled}, ids(all))
	for _, it := range all.Items {
		want := map[int64]string{notified: "notify", reconciled: "reconcile"}[it.ID]
		require.Equal(t, want, it.Origin, "callback %d", it.ID)
	}
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks?origin=reconcile", opsToken, nil, &rec))
	require.Equal(t, []int64{reconciled}, ids(rec))
	require.Equal(t, "reconcile", rec.Items[0].Origin)
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks?origin=notify&status=FAILED", opsToken, nil, &ntf))
	require.Equal(t, []int64{notified}, ids(ntf))
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks?origin=reconcile&key=ORD-ORIGIN-N", opsToken, nil, &rec))
	require.Empty(t, rec.Items, "the filters combine")

	for _, bad := range []string{"RECONCILE", "query", "notify,reconcile"} {
		var errBody map[string]string
		require.Equal(t, http.StatusBadRequest, e.call(t, "GET", "/admin/api/callbacks?origin="+bad, opsToken, nil, &errBody), bad)
		require.Equal(t, "origin: want notify or reconcile", errBody["error"])
	}

	var d struct {
		ID     int64  `json:"id"`
		Origin string `json:"origin"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", reconciled), opsToken, nil, &d))
	require.Equal(t, "reconcile", d.Origin)
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", notified), opsToken, nil, &d))
	require.Equal(t, "notify", d.Origin)

	// The bulk replay selects with the same filter: its dry run counts
	// what the list shows.
	var dry struct {
		Matched int `json:"matched"`
		Sample  []struct {
			ID     int64  `json:"id"`
			Origin string `json:"origin"`
		} `json:"sample"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "POST", "/admin/api/replays", opsToken,
		map[string]any{"filter": map[string]any{"origin": "reconcile"}, "dry_run": true}, &dry))
	require.Equal(t, 1, dry.Matched)
	require.Len(t, dry.Sample, 1)
	require.Equal(t, reconciled, dry.Sample[0].ID)
	require.Equal(t, "reconcile", dry.Sample[0].Origin)
	var errBody map[string]string
	require.Equal(t, http.StatusBadRequest, e.call(t, "POST", "/admin/api/replays", opsToken,
		map[string]any{"filter": map[string]any{"origin": "elsewhere"}, "dry_run": true}, &errBody))
	require.Contains(t, errBody["error"], "origin must be notify or reconcile")
}

// TestAdminUnresolved: GET /admin/api/reconcile/unresolved lists the
// orders reconciliation gave up on that are still UNPAID, to a viewer
// too, and not a paid one or one still being asked about.
func TestAdminUnresolved(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + opsToken + ",watcher:" + reconcileViewerToken + ":viewer"
	})
	type answer struct {
		Orders []struct {
			OrderCode   string    `json:"order_code"`
			Source      string    `json:"source"`
			Queries     int       `json:"queries"`
			LastOutcome string    `json:"last_outcome"`
			LastError   *string   `json:"last_error"`
			GaveUpAt    time.Time `json:"gave_up_at"`
			NextAt      time.Time `json:"next_at"`
		} `json:"orders"`
		Count     int `json:"count"`
		Platforms []struct {
			Source           string     `json:"source"`
			Stalled          string     `json:"stalled"`
			PausedUntil      *time.Time `json:"paused_until"`
			PauseReason      string     `json:"pause_reason"`
			CircuitOpenUntil *time.Time `json:"circuit_open_until"`
		} `json:"platforms"`
	}
	var empty answer
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/reconcile/unresolved", reconcileViewerToken, nil, &empty))
	require.NotNil(t, empty.Orders, "an empty list, not null")
	require.Empty(t, empty.Orders)
	require.Zero(t, empty.Count)

	for _, code := range []string{"ORD-UNRES-1", "ORD-UNRES-2", "ORD-UNRES-PAID", "ORD-UNRES-ASKING"} {
		e.createOrder(t, code, 1500, "CNY")
	}
	require.NoError(t, e.st.DB.Exec("UPDATE orders SET payment_status = 'PAID' WHERE order_code = 'ORD-UNRES-PAID'").Error)
	gaveUp := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	next := gaveUp.Add(24 * time.Hour)
	record := func(order, outcome, errText string, queries int, give bool, at time.Time) {
		t.Helper()
		require.NoError(t, e.st.RecordReconcile(t.Context(), store.ReconcileResult{Order: order, Source: "wechatpay", Queries: queries,
			Outcome: outcome, Error: errText, NextAt: next, GaveUp: give}, at))
	}
	record("ORD-UNRES-1", "unreachable", "context deadline exceeded", 7, true, gaveUp)
	record("ORD-UNRES-2", "nothing", "", 8, true, gaveUp.Add(time.Minute))
	record("ORD-UNRES-PAID", "nothing", "", 7, true, gaveUp)
	record("ORD-UNRES-ASKING", "unreachable", "context deadline exceeded", 2, false, gaveUp)

	var a answer
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/reconcile/unresolved", reconcileViewerToken, nil, &a))
	require.Equal(t, 2, a.Count)
	require.Len(t, a.Orders, 2)
	require.Equal(t, "ORD-UNRES-2", a.Orders[0].OrderCode, "the most recently given up on first")
	require.Nil(t, a.Orders[0].LastError)
	o := a.Orders[1]
	require.Equal(t, "ORD-UNRES-1", o.OrderCode)
	require.Equal(t, "wechatpay", o.Source)
	require.Equal(t, 7, o.Queries)
	require.Equal(t, "unreachable", o.LastOutcome)
	require.NotNil(t, o.LastError)
	require.Equal(t, "context deadline exceeded", *o.LastError)
	require.True(t, gaveUp.Equal(o.GaveUpAt), "gave_up_at %s, want %s", o.GaveUpAt, gaveUp)
	require.True(t, next.Equal(o.NextAt), "next_at %s, want %s", o.NextAt, next)

	// The limit bounds the list; the count stays the whole.
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/reconcile/unresolved?limit=1", opsToken, nil, &a))
	require.Len(t, a.Orders, 1)
	require.Equal(t, "ORD-UNRES-2", a.Orders[0].OrderCode)
	require.Equal(t, 2, a.Count)
	for _, bad := range []string{"0", "501", "ten"} {
		var errBody map[string]string
		require.Equal(t, http.StatusBadRequest, e.call(t, "GET", "/admin/api/reconcile/unresolved?limit="+bad, opsToken, nil, &errBody), bad)
		require.Equal(t, "limit: want 1..500", errBody["error"])
	}
	require.Equal(t, http.StatusUnauthorized, e.call(t, "GET", "/admin/api/reconcile/unresolved", "", nil, nil))

	// Paid since (a late notification, a replay): off the list.
	require.NoError(t, e.st.DB.Exec("UPDATE orders SET payment_status = 'PAID' WHERE order_code = 'ORD-UNRES-2'").Error)
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/reconcile/unresolved", opsToken, nil, &a))
	require.Len(t, a.Orders, 1)
	require.Equal(t, "ORD-UNRES-1", a.Orders[0].OrderCode)
	require.Equal(t, 1, a.Count)

	// A FAILED order (a failed attempt) given up on is listed too.
	require.NoError(t, e.st.DB.Exec("UPDATE orders SET payment_status = 'FAILED' WHERE order_code = 'ORD-UNRES-2'").Error)
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/reconcile/unresolved", opsToken, nil, &a))
	require.Equal(t, 2, a.Count)

	// Where each platform stands: a paused one says why and until when.
	require.Empty(t, a.Platforms)
	until := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	require.NoError(t, e.st.SetReconcilePlatform(t.Context(), store.PlatformState{Source: "wechatpay", PausedUntil: &until,
		PauseReason: `HTTP 429, Retry-After "3600"`}, time.Now()))
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/reconcile/unresolved", reconcileViewerToken, nil, &a))
	require.Len(t, a.Platforms, 1)
	p := a.Platforms[0]
	require.Equal(t, "wechatpay", p.Source)
	require.Equal(t, `paused until `+until.Format(time.RFC3339)+` (HTTP 429, Retry-After "3600")`, p.Stalled)
	require.True(t, until.Equal(*p.PausedUntil))
	require.Nil(t, p.CircuitOpenUntil)
}
