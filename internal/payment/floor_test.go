package payment_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
)

// TestRunningTotalFloorsBeforeLaterRefunds: docs/guarantees.md, "What was
// refunded": L's total less its refunds that failed since and had begun by
// L's time, "but at least 0; plus" the refunds that began after L. Here L
// (300, counting refund A) loses A (300) and B (400, created before L
// though L did not count it): 300 - 700, floored to 0; refund C (100),
// begun after L, then counts in full: refunded 100. Flooring after adding
// C would leave 0 (a mutation of the fold that the property test's seeds
// did not meet).
func TestRunningTotalFloorsBeforeLaterRefunds(t *testing.T) {
	o := payment.Order{OrderCode: "ORD-FLOOR", UserID: 7, Amount: 1000, Currency: "CNY"}
	at := func(minute int) *time.Time {
		t := time.Date(2026, 12, 1, 10, minute, 0, 0, time.UTC)
		return &t
	}
	total := int64(300)
	events := []callback.PaymentEvent{
		{Type: callback.TypePayment, OrderCode: o.OrderCode, PaymentNo: "P1", Amount: 1000, Currency: "CNY", Status: callback.PaymentSuccess, OccurredAt: at(10)},
		{Type: callback.TypeRefund, OrderCode: o.OrderCode, PaymentNo: "P1", RefundNo: "A", Amount: 300, Currency: "CNY", Status: callback.RefundSuccess, OccurredAt: at(20)},
		{Type: callback.TypeRefund, OrderCode: o.OrderCode, PaymentNo: "P1", RefundedTotal: &total, Currency: "CNY", Status: callback.RefundSuccess, OccurredAt: at(30)},
		{Type: callback.TypeRefund, OrderCode: o.OrderCode, PaymentNo: "P1", RefundNo: "A", Amount: 300, Currency: "CNY", Status: callback.RefundFailed, OccurredAt: at(40)},
		{Type: callback.TypeRefund, OrderCode: o.OrderCode, PaymentNo: "P1", RefundNo: "B", Amount: 400, Currency: "CNY", Status: callback.RefundFailed,
			OccurredAt: at(41), InitiatedAt: at(21)},
		{Type: callback.TypeRefund, OrderCode: o.OrderCode, PaymentNo: "P1", RefundNo: "C", Amount: 100, Currency: "CNY", Status: callback.RefundSuccess, OccurredAt: at(50)},
	}
	var facts []payment.Fact
	for i := range events {
		cb := &callback.Log{ID: int64(i + 1), Source: "paydemo", ReceivedAt: time.Date(2026, 12, 5, 9, 0, i, 0, time.UTC)}
		facts = append(facts, payment.FactOf(&events[i], o.OrderCode, "CNY", cb))
	}
	s := payment.Derive(&o, facts[:5])
	require.Equal(t, int64(0), s.Refunded, "A and B failed: 300 - 700, at least 0")
	require.Equal(t, payment.OrderPaid, s.Status)
	s = payment.Derive(&o, facts)
	require.Equal(t, int64(100), s.Refunded, "C began after L: it counts on top of the floor")
	require.Equal(t, payment.OrderPartiallyRefunded, s.Status)
	require.Equal(t, int64(900), s.Left)
}
