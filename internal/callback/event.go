package callback

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// The canonical events. A platform preset (internal/platform) maps what a
// platform sends to one of these at intake, and the row keeps it in
// callback_log.normalized beside the raw payload; a source without a preset
// sends this shape itself (the demo sources paydemo and shipdemo). A kind's
// handler reads [Log.Event], so a payment from any platform pays the same
// order.

// Types of a PaymentEvent: what happened to an order's money. A configured
// JSON source that sends no type sends a payment.
const (
	TypePayment = "payment"
	TypeRefund  = "refund"
	TypeClose   = "close"
	TypeDispute = "dispute"
)

// Statuses of a PaymentEvent, by type: a payment is SUCCESS or FAILED; a
// refund SUCCESS, FAILED or REVERSED (the money came back to the merchant
// after the refund succeeded); a dispute OPEN, WON or LOST (the merchant's
// view: LOST means the money was charged back). A close has none.
const (
	PaymentSuccess = "SUCCESS"
	PaymentFailed  = "FAILED"
	RefundSuccess  = "SUCCESS"
	RefundFailed   = "FAILED"
	RefundReversed = "REVERSED"
	DisputeOpen    = "OPEN"
	DisputeWon     = "WON"
	DisputeLost    = "LOST"
)

// PaymentEvent is one event in the life of an order's payment: a payment
// (success or failure), a refund, a closure or a dispute. The rule table of
// docs/guarantees.md says what each does to the order; internal/payment applies it.
type PaymentEvent struct {
	// Type is TypePayment (also when empty), TypeRefund, TypeClose or
	// TypeDispute.
	Type string `json:"type,omitempty"`
	// OrderCode is the merchant's order number (Alipay out_trade_no,
	// WeChat Pay out_trade_no, Adyen merchantReference, ...). A refund or
	// dispute may name only its payment (PaymentNo): the order is then the
	// one that payment was recorded for.
	OrderCode string `json:"orderCode,omitempty"`
	// PaymentNo is the platform's payment number (trade_no,
	// transaction_id, pspReference, ...): for a refund or dispute, the
	// payment it is about (empty: the order's paying payment).
	PaymentNo string `json:"paymentNo,omitempty"`
	// RefundNo is the platform's refund id (a refund).
	RefundNo string `json:"refundNo,omitempty"`
	// DisputeID is the platform's dispute id (a dispute).
	DisputeID string `json:"disputeId,omitempty"`
	// Amount in the currency's minor units (fen, cents), converted
	// exactly: what was paid, refunded (this refund alone) or disputed.
	Amount int64 `json:"amount,omitempty"`
	// RefundedTotal, for a refund, is a running total the platform gives
	// instead of (or besides) the refund's own amount: everything refunded
	// of the payment so far (Alipay refund_fee, Stripe amount_refunded).
	RefundedTotal *int64 `json:"refundedTotal,omitempty"`
	// Currency is the ISO 4217 code of Amount, upper case. The presets
	// always set it (from the platform's own field); a configured JSON
	// source may leave it out, and the event is then in the source's
	// payment_currency. An event in another currency than its order's
	// never moves its money (payment.ExceptionCurrencyMismatch).
	Currency string `json:"currency,omitempty"`
	// Status is one of the statuses above, by Type; empty for a close and
	// with Ignored set.
	Status string `json:"status,omitempty"`
	// PaidAt is when the platform says the payment happened, if it does.
	PaidAt *time.Time `json:"paidAt,omitempty"`
	// OccurredAt is the platform's own time of what this event reports
	// (the payment, the refund's outcome, the dispute stage, the close):
	// an order's facts are taken in this order, whatever order they
	// arrived in. Nil when the platform gives none.
	OccurredAt *time.Time `json:"occurredAt,omitempty"`
	// InitiatedAt is when a refund was created, when the platform says
	// (Stripe's refund created): a running total dated before it cannot
	// have counted it.
	InitiatedAt *time.Time `json:"initiatedAt,omitempty"`
	// Reason is why a refund failed or an order was closed, in the
	// platform's words, when it says.
	Reason string `json:"reason,omitempty"`
	// Ignored, when set, says why this notification has no business effect
	// (none of the above: Alipay WAIT_BUYER_PAY, a Stripe event of another
	// type). It is stored and processed, and its attempt records the
	// reason.
	Ignored string `json:"ignored,omitempty"`
}

// Logistics statuses of a CarrierEvent.
const (
	CarrierPickedUp       = "PICKED_UP"
	CarrierInTransit      = "IN_TRANSIT"
	CarrierOutForDelivery = "OUT_FOR_DELIVERY"
	CarrierDelivered      = "DELIVERED"
	CarrierException      = "EXCEPTION"
)

// CarrierEvent is one logistics notification.
type CarrierEvent struct {
	WaybillNo string `json:"waybillNo"`
	// OrderCode is empty when the carrier does not know it (Kuaidi100): the
	// handler then takes it from the shipment already known for the
	// waybill.
	OrderCode string `json:"orderCode,omitempty"`
	// Seq orders a waybill's events; a higher one is newer.
	Seq int64 `json:"seq"`
	// Status is one of the Carrier* constants.
	Status     string    `json:"status"`
	Location   string    `json:"location,omitempty"`
	OccurredAt time.Time `json:"occurredAt"`
}

// Event returns the bytes a handler decodes: the normalized event when a
// preset produced one, else the payload as received.
func (l *Log) Event() []byte {
	if len(l.Normalized) > 0 {
		return l.Normalized
	}
	return l.Payload
}

// MarshalEvent encodes a canonical event for callback_log.normalized.
func MarshalEvent(v any) (json.RawMessage, error) { return json.Marshal(v) }

// Unreadable is the canonical event of a notification whose signature and
// merchant held but which could not be read into a canonical event (a
// field missing, an amount that does not convert, an order code where the
// preset does not look): it is stored with the reason, so that nothing
// signed is lost, and the worker sets it FAILED with that reason without
// running a handler. Replayed (after a configuration fix), it is read
// again from its raw body.
type Unreadable struct {
	Reason string `json:"unreadable"`
}

// UnreadableReason returns the reason when normalized is an Unreadable.
func UnreadableReason(normalized []byte) (string, bool) {
	if len(normalized) == 0 || !bytes.Contains(normalized, []byte(`"unreadable"`)) {
		return "", false
	}
	var u Unreadable
	if err := json.Unmarshal(normalized, &u); err != nil || u.Reason == "" {
		return "", false
	}
	return u.Reason, true
}

// NoEffectError is returned by a handler for a callback that succeeds
// without changing anything; Reason is recorded in its attempt's note.
type NoEffectError struct{ Reason string }

func (e *NoEffectError) Error() string { return "no business effect: " + e.Reason }

// NoEffect says the callback is processed successfully and changes nothing,
// for reason (recorded in callback_attempt.note). The handler must not have
// written anything.
func NoEffect(reason string) error { return &NoEffectError{Reason: reason} }

// AsNoEffect returns the reason when err is a NoEffect.
func AsNoEffect(err error) (string, bool) {
	var n *NoEffectError
	if errors.As(err, &n) {
		return n.Reason, true
	}
	return "", false
}

// NotedError is returned by a handler for a callback that succeeded with
// its effects (rows written, notifications added) and a note for the
// person who looks at it later (an exception reported downstream).
type NotedError struct{ Note string }

func (e *NotedError) Error() string { return "succeeded: " + e.Note }

// Noted says the callback is processed successfully, its effects stand,
// and note is recorded in its attempt (callback_attempt.note).
func Noted(note string) error { return &NotedError{Note: note} }

// AsNote returns the note of a success that carries one: a NoEffect's
// reason or a Noted's note.
func AsNote(err error) (string, bool) {
	if r, ok := AsNoEffect(err); ok {
		return r, true
	}
	var n *NotedError
	if errors.As(err, &n) {
		return n.Note, true
	}
	return "", false
}
