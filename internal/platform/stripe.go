package platform

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Stripe (preset stripe): a JSON Event signed in Stripe-Signature
// (t=...,v1=... over "t.body", HMAC-SHA256 keyed with the whole whsec_
// secret), with a timestamp window. Event id: id. payment_intent.succeeded
// pays, payment_intent.payment_failed fails, any other type is stored and
// processed without effect. Order: data.object.metadata.order_code (or
// order_path); payment: data.object.id; amount: data.object.amount_received
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
	obj, err := callback.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	id, err := obj.Scalar("id")
	if err != nil {
		return nil, err
	}
	typ, err := obj.Scalar("type")
	if err != nil {
		return nil, err
	}
	// The endpoint secret says the event is Stripe's; livemode and account
	// say whose money it is. A test-mode event never pays a live order, and
	// a connected account's event only the source configured for it.
	live, err := obj.Bool("livemode")
	if err != nil {
		return nil, err
	}
	if live != p.livemode {
		return nil, foreign("livemode", strconv.FormatBool(live))
	}
	account, _ := obj.Scalar("account")
	if account != p.account {
		if account == "" {
			return nil, foreign("account", "(the platform's own)")
		}
		return nil, foreign("account", account)
	}
	ev := callback.PaymentEvent{}
	switch typ {
	case "payment_intent.succeeded":
		ev.Status = callback.PaymentSuccess
	case "payment_intent.payment_failed":
		ev.Status = callback.PaymentFailed
	default:
		ev.Ignored = fmt.Sprintf("stripe event type %s is neither a payment nor a failed payment", typ)
		return []Callback{{EventID: id, BusinessKey: orderOr(obj, p.orderPath, id), Event: ev}}, nil
	}
	if ev.OrderCode, err = obj.Scalar(p.orderPath); err != nil {
		return nil, err
	}
	if ev.PaymentNo, err = obj.Scalar("data.object.id"); err != nil {
		return nil, err
	}
	// A success pays what was received (a PaymentIntent of amount 5000
	// may have received 100); a failure is about the amount asked.
	amountField := "data.object.amount_received"
	if ev.Status == callback.PaymentFailed {
		amountField = "data.object.amount"
	}
	amount, err := obj.Scalar(amountField)
	if err != nil {
		return nil, err
	}
	value, err := MinorUnits(amount, 0)
	if err != nil {
		return nil, badRequest("%s: %v", amountField, err)
	}
	currency, err := obj.Scalar("data.object.currency")
	if err != nil {
		return nil, err
	}
	if ev.Amount, ev.Currency, err = stripeDigits.toISO(value, currency); err != nil {
		return nil, badRequest("%s: %v", amountField, err)
	}
	if created, err := obj.Scalar("created"); err == nil {
		if sec, err := MinorUnits(created, 0); err == nil {
			t := time.Unix(sec, 0).UTC()
			ev.PaidAt = &t
		}
	}
	return []Callback{{EventID: id, BusinessKey: ev.OrderCode, Event: ev}}, nil
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
