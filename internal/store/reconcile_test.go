package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestDueReconcilesWaitsForWhatWasFound: an order whose last answer stored
// a callback is not due again while that callback is PENDING (asking
// again would find the same thing: under load, a short backoff asked
// Alipay three times about one payment and counted it found three times);
// once the callback is settled and the order still UNPAID, it is due.
func TestDueReconcilesWaitsForWhatWasFound(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, code := range []string{"RC-DUE-FOUND", "RC-DUE-OTHER"} {
		_, err := st.SQL.Exec(`INSERT INTO orders (order_code, user_id, amount, currency, payment_source, created_at) VALUES (?, 7, 100, 'CNY', 'wechatpay', ?)`,
			code, now.Add(-time.Hour))
		require.NoError(t, err)
	}
	res, err := st.InsertCallback(ctx, &callback.Log{Source: "wechatpay", Kind: callback.KindPayment, EventID: "query:RC-DUE-FOUND:SUCCESS:1",
		BusinessKey: "RC-DUE-FOUND", Status: callback.StatusPending, Payload: []byte(`{}`), ReceivedAt: now, Origin: callback.OriginReconcile})
	require.NoError(t, err)
	for _, r := range []store.ReconcileResult{
		{Order: "RC-DUE-FOUND", Source: "wechatpay", Queries: 1, Outcome: "found", FoundLogID: res.ID, NextAt: now.Add(-time.Second)},
		{Order: "RC-DUE-OTHER", Source: "wechatpay", Queries: 1, Outcome: "nothing", NextAt: now.Add(-time.Second)},
	} {
		require.NoError(t, st.RecordReconcile(ctx, r, now))
	}
	due := func() []string {
		orders, err := st.DueReconciles(ctx, []string{"wechatpay"}, now.Add(-48*time.Hour), now, now, 10)
		require.NoError(t, err)
		var codes []string
		for _, o := range orders {
			codes = append(codes, o.Code)
		}
		return codes
	}
	require.Equal(t, []string{"RC-DUE-OTHER"}, due(), "what was found is still PENDING")

	_, err = st.SQL.Exec(`UPDATE callback_log SET status = 'FAILED' WHERE id = ?`, res.ID)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"RC-DUE-FOUND", "RC-DUE-OTHER"}, due(), "settled, and the order still UNPAID: asked again")
}
