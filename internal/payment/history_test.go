package payment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/testenv"
)

// TestHistoryOf: an order's money history is found by the callback's
// order code or by the payment it names; a callback of another kind, of
// no effect, or of no known order has none.
func TestHistoryOf(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	_, err := st.SQL.Exec(`INSERT INTO orders (order_code, user_id, amount, currency, payment_status, payment_no, refunded_amount)
		VALUES ('ORD-H', 7, 1000, 'EUR', 'PARTIALLY_REFUNDED', 'pi_h', 250)`)
	require.NoError(t, err)
	// The refund happened first by the platform's clock, and arrived last.
	_, err = st.SQL.Exec(`INSERT INTO payment_facts (order_code, fact_key, kind, ref, payment_no, status, amount, currency, occurred_at,
		source, callback_log_id, received_at, created_at) VALUES
		('ORD-H', 'payment/pi_h/SUCCEEDED', 'payment', 'pi_h', 'pi_h', 'SUCCEEDED', 1000, 'EUR', '2026-12-01 10:00:00', 'stripe', 11, NOW(6), NOW(6)),
		('ORD-H', 'refund/re_h/SUCCEEDED', 'refund', 're_h', 'pi_h', 'SUCCEEDED', 250, 'EUR', '2026-12-01 09:00:00', 'stripe', 12, NOW(6), NOW(6))`)
	require.NoError(t, err)
	history := func(kind, event string) *payment.History {
		h, err := payment.HistoryOf(t.Context(), st.DB, &callback.Log{Kind: kind, Normalized: []byte(event)})
		require.NoError(t, err)
		return h
	}
	for _, ev := range []string{`{"orderCode":"ORD-H","paymentNo":"pi_h","amount":1000,"status":"SUCCESS"}`,
		`{"type":"refund","paymentNo":"pi_h","refundNo":"re_h","amount":250,"status":"SUCCESS"}`} {
		h := history(callback.KindPayment, ev)
		require.NotNil(t, h, ev)
		require.Equal(t, "PARTIALLY_REFUNDED", h.Order.PaymentStatus)
		require.Len(t, h.Facts, 2)
		require.Equal(t, "refund", h.Facts[0].Kind, "by the platform's time")
		require.EqualValues(t, 12, h.Facts[0].CallbackLogID)
		require.Equal(t, []int{2, 1}, h.Arrival)
		require.Equal(t, "pi_h", h.State.PaymentNo)
		require.EqualValues(t, 250, h.State.Refunded)
	}
	require.Nil(t, history(callback.KindLogistics, `{"orderCode":"ORD-H"}`))
	require.Nil(t, history(callback.KindPayment, `{"ignored":"nothing"}`))
	require.Nil(t, history(callback.KindPayment, `{"orderCode":"ORD-NONE","paymentNo":"x","amount":1,"status":"SUCCESS"}`))
	require.Nil(t, history(callback.KindPayment, `{"type":"refund","paymentNo":"pi_unknown","refundNo":"r","amount":1,"status":"SUCCESS"}`))
	require.Nil(t, history(callback.KindPayment, `not json`))
}
