package payment_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
)

// TestWarehouseCancelOnceInAnOrdersLife: an order refunded in full is
// cancelled at the warehouse; an earlier-dated payment that arrives later
// pays it instead (the refund was of the other payment), so money is left
// again: no second ship, cancelled_with_money_left; a full refund of that
// payment then leaves nothing again, and no second warehouse.cancel is
// sent (orders.warehouse_cancelled).
func TestWarehouseCancelOnceInAnOrdersLife(t *testing.T) {
	o := payment.Order{OrderCode: "ORD-ONCE", UserID: 7, Amount: 1000, Currency: "CNY"}
	at := func(minute int) *time.Time {
		t := time.Date(2026, 12, 1, 10, minute, 0, 0, time.UTC)
		return &t
	}
	var facts []payment.Fact
	told := false
	step := func(id int64, ev callback.PaymentEvent) []string {
		t.Helper()
		cb := &callback.Log{ID: id, Source: "paydemo", ReceivedAt: time.Date(2026, 12, 5, 9, 0, int(id), 0, time.UTC)}
		x := payment.FactOf(&ev, o.OrderCode, "CNY", cb)
		st := payment.Record(&o, facts, x, told)
		require.True(t, st.Recorded)
		facts, told = append(facts, x), st.Told
		var keys []string
		for _, m := range st.Messages {
			k := m.RoutingKey
			if m.RoutingKey == payment.RoutingPaymentException {
				k += " " + m.Payload.(map[string]any)["kind"].(string)
			}
			keys = append(keys, k)
		}
		return keys
	}
	pay := func(no string, minute int) callback.PaymentEvent {
		return callback.PaymentEvent{Type: callback.TypePayment, OrderCode: o.OrderCode, PaymentNo: no, Amount: 1000, Currency: "CNY",
			Status: callback.PaymentSuccess, OccurredAt: at(minute)}
	}
	refund := func(no, of string, minute int) callback.PaymentEvent {
		return callback.PaymentEvent{Type: callback.TypeRefund, OrderCode: o.OrderCode, PaymentNo: of, RefundNo: no, Amount: 1000, Currency: "CNY",
			Status: callback.RefundSuccess, OccurredAt: at(minute)}
	}
	require.Equal(t, []string{"warehouse.ship", "points.add"}, step(1, pay("P1", 20)))
	require.Equal(t, []string{"order.refunded", "points.deduct", "warehouse.cancel"}, step(2, refund("re_1", "P1", 30)))
	require.True(t, told)
	require.Equal(t, []string{"order.refund_failed", "points.add", "payment.exception paid_by_another", "payment.exception other_payment_refunded",
		"payment.exception cancelled_with_money_left"}, step(3, pay("P0", 10)), "P0 paid first: the refund was of the other payment")
	require.Equal(t, []string{"order.refunded", "points.deduct"}, step(4, refund("re_0", "P0", 40)), "no second warehouse.cancel")
	s := payment.Derive(&o, facts)
	require.Equal(t, payment.OrderRefunded, s.Status)
	require.Equal(t, "P0", s.PaymentNo)
	require.True(t, told)
}
