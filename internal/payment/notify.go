package payment

import "callgate/internal/callback"

// Routing keys of the notifications this handler writes (the downstream
// contract, internal/downstream/asyncapi.yaml).
const (
	RoutingWarehouseShip    = "warehouse.ship"
	RoutingPointsAdd        = "points.add"
	RoutingOrderRefunded    = "order.refunded"
	RoutingPointsDeduct     = "points.deduct"
	RoutingWarehouseCancel  = "warehouse.cancel"
	RoutingOrderRefundFail  = "order.refund_failed"
	RoutingOrderClosed      = "order.closed"
	RoutingOrderDispute     = "order.dispute"
	RoutingPaymentException = "payment.exception"
)

// RoutingKeys lists every routing key this handler writes.
func RoutingKeys() []string {
	return []string{RoutingWarehouseShip, RoutingPointsAdd, RoutingOrderRefunded, RoutingPointsDeduct, RoutingWarehouseCancel,
		RoutingOrderRefundFail, RoutingOrderClosed, RoutingOrderDispute, RoutingPaymentException}
}

// Exception kinds of payment.exception: money that needs a person.
const (
	// ExceptionPaidByAnother: a second payment of a paid order (money to
	// give back).
	ExceptionPaidByAnother = "paid_by_another"
	// ExceptionAmountMismatch: a payment of another amount than the
	// order's.
	ExceptionAmountMismatch = "amount_mismatch"
	// ExceptionCurrencyMismatch: a payment, refund or dispute in another
	// currency than the order's.
	ExceptionCurrencyMismatch = "currency_mismatch"
	// ExceptionOverRefund: a refund beyond what remained to refund; the
	// amount is the excess.
	ExceptionOverRefund = "over_refund"
	// ExceptionReversalOfPayingPayment: a failure reported for the payment
	// that paid the order.
	ExceptionReversalOfPayingPayment = "reversal_of_paying_payment"
	// ExceptionPaidAfterClose: a payment of an order the platform had
	// closed (money to give back, or an order to reopen).
	ExceptionPaidAfterClose = "paid_after_close"
	// ExceptionOtherPaymentRefunded: a refund of a payment that did not
	// pay the order (its money moved).
	ExceptionOtherPaymentRefunded = "other_payment_refunded"
	// ExceptionOtherPaymentDisputed: a dispute stage of a payment that did
	// not pay the order.
	ExceptionOtherPaymentDisputed = "other_payment_disputed"
	// ExceptionRefundUndoneAfterCancel: a refund failed or was reversed
	// after the order was cancelled at the warehouse.
	ExceptionRefundUndoneAfterCancel = "refund_undone_after_cancel"
	// ExceptionCancelledWithMoneyLeft: an order cancelled at the
	// warehouse has money left again (a fact dated earlier changed its
	// money): warehouse.cancel is not taken back.
	ExceptionCancelledWithMoneyLeft = "cancelled_with_money_left"
)

// ExceptionKinds lists the kinds, for metrics.
func ExceptionKinds() []string {
	return []string{ExceptionPaidByAnother, ExceptionAmountMismatch, ExceptionCurrencyMismatch, ExceptionOverRefund,
		ExceptionReversalOfPayingPayment, ExceptionPaidAfterClose, ExceptionOtherPaymentRefunded, ExceptionOtherPaymentDisputed,
		ExceptionRefundUndoneAfterCancel, ExceptionCancelledWithMoneyLeft}
}

// The bodies. Maps, so that the keys come out sorted, as subscribers have
// always received them.

func shipMsg(o *Order) callback.Message {
	return callback.Message{RoutingKey: RoutingWarehouseShip, Payload: map[string]any{"orderCode": o.OrderCode}}
}

func cancelMsg(o *Order) callback.Message {
	return callback.Message{RoutingKey: RoutingWarehouseCancel, Payload: map[string]any{"orderCode": o.OrderCode}}
}

func pointsMsg(routingKey string, o *Order, amount int64) callback.Message {
	return callback.Message{RoutingKey: routingKey, Payload: map[string]any{
		"orderCode": o.OrderCode, "userId": o.UserID, "amount": amount, "currency": o.Currency}}
}

func refundedMsg(o *Order, refundNo string, counted, total int64, full bool) callback.Message {
	return callback.Message{RoutingKey: RoutingOrderRefunded, Payload: map[string]any{
		"orderCode": o.OrderCode, "refundNo": refundNo, "amount": counted, "currency": o.Currency,
		"refundedTotal": total, "full": full}}
}

// refundFailedMsg: amount and currency are the refund's; uncounted is
// what refunded_amount shrank by with it.
func refundFailedMsg(o *Order, refundNo string, amount int64, currency, reason string, uncounted, total int64) callback.Message {
	return callback.Message{RoutingKey: RoutingOrderRefundFail, Payload: map[string]any{
		"orderCode": o.OrderCode, "refundNo": refundNo, "amount": amount, "currency": currency, "reason": reason,
		"uncounted": uncounted, "refundedTotal": total}}
}

func closedMsg(o *Order, reason, status string, refunded int64) callback.Message {
	return callback.Message{RoutingKey: RoutingOrderClosed, Payload: map[string]any{"orderCode": o.OrderCode, "reason": reason,
		"paymentStatus": status, "refundedTotal": refunded}}
}

func disputeMsg(o *Order, id, status string, amount int64, currency string) callback.Message {
	return callback.Message{RoutingKey: RoutingOrderDispute, Payload: map[string]any{
		"orderCode": o.OrderCode, "disputeId": id, "status": status, "amount": amount, "currency": currency}}
}

func exceptionMsg(o *Order, e Exception) callback.Message {
	body := map[string]any{"orderCode": o.OrderCode, "paymentNo": e.PaymentNo, "kind": e.Kind, "amount": e.Amount, "currency": e.Currency}
	if e.RefundNo != "" {
		body["refundNo"] = e.RefundNo
	}
	if e.DisputeID != "" {
		body["disputeId"] = e.DisputeID
	}
	return callback.Message{RoutingKey: RoutingPaymentException, Payload: body}
}
