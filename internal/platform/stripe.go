package platform

import (
	"fmt"
	"strconv"
	"strings"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Stripe (preset stripe): a JSON Event signed in Stripe-Signature
// (t=...,v1=... over "t.body", HMAC-SHA256 keyed with the whole whsec_
// secret), with a timestamp window. Event id: id. payment_intent.succeeded
// pays, payment_intent.payment_failed fails; refunds, disputes and
// cancellations are mapped by interpret; any other type is stored and
// processed without effect. Order: data.object.metadata.order_code (or
// order_path; an event without it is about its PaymentIntent, and finds
// its order by that payment); payment: data.object.id (a PaymentIntent) or
// data.object.payment_intent; amount: data.object.amount_received
// for a success, data.object.amount for a failure, in Stripe's minor units
// (converted to ISO 4217's where Stripe counts otherwise: MGA, ISK, UGX);
// currency: data.object.currency. Keys: secrets (several during a roll).
// Merchant: livemode ("true" by default) must equal the event's livemode,
// and account, when set, its account (Connect); when unset, an event
// carrying an account is refused (403, not stored). Any 2xx stops Stripe's
// retries (up to 3 days in live mode).
type stripe struct {
	verifier  signature.Verifier
	orderPath string
	livemode  bool
	account   string // the connected account taken; "" for the platform's own
}

// StripeOrderPathDefault is where the stripe preset reads the order code.
const StripeOrderPathDefault = "data.object.metadata.order_code"

func newStripe(cfg Config) (Platform, error) {
	v, err := signature.New(signature.Config{Scheme: signature.SchemeStripe, Secrets: nonEmpty(cfg.Secrets), Tolerance: cfg.Tolerance})
	if err != nil {
		return nil, fieldErr("secrets", err)
	}
	p := &stripe{verifier: v, orderPath: cfg.OrderPath, livemode: true, account: strings.TrimSpace(cfg.Account)}
	if p.orderPath == "" {
		p.orderPath = StripeOrderPathDefault
	}
	switch strings.TrimSpace(cfg.Livemode) {
	case "", "true":
	case "false":
		p.livemode = false
	default:
		return nil, fieldErr("livemode", fmt.Errorf("%q is neither true nor false (STRIPE_LIVEMODE)", cfg.Livemode))
	}
	return p, nil
}

func (p *stripe) Kind() string      { return callback.KindPayment }
func (p *stripe) Headers() []string { return p.verifier.Headers() }

func (p *stripe) Read(req Request) ([]Callback, error) {
	if _, err := p.verifier.Verify(req.Header, req.Body, req.Now); err != nil {
		return nil, err
	}
	return p.interpret(req.Body)
}

func (p *stripe) Reread(req Request) ([]Callback, error) { return p.interpret(req.Body) }

// StripeEventTypes are the event types interpret gives an effect to: the
// ones reconciliation lists (GET /v1/events?types[]=, at most 20).
var StripeEventTypes = []string{
	"payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled",
	"charge.refunded", "refund.created", "refund.updated", "refund.failed", "charge.refund.updated",
	"charge.dispute.created", "charge.dispute.closed",
}

// ReadAnswer reads an Event from Stripe's events list (GET /v1/events,
// reconciliation's catch-up: order is then "") as its webhook would be
// read: the same interpret, livemode and account checks included, the
// same event id (the event's own id, so the late webhook of the same event
// is an exact duplicate). An order named must be the event's. The list is
// asked over TLS with the secret API key: no signature to check.
func (p *stripe) ReadAnswer(order string, answer []byte) ([]Callback, error) {
	obj, err := callback.ParseObject(answer)
	if err != nil {
		return nil, badRequest("the answer is not a JSON object")
	}
	if kind, _ := obj.Scalar("object"); kind != "event" {
		return nil, badRequest("the answer is a %q, not an event", truncate(kind))
	}
	cbs, err := p.interpret(answer)
	if err != nil {
		return nil, err
	}
	// (An event naming no order is about its payment, as a webhook's is.)
	if got, _ := obj.Scalar(p.orderPath); order != "" && got != "" && got != order {
		return nil, badRequest("the event is about order %q, not %q", truncate(got), truncate(order))
	}
	return cbs, nil
}

// interpret checks a verified event's mode and account and maps it to its
// event, by type (docs.stripe.com/api/events/types): the PaymentIntent's
// succeeded, payment_failed and canceled (a failed attempt: the order
// may be paid by another PaymentIntent); charge.refunded (the Charge's
// amount_refunded, a running total: docs.stripe.com/api/charges/object);
// refund.created, refund.updated, refund.failed and charge.refund.updated
// (a Refund, by its status: docs.stripe.com/api/refunds/object);
// charge.dispute.created and charge.dispute.closed (a Dispute, won or
// lost: docs.stripe.com/api/disputes/object). Any other type is stored and
// processed without effect.
func (p *stripe) interpret(body []byte) ([]Callback, error) {
	obj, err := callback.ParseObject(body)
	if err != nil {
		return nil, err
	}
	id, err := obj.Scalar("id")
	if err != nil {
		return nil, err
	}
	// The endpoint secret says the event is Stripe's; livemode and account
	// say whose money it is. A test-mode event never pays a live order, and
	// a connected account's event only the source configured for it.
	live, liveErr := obj.Bool("livemode")
	if liveErr == nil && live != p.livemode {
		return nil, foreign("livemode", strconv.FormatBool(live))
	}
	account, _ := obj.Scalar("account")
	if account != p.account {
		if account == "" {
			return nil, foreign("account", "(the platform's own)")
		}
		return nil, foreign("account", account)
	}
	// From here the event is signed, has its id and is not another
	// merchant's: whatever else it lacks, it is kept as unreadable and
	// answered 2xx (Stripe would retry it for three days), never refused.
	// stripe-go's own test event (webhook.GenerateTestSignedPayload's
	// payload in its tests) has neither type nor livemode.
	typ, err := obj.Scalar("type")
	if err == nil && liveErr != nil {
		err = liveErr
	}
	if err != nil {
		return []Callback{unreadable(id, stripeKey(obj, p.orderPath), err)}, nil
	}
	ev, err := p.event(obj, typ)
	key := stripeKey(obj, p.orderPath)
	if err == nil && len(key) > callback.MaxBusinessKeyLen {
		if ev.Ignored == "" {
			// No order has such a code: kept under the event's id.
			err = badRequest("the order code at %s is longer than %d characters", p.orderPath, callback.MaxBusinessKeyLen)
		}
		key = ""
	}
	if err != nil {
		return []Callback{unreadable(id, key, err)}, nil
	}
	if key == "" {
		key = id
	}
	return []Callback{{EventID: id, BusinessKey: key, Event: ev}}, nil
}

// stripeKey is an event's business key: the order, when the event names
// it; else the payment it is about; "" when it names neither.
func stripeKey(obj callback.Object, orderPath string) string {
	if key, _ := obj.Scalar(orderPath); key != "" {
		return key
	}
	return stripePayment(obj)
}

// stripePayment is the PaymentIntent an event's object is, or belongs to
// (its charge when it has none).
func stripePayment(obj callback.Object) string {
	if t, _ := obj.Scalar("data.object.object"); t == "payment_intent" {
		s, _ := obj.Scalar("data.object.id")
		return s
	}
	if s, err := obj.Scalar("data.object.payment_intent"); err == nil && s != "" {
		return s
	}
	s, _ := obj.Scalar("data.object.charge")
	return s
}

// event maps an event of type typ.
func (p *stripe) event(obj callback.Object, typ string) (callback.PaymentEvent, error) {
	var ev callback.PaymentEvent
	var err error
	switch typ {
	case "payment_intent.succeeded", "payment_intent.payment_failed":
		ev.Status = callback.PaymentSuccess
		// A success pays what was received (a PaymentIntent of amount 5000
		// may have received 100); a failure is about the amount asked.
		amountField := "data.object.amount_received"
		if typ == "payment_intent.payment_failed" {
			ev.Status, amountField = callback.PaymentFailed, "data.object.amount"
		}
		if ev.OrderCode, err = obj.Scalar(p.orderPath); err != nil {
			return ev, err
		}
		if ev.PaymentNo, err = obj.Scalar("data.object.id"); err != nil {
			return ev, err
		}
		if ev.Amount, ev.Currency, err = stripeAmount(obj, amountField); err != nil {
			return ev, err
		}
		// The event's created is when the attempt succeeded or failed
		// (docs.stripe.com/api/events/object#event_object-created).
		if ev.Status == callback.PaymentSuccess {
			ev.PaidAt = unixAt(obj, "created")
		} else {
			ev.OccurredAt = unixAt(obj, "created")
		}
		return ev, nil
	case "payment_intent.canceled":
		// One PaymentIntent is one attempt to pay; the customer may pay
		// the order with another, so its cancellation is a failed
		// payment, not the order's closure.
		ev.Type, ev.Status = callback.TypePayment, callback.PaymentFailed
		ev.OrderCode, _ = obj.Scalar(p.orderPath)
		if ev.PaymentNo, err = obj.Scalar("data.object.id"); err != nil {
			return ev, err
		}
		if ev.Amount, ev.Currency, err = stripeAmount(obj, "data.object.amount"); err != nil {
			return ev, err
		}
		reason, _ := obj.Scalar("data.object.cancellation_reason")
		ev.Reason = strings.TrimSpace("stripe payment_intent.canceled " + reason)
		ev.OccurredAt = unixAt(obj, "created")
		return ev, nil
	case "charge.refunded":
		ev.Type, ev.Status = callback.TypeRefund, callback.RefundSuccess
		ev.OrderCode, _ = obj.Scalar(p.orderPath)
		if ev.PaymentNo = stripePayment(obj); ev.PaymentNo == "" {
			return ev, badRequest("data.object.payment_intent is missing")
		}
		total, currency, err := stripeAmount(obj, "data.object.amount_refunded")
		if err != nil {
			return ev, err
		}
		ev.RefundedTotal, ev.Currency = &total, currency
		ev.OccurredAt = unixAt(obj, "created")
		return ev, nil
	case "refund.created", "refund.updated", "refund.failed", "charge.refund.updated":
		ev.Type = callback.TypeRefund
		ev.OrderCode, _ = obj.Scalar(p.orderPath)
		if ev.RefundNo, err = obj.Scalar("data.object.id"); err != nil {
			return ev, err
		}
		if ev.PaymentNo = stripePayment(obj); ev.PaymentNo == "" {
			return ev, badRequest("data.object.payment_intent is missing")
		}
		status, err := obj.Scalar("data.object.status")
		if err != nil {
			return ev, err
		}
		switch {
		case typ == "refund.failed" || status == "failed":
			ev.Status = callback.RefundFailed
			ev.Reason, _ = obj.Scalar("data.object.failure_reason")
		case status == "canceled":
			ev.Status, ev.Reason = callback.RefundFailed, "canceled"
		case status == "succeeded":
			ev.Status = callback.RefundSuccess
		default: // pending, requires_action
			return callback.PaymentEvent{Ignored: fmt.Sprintf("stripe refund %s is %s", ev.RefundNo, truncate(status))}, nil
		}
		if ev.Amount, ev.Currency, err = stripeAmount(obj, "data.object.amount"); err != nil {
			return ev, err
		}
		// The event's created dates the refund's outcome; the Refund's own
		// created is when it began (a charge.refunded total dated before
		// it cannot have counted it).
		ev.OccurredAt, ev.InitiatedAt = unixAt(obj, "created"), unixAt(obj, "data.object.created")
		return ev, nil
	case "charge.dispute.created", "charge.dispute.closed":
		ev.Type = callback.TypeDispute
		ev.OrderCode, _ = obj.Scalar(p.orderPath)
		if ev.DisputeID, err = obj.Scalar("data.object.id"); err != nil {
			return ev, err
		}
		if ev.PaymentNo = stripePayment(obj); ev.PaymentNo == "" {
			return ev, badRequest("data.object.payment_intent is missing")
		}
		ev.Status = callback.DisputeOpen
		if typ == "charge.dispute.closed" {
			status, err := obj.Scalar("data.object.status")
			if err != nil {
				return ev, err
			}
			switch status {
			// warning_closed: an inquiry closed without a chargeback;
			// prevented: resolved before it became one (Visa's rapid
			// dispute resolution, docs.stripe.com/disputes/prevention/resolution).
			case "won", "warning_closed", "prevented":
				ev.Status = callback.DisputeWon
			case "lost":
				ev.Status = callback.DisputeLost
			default:
				return ev, badRequest("data.object.status %q of a closed dispute is neither won nor lost", truncate(status))
			}
		}
		if ev.Amount, ev.Currency, err = stripeAmount(obj, "data.object.amount"); err != nil {
			return ev, err
		}
		ev.OccurredAt = unixAt(obj, "created")
		return ev, nil
	}
	return callback.PaymentEvent{Ignored: fmt.Sprintf("stripe event type %s changes no payment", typ)}, nil
}

// stripeAmount reads the integer amount at field with the object's
// currency, in ISO 4217 minor units.
func stripeAmount(obj callback.Object, field string) (int64, string, error) {
	amount, err := obj.Scalar(field)
	if err != nil {
		return 0, "", err
	}
	value, err := MinorUnits(amount, 0)
	if err != nil {
		return 0, "", badRequest("%s: %v", field, err)
	}
	currency, err := obj.Scalar("data.object.currency")
	if err != nil {
		return 0, "", err
	}
	n, c, err := stripeDigits.toISO(value, currency)
	if err != nil {
		return 0, "", badRequest("%s: %v", field, err)
	}
	return n, c, nil
}

func (p *stripe) Accepted(stored []Stored) Answer { return acceptedJSON(stored) }

func (p *stripe) Refused(status int, reason string) Answer { return refusedJSON(status, reason) }

// orderOr is the order code at path, or fallback when there is none (an
// event without business effect still needs a business key).
func orderOr(obj callback.Object, path, fallback string) string {
	if s, err := obj.Scalar(path); err == nil && len(s) <= callback.MaxBusinessKeyLen {
		return s
	}
	return fallback
}
