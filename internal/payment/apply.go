package payment

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"callgate/internal/callback"
)

// Before the fold (docs/guarantees.md, "Before the fold"): an event's
// order, its currency, its fact; then Record.

// Errors operators see in last_error; each is counted by its code in
// callgate_callback_failed_reasons_total when the callback ends FAILED.
var (
	ErrOrderNotFound = callback.NewReason("order_not_found", "order not found")
	ErrNoCurrency    = callback.NewReason("no_currency", "no currency")
	ErrAmbiguous     = callback.NewReason("ambiguous_payment", "payment recorded for several orders")
)

// Step is what one fact does to an order whose facts are known.
type Step struct {
	// Recorded is false for a fact the order already has: nothing else
	// happens.
	Recorded bool
	Before   State
	After    State
	Messages []callback.Message
	// Told is orders.warehouse_cancelled after the step.
	Told bool
}

// Record is the one decision for a fact: the fold of order o's facts
// without and with x, and the difference between them. told is whether
// the order's warehouse.cancel was published already. Batch and single
// callbacks, and the tests' model comparisons, all come through here.
func Record(o *Order, facts []Fact, x Fact, told bool) Step {
	for i := range facts {
		if facts[i].Key == x.Key {
			return Step{Told: told}
		}
	}
	before := Derive(o, facts)
	after := Derive(o, append(facts[:len(facts):len(facts)], x))
	msgs, told := Difference(o, &before, &after, &x, told)
	return Step{Recorded: true, Before: before, After: after, Messages: msgs, Told: told}
}

// result is what one callback did.
type result struct {
	msgs []callback.Message
	note string
	// recorded: a fact was written.
	recorded bool
}

func (r result) err() error {
	switch {
	case !r.recorded:
		return callback.NoEffect(r.note)
	case r.note != "":
		return callback.Noted(r.note)
	}
	return nil
}

// record finds p's order and records its fact.
func (h Handler) record(b *book, p *Payload, cb *callback.Log) (result, error) {
	o, err := h.orderOf(b, p, cb)
	if err != nil {
		return result{}, err
	}
	currency := o.Currency
	if movesMoney(p) || p.Currency != "" {
		if currency, err = h.currencyOf(p, cb); err != nil {
			return result{}, err
		}
	}
	x := FactOf(p, o.OrderCode, currency, cb)
	if b.keys[o.OrderCode+"\x00"+x.Key] {
		return result{note: "already recorded: " + x.Key}, nil
	}
	st := Record(o, b.facts[o.OrderCode], x, o.WarehouseCancelled)
	b.addFact(x)
	o.set(&st.After, st.Told)
	b.orderChanged(o)
	return result{msgs: st.Messages, note: noteOf(&st), recorded: true}, nil
}

// noteOf says what changed for the attempt: the exceptions' details, or
// that the money did not change.
func noteOf(st *Step) string {
	b, a := &st.Before, &st.After
	if len(st.Messages) == 0 && a.Status == b.Status && a.PaymentNo == b.PaymentNo && a.Refunded == b.Refunded &&
		a.Chargeback == b.Chargeback && a.DisputeStatus == b.DisputeStatus {
		return "recorded: the order's money is unchanged"
	}
	var notes []string
	for k, e := range st.After.Exceptions {
		if _, ok := st.Before.Exceptions[k]; !ok && e.Detail != "" {
			notes = append(notes, "exception "+e.Kind+": "+e.Detail)
		}
	}
	if st.After.Excess > st.Before.Excess {
		notes = append(notes, fmt.Sprintf("exception %s: %d beyond the order's amount", ExceptionOverRefund, st.After.Excess-st.Before.Excess))
	}
	sort.Strings(notes)
	return strings.Join(notes, "; ")
}

// orderOf finds p's order: by its code, else by what it names. None
// waits until worker.order_grace after the callback was received.
func (h Handler) orderOf(b *book, p *Payload, cb *callback.Log) (*Order, error) {
	if p.OrderCode != "" {
		if o := b.orders[p.OrderCode]; o != nil {
			return o, nil
		}
	}
	switch codes := b.codesOf(p); len(codes) {
	case 0:
		if p.OrderCode == "" {
			return nil, h.notFound(cb, fmt.Errorf("%w: nothing recorded for %s", ErrOrderNotFound, describe(p)))
		}
		return nil, h.notFound(cb, ErrOrderNotFound)
	case 1:
		if o := b.orders[codes[0]]; o != nil {
			return o, nil
		}
		return nil, h.notFound(cb, ErrOrderNotFound)
	default:
		return nil, callback.Permanent(fmt.Errorf("%w: %s for %s", ErrAmbiguous, describe(p), strings.Join(codes, ", ")))
	}
}

func describe(p *Payload) string {
	parts := []string{}
	if p.PaymentNo != "" {
		parts = append(parts, "payment "+p.PaymentNo)
	}
	if p.RefundNo != "" {
		parts = append(parts, "refund "+p.RefundNo)
	}
	if p.DisputeID != "" {
		parts = append(parts, "dispute "+p.DisputeID)
	}
	return strings.Join(parts, ", ")
}

// notFound is err while the order may still come (the notification raced
// the shop's own commit): retried until worker.order_grace after the
// callback was received, whatever its retry budget; FAILED after it.
func (h Handler) notFound(cb *callback.Log, err error) error {
	until := cb.ReceivedAt.Add(h.OrderGrace)
	if h.now().Before(until) {
		return callback.NotYetUntil(err, until)
	}
	return callback.Permanent(err)
}

// currencyOf is p's currency: its own, else its source's payment_currency.
func (h Handler) currencyOf(p *Payload, cb *callback.Log) (string, error) {
	c := p.Currency
	if c == "" {
		c = h.Currencies[cb.Source]
	}
	if c == "" {
		return "", callback.Permanent(fmt.Errorf("%w: the event names none and source %s sets no payment_currency", ErrNoCurrency, cb.Source))
	}
	code, err := callback.Currency(c)
	if err != nil {
		return "", callback.Permanent(fmt.Errorf("invalid payload: %w", err))
	}
	return code, nil
}

func (h Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}
