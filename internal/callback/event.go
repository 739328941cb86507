package callback

import (
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

// Payment statuses of a PaymentEvent.
const (
	PaymentSuccess = "SUCCESS"
	PaymentFailed  = "FAILED"
)

// PaymentEvent is one payment notification.
type PaymentEvent struct {
	// OrderCode is the merchant's order number (Alipay out_trade_no,
	// WeChat Pay out_trade_no, Adyen merchantReference, ...).
	OrderCode string `json:"orderCode"`
	// PaymentNo is the platform's payment number (trade_no,
	// transaction_id, pspReference, ...).
	PaymentNo string `json:"paymentNo"`
	// Amount in the currency's minor units (fen, cents), converted exactly.
	Amount int64 `json:"amount"`
	// Currency is the ISO 4217 code of Amount, upper case. The presets
	// always set it (from the platform's own field); a configured JSON
	// source may leave it out, and the payment is then in the order's
	// currency. A payment in another currency than its order's never pays
	// it (payment.ErrCurrencyMismatch).
	Currency string `json:"currency,omitempty"`
	// Status is PaymentSuccess or PaymentFailed; empty with Ignored set.
	Status string `json:"status"`
	// PaidAt is when the platform says the payment happened, if it does.
	PaidAt *time.Time `json:"paidAt,omitempty"`
	// Ignored, when set, says why this notification has no business effect
	// (neither a payment nor a failure: Alipay WAIT_BUYER_PAY, a Stripe
	// event of another type). It is stored and processed, and its attempt
	// records the reason.
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
