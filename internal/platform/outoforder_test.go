package platform_test

// The reproductions of issue "money that is right in any order", each as a
// payments engineer met it: signed notifications through the real
// gateway, worker, MariaDB and RabbitMQ, in the order the platform
// delivered them, which is not the order things happened.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// ooStripe is a Stripe flow for these tests.
type ooStripe struct {
	p    *testenv.Platform
	base time.Time // the platform's clock at the story's start
	n    int
}

func newOOStripe(t *testing.T, orders map[string]int64) *ooStripe {
	p := testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret))
	for code, amount := range orders {
		p.CreateOrder(t, code, amount, "USD")
	}
	return &ooStripe{p: p, base: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
}

// send posts a Stripe event of typ created minute minutes into the story,
// about object, and waits for it to settle; it returns what it published.
func (s *ooStripe) send(t *testing.T, typ string, minute int, object string) []string {
	t.Helper()
	s.n++
	id := fmt.Sprintf("evt_oo_%d", s.n)
	body := fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2025-08-27.basil","created":%d,"livemode":false,"type":%q,"data":{"object":%s}}`,
		id, s.base.Add(time.Duration(minute)*time.Minute).Unix(), typ, object)
	a := s.p.Post(t, "stripe", body, stripeSigned(body, stripeSecret, time.Now()))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	row := s.p.Settled(t, "stripe", id)
	return lcNotifications(t, s.p, row.ID)
}

func (s *ooStripe) at(minute int) int64 {
	return s.base.Add(time.Duration(minute) * time.Minute).Unix()
}

func ooPI(order, pi string, amount int64) string {
	return fmt.Sprintf(`{"id":%q,"object":"payment_intent","amount":%d,"amount_received":%d,"currency":"usd","status":"succeeded","metadata":{"order_code":%q}}`,
		pi, amount, amount, order)
}

func ooCharge(order, pi string, amount, refunded int64) string {
	return fmt.Sprintf(`{"id":"ch_%s","object":"charge","payment_intent":%q,"amount":%d,"amount_refunded":%d,"currency":"usd","metadata":{"order_code":%q}}`,
		pi, pi, amount, refunded, order)
}

func ooRefund(order, pi, re string, amount int64, status string, created int64) string {
	return fmt.Sprintf(`{"id":%q,"object":"refund","payment_intent":%q,"amount":%d,"currency":"usd","status":%q,"created":%d,`+
		`"failure_reason":"expired_or_canceled_card","metadata":{"order_code":%q}}`, re, pi, amount, status, created, order)
}

func ooDispute(order, pi, dp string, amount int64, status string) string {
	return fmt.Sprintf(`{"id":%q,"object":"dispute","payment_intent":%q,"amount":%d,"currency":"usd","status":%q,"metadata":{"order_code":%q}}`,
		dp, pi, amount, status, order)
}

// TestAStaleRunningTotalDoesNotCountAFailedRefund: pay 1000; refund.failed
// for re_a (300) arrives; then the older charge.refunded whose
// amount_refunded 300 counted re_a while it was pending. Nothing is
// refunded, and nothing says so after the failure. It used to end
// PARTIALLY_REFUNDED 300, order.refunded and points.deduct after
// order.refund_failed.
func TestAStaleRunningTotalDoesNotCountAFailedRefund(t *testing.T) {
	s := newOOStripe(t, map[string]int64{"OO-1": 1000})
	s.send(t, "payment_intent.succeeded", 0, ooPI("OO-1", "pi_1", 1000))
	require.Equal(t, []string{lcRefundFailed("OO-1", "re_a", 300, "USD", "expired_or_canceled_card", 0, 0)},
		s.send(t, "refund.failed", 20, ooRefund("OO-1", "pi_1", "re_a", 300, "failed", s.at(5))))
	require.Empty(t, s.send(t, "charge.refunded", 10, ooCharge("OO-1", "pi_1", 1000, 300)), "a total older than the failure counts nothing")
	o := s.p.Order(t, "OO-1")
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Zero(t, o.RefundedAmount)
}

// TestRunningTotalsAndRefundsOneByOneInAnyOrder: charge.refunded 200
// (re_0), refund.failed re_1 300, charge.refunded 500 (counting re_1 while
// pending), then re_0 succeeded: 200 refunded. It used to end 300.
func TestRunningTotalsAndRefundsOneByOneInAnyOrder(t *testing.T) {
	s := newOOStripe(t, map[string]int64{"OO-2": 1000})
	s.send(t, "payment_intent.succeeded", 0, ooPI("OO-2", "pi_2", 1000))
	s.send(t, "charge.refunded", 10, ooCharge("OO-2", "pi_2", 1000, 200))
	s.send(t, "refund.failed", 30, ooRefund("OO-2", "pi_2", "re_1", 300, "failed", s.at(15)))
	s.send(t, "charge.refunded", 20, ooCharge("OO-2", "pi_2", 1000, 500))
	s.send(t, "refund.updated", 9, ooRefund("OO-2", "pi_2", "re_0", 200, "succeeded", s.at(8)))
	o := s.p.Order(t, "OO-2")
	require.Equal(t, payment.OrderPartiallyRefunded, o.PaymentStatus)
	require.EqualValues(t, 200, o.RefundedAmount)
}

// TestAFailedAttemptOfThePayingPaymentIsNotAnotherPayment: the card of
// pi_6 is declined (payment_failed), a refund re_6 of 500 is reported,
// then pi_6 succeeds with another card, then charge.refunded 500. The
// refund counts: PARTIALLY_REFUNDED 500, told downstream. It used to end
// PAID with the refund noted "of payment pi_6, which did not pay the
// order".
func TestAFailedAttemptOfThePayingPaymentIsNotAnotherPayment(t *testing.T) {
	s := newOOStripe(t, map[string]int64{"OO-6": 1000})
	s.send(t, "payment_intent.payment_failed", 0, ooPI("OO-6", "pi_6", 1000))
	require.Empty(t, s.send(t, "refund.updated", 20, ooRefund("OO-6", "pi_6", "re_6", 500, "succeeded", s.at(19))))
	require.Equal(t, []string{lcShip("OO-6"), lcRefunded("OO-6", "re_6", 500, "USD", 500, false), lcPoints("points.add", "OO-6", 500, "USD")},
		s.send(t, "payment_intent.succeeded", 10, ooPI("OO-6", "pi_6", 1000)))
	require.Empty(t, s.send(t, "charge.refunded", 21, ooCharge("OO-6", "pi_6", 1000, 500)))
	o := s.p.Order(t, "OO-6")
	require.Equal(t, payment.OrderPartiallyRefunded, o.PaymentStatus)
	require.EqualValues(t, 500, o.RefundedAmount)
}

// TestALateFailureIsNoAlarm: payment_intent.payment_failed of a
// PaymentIntent delivered after its payment_intent.succeeded, though it
// happened before (declined, then another card), changes nothing. It used
// to raise reversal_of_paying_payment.
func TestALateFailureIsNoAlarm(t *testing.T) {
	s := newOOStripe(t, map[string]int64{"OO-7": 1000})
	s.send(t, "payment_intent.succeeded", 10, ooPI("OO-7", "pi_7", 1000))
	require.Empty(t, s.send(t, "payment_intent.payment_failed", 5, ooPI("OO-7", "pi_7", 1000)))
	require.Equal(t, payment.OrderPaid, s.p.Order(t, "OO-7").PaymentStatus)
}

// TestALostDisputeWonBackRecountsTheRefundItCapped: pay 1000, dispute
// lost 1000, refund 1000 (capped: over_refund), dispute won: the customer
// got 1000 back by the refund, so the order ends REFUNDED 1000 and the
// points are not given back. It used to end PAID with 0 refunded and
// points.add 1000.
func TestALostDisputeWonBackRecountsTheRefundItCapped(t *testing.T) {
	s := newOOStripe(t, map[string]int64{"OO-8": 1000})
	s.send(t, "payment_intent.succeeded", 0, ooPI("OO-8", "pi_8", 1000))
	s.send(t, "charge.dispute.closed", 10, ooDispute("OO-8", "pi_8", "dp_8", 1000, "lost"))
	s.send(t, "refund.updated", 20, ooRefund("OO-8", "pi_8", "re_8", 1000, "succeeded", s.at(20)))
	msgs := s.send(t, "charge.dispute.closed", 30, ooDispute("OO-8", "pi_8", "dp_8", 1000, "won"))
	require.Equal(t, []string{lcDisputeMsg("OO-8", "dp_8", "WON", 1000, "USD")}, msgs, "the refund keeps the points away")
	o := s.p.Order(t, "OO-8")
	require.Equal(t, payment.OrderRefunded, o.PaymentStatus)
	require.EqualValues(t, 1000, o.RefundedAmount)
	require.Zero(t, o.ChargebackAmount)
}

// TestAPartialChargebackCancelsNothing: pay 10000, a dispute lost for 500
// does not cancel the order at the warehouse; a refund of the remaining
// 9500 then leaves nothing: REFUNDED, full, cancelled once. It used to
// cancel at the chargeback and end PARTIALLY_REFUNDED with full false.
func TestAPartialChargebackCancelsNothing(t *testing.T) {
	s := newOOStripe(t, map[string]int64{"OO-9": 10000})
	s.send(t, "payment_intent.succeeded", 0, ooPI("OO-9", "pi_9", 10000))
	require.Equal(t, []string{lcDisputeMsg("OO-9", "dp_9", "LOST", 500, "USD"), lcPoints("points.deduct", "OO-9", 500, "USD")},
		s.send(t, "charge.dispute.closed", 10, ooDispute("OO-9", "pi_9", "dp_9", 500, "lost")))
	require.Equal(t, []string{lcRefunded("OO-9", "re_9", 9500, "USD", 9500, true), lcPoints("points.deduct", "OO-9", 9500, "USD"), lcCancel("OO-9")},
		s.send(t, "refund.updated", 20, ooRefund("OO-9", "pi_9", "re_9", 9500, "succeeded", s.at(20))))
	o := s.p.Order(t, "OO-9")
	require.Equal(t, payment.OrderRefunded, o.PaymentStatus)
	require.EqualValues(t, 500, o.ChargebackAmount)
}

// TestPreventedIsNotDeadLettered: a dispute closed "prevented" (Visa's
// rapid dispute resolution) is won. It used to be FAILED.
func TestPreventedIsNotDeadLettered(t *testing.T) {
	s := newOOStripe(t, map[string]int64{"OO-10": 1000})
	s.send(t, "payment_intent.succeeded", 0, ooPI("OO-10", "pi_10", 1000))
	require.Equal(t, []string{lcDisputeMsg("OO-10", "dp_10", "WON", 1000, "USD")},
		s.send(t, "charge.dispute.closed", 10, ooDispute("OO-10", "pi_10", "dp_10", 1000, "prevented")))
}

// TestAlipayRunningTotalsNewestFirst: TRADE_CLOSED with refund_fee 100.00
// (refund B, the later) arrives before TRADE_SUCCESS with refund_fee
// 30.00 (refund A): the order is refunded 100 in full, both totals are
// kept, the older one changes nothing. It used to give A no row.
func TestAlipayRunningTotalsNewestFirst(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	p.CreateOrder(t, alipayOrder, 10000, "CNY")
	post := func(id string, kv ...string) []string {
		t.Helper()
		a := p.Post(t, "alipay", alipayExample(append([]string{"notify_id", id, "total_amount", "100.00"}, kv...)...).signed(k), alipayHeader())
		require.Equal(t, http.StatusOK, a.Status, string(a.Body))
		return lcNotifications(t, p, p.Settled(t, "alipay", id).ID)
	}
	post("oo-pay", "gmt_payment", "2026-11-30 10:00:00")
	require.Equal(t, []string{lcRefunded(alipayOrder, "RF-B", 10000, "CNY", 10000, true), lcPoints("points.deduct", alipayOrder, 10000, "CNY"),
		lcCancel(alipayOrder)},
		post("oo-b", "trade_status", "TRADE_CLOSED", "refund_fee", "100.00", "out_biz_no", "RF-B", "gmt_refund", "2026-11-30 12:00:00"))
	require.Empty(t, post("oo-a", "refund_fee", "30.00", "out_biz_no", "RF-A", "gmt_refund", "2026-11-30 11:00:00"))
	require.Len(t, lcTotals(t, p), 2, "both running totals are kept")
	o := p.Order(t, alipayOrder)
	require.Equal(t, payment.OrderRefunded, o.PaymentStatus)
	require.EqualValues(t, 10000, o.RefundedAmount)
}
