package payment

import (
	"fmt"

	"callgate/internal/callback"
)

// Payload is the canonical event: what a configured JSON source (the demo
// source paydemo) sends, and what every payment preset (Alipay, WeChat
// Pay, Stripe, Adyen, Shopify) maps its notification to.
type Payload = callback.PaymentEvent

// event decodes and checks a callback's event: the fields its type needs
// are there, the ones it does not take are not. An event that can never be
// read fails for good; one a preset marked as having no business effect is
// a NoEffect.
func event(cb *callback.Log) (Payload, error) {
	p, err := decode(cb.Event())
	if err != nil {
		return p, err
	}
	if p.Ignored != "" {
		return p, callback.NoEffect(p.Ignored)
	}
	if p.Type == "" {
		p.Type = callback.TypePayment
	}
	if err := check(&p); err != nil {
		return p, callback.Permanentf("invalid payload: %w", err)
	}
	return p, nil
}

// decode reads body as the canonical event: the one reading of a payment's
// body, by the worker (event) and, before a configured source's body is
// stored, by the intake (Handler.CheckEvent).
func decode(body []byte) (Payload, error) {
	var p Payload
	err := callback.DecodePayload(body, &p)
	return p, err
}

// CheckEvent implements callback.EventChecker: whether body reads as a
// payment event, as the worker will read it (decode); what it says is
// checked when it runs.
func (Handler) CheckEvent(body []byte) error {
	_, err := decode(body)
	return err
}

// Validate reports what makes a canonical payment-kind event unusable (nil
// for one the handler can decide): what a preset's event must pass, and
// what a configured source's body is checked against.
func Validate(p Payload) error {
	if p.Ignored != "" {
		return nil
	}
	if p.Type == "" {
		p.Type = callback.TypePayment
	}
	return check(&p)
}

// check reports what makes p unusable.
func check(p *Payload) error {
	// none refuses the first field set of fields, given as name, set,
	// name, set, ...
	none := func(fields ...any) error {
		for i := 0; i < len(fields); i += 2 {
			if fields[i+1].(bool) {
				return fmt.Errorf("%s does not apply to a %s", fields[i], p.Type)
			}
		}
		return nil
	}
	if p.Amount < 0 || p.RefundedTotal != nil && *p.RefundedTotal < 0 {
		return fmt.Errorf("amounts must not be negative")
	}
	switch p.Type {
	case callback.TypePayment:
		// A failure may name only its payment (found by it: a Stripe
		// PaymentIntent canceled without the order in its metadata).
		if p.PaymentNo == "" || p.OrderCode == "" && p.Status != callback.PaymentFailed {
			return fmt.Errorf("orderCode and paymentNo are required")
		}
		if p.Status != callback.PaymentSuccess && p.Status != callback.PaymentFailed {
			return fmt.Errorf("status %q is not SUCCESS or FAILED", p.Status)
		}
		return none("refundNo", p.RefundNo != "", "disputeId", p.DisputeID != "", "refundedTotal", p.RefundedTotal != nil,
			"initiatedAt", p.InitiatedAt != nil)
	case callback.TypeRefund:
		if p.OrderCode == "" && p.PaymentNo == "" {
			return fmt.Errorf("orderCode or paymentNo is required")
		}
		switch p.Status {
		case callback.RefundSuccess:
			if p.RefundNo == "" && p.RefundedTotal == nil {
				return fmt.Errorf("refundNo (or refundedTotal) is required")
			}
			if p.Amount == 0 && p.RefundedTotal == nil {
				return fmt.Errorf("amount (or refundedTotal) is required")
			}
		case callback.RefundFailed, callback.RefundReversed:
			if p.RefundNo == "" {
				return fmt.Errorf("refundNo is required")
			}
		default:
			return fmt.Errorf("status %q is not SUCCESS, FAILED or REVERSED", p.Status)
		}
		return none("disputeId", p.DisputeID != "", "paidAt", p.PaidAt != nil)
	case callback.TypeClose:
		if p.OrderCode == "" && p.PaymentNo == "" {
			return fmt.Errorf("orderCode or paymentNo is required")
		}
		return none("status", p.Status != "", "amount", p.Amount != 0, "currency", p.Currency != "",
			"refundNo", p.RefundNo != "", "disputeId", p.DisputeID != "", "refundedTotal", p.RefundedTotal != nil, "paidAt", p.PaidAt != nil,
			"initiatedAt", p.InitiatedAt != nil)
	case callback.TypeDispute:
		if p.OrderCode == "" && p.PaymentNo == "" {
			return fmt.Errorf("orderCode or paymentNo is required")
		}
		if p.DisputeID == "" {
			return fmt.Errorf("disputeId is required")
		}
		if p.Status != callback.DisputeOpen && p.Status != callback.DisputeWon && p.Status != callback.DisputeLost {
			return fmt.Errorf("status %q is not OPEN, WON or LOST", p.Status)
		}
		return none("refundNo", p.RefundNo != "", "refundedTotal", p.RefundedTotal != nil, "paidAt", p.PaidAt != nil,
			"initiatedAt", p.InitiatedAt != nil)
	}
	return fmt.Errorf("type %q is not payment, refund, close or dispute", p.Type)
}

// movesMoney reports whether p's currency is checked against its order's:
// a payment success, a refund that succeeded, a dispute.
func movesMoney(p *Payload) bool {
	switch p.Type {
	case callback.TypePayment:
		return p.Status == callback.PaymentSuccess
	case callback.TypeRefund:
		return p.Status == callback.RefundSuccess
	case callback.TypeDispute:
		return true
	}
	return false
}
