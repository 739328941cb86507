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
// once the callback is settled and the order still UNPAID, it is due. An
// order past its give_up is due whatever it waits for, so that its last
// query gives up on it.
func TestDueReconcilesWaitsForWhatWasFound(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	const giveUp = 48 * time.Hour
	created := map[string]time.Time{"RC-DUE-FOUND": now.Add(-time.Hour), "RC-DUE-OTHER": now.Add(-time.Hour), "RC-DUE-LAST": now.Add(-giveUp - time.Hour)}
	for code, at := range created {
		_, err := st.SQL.Exec(`INSERT INTO orders (order_code, user_id, amount, currency, payment_source, created_at) VALUES (?, 7, 100, 'CNY', 'wechatpay', ?)`,
			code, at)
		require.NoError(t, err)
	}
	pending := func(order string) int64 {
		res, err := st.InsertCallback(ctx, &callback.Log{Source: "wechatpay", Kind: callback.KindPayment, EventID: "query:" + order + ":SUCCESS:1",
			BusinessKey: order, Status: callback.StatusPending, Payload: []byte(`{}`), ReceivedAt: now, Origin: callback.OriginReconcile})
		require.NoError(t, err)
		return res.ID
	}
	found, last := pending("RC-DUE-FOUND"), pending("RC-DUE-LAST")
	for _, r := range []store.ReconcileResult{
		{Order: "RC-DUE-FOUND", Source: "wechatpay", Queries: 1, Outcome: "found", FoundLogID: found, NextAt: now.Add(-time.Second)},
		{Order: "RC-DUE-OTHER", Source: "wechatpay", Queries: 1, Outcome: "nothing", NextAt: now.Add(-time.Second)},
		{Order: "RC-DUE-LAST", Source: "wechatpay", Queries: 5, Outcome: "found", FoundLogID: last, NextAt: now.Add(-time.Second)},
	} {
		require.NoError(t, st.RecordReconcile(ctx, r, now))
	}
	due := func() []string {
		orders, err := st.DueReconciles(ctx, []string{"wechatpay"}, now.Add(-giveUp-24*time.Hour), now, now.Add(-giveUp), now, 10)
		require.NoError(t, err)
		var codes []string
		for _, o := range orders {
			codes = append(codes, o.Code)
		}
		return codes
	}
	require.ElementsMatch(t, []string{"RC-DUE-OTHER", "RC-DUE-LAST"}, due(), "what was found is still PENDING; past give_up, due to be given up on")

	_, err := st.SQL.Exec(`UPDATE callback_log SET status = 'FAILED' WHERE id = ?`, found)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"RC-DUE-FOUND", "RC-DUE-OTHER", "RC-DUE-LAST"}, due(), "settled, and the order still UNPAID: asked again")
}
