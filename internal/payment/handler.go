// Package payment is the demo handler of payment callbacks: it follows an
// order's money through its whole life (paid, refunded in part or in
// full, closed, disputed) by docs/guarantees.md's rule table, records every
// payment, refund and dispute once by its platform id, and tells the
// warehouse, the loyalty system and the order system what changed. It is
// an example of a callback.Handler: it runs inside the worker's
// transaction, is idempotent, and says through its error whether a
// failure is worth retrying.
package payment

import (
	"context"
	"time"

	"gorm.io/gorm"

	"callgate/internal/callback"
)

// Handler processes payment callbacks. The zero value is usable: no
// grace for an order not found yet, no source currencies.
type Handler struct {
	// OrderGrace is how long after it was received an event whose order
	// does not exist (yet) waits for it, retried with its source's
	// backoff, before it is FAILED "order not found" (worker.order_grace).
	OrderGrace time.Duration
	// Currencies are the payment_currency settings of the configured JSON
	// sources, by source name: the currency of their events that name
	// none.
	Currencies map[string]string
	// Now is the clock (tests set it); nil is time.Now.
	Now func() time.Time
}

var _ callback.BatchHandler = Handler{}

// OrderGraceDefault is worker.order_grace's default.
const OrderGraceDefault = 10 * time.Minute

// Handle implements callback.Handler: HandleBatch applied to a batch of
// one, so a callback is decided by the same code whether it runs alone
// (worker.batch_size 1, a message carrying one id, a batch's fallback) or
// in a batch.
func (h Handler) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	return h.HandleBatch(ctx, tx, []*callback.Log{cb}, []callback.Outbox{out})[0]
}

// HandleBatch implements callback.BatchHandler: one statement per table
// reads and locks what the batch touches (orders always; payments,
// refunds and disputes only when its events need them), each callback is
// decided by decide, in id order, on the rows as the callbacks before it
// left them, and one statement per table writes what changed.
func (h Handler) HandleBatch(ctx context.Context, tx *gorm.DB, cbs []*callback.Log, outs []callback.Outbox) []error {
	errs := make([]error, len(cbs))
	events := make([]*Payload, len(cbs))
	for i, cb := range cbs {
		p, err := event(cb)
		if err != nil {
			errs[i] = err
			if _, ok := callback.AsNoEffect(err); !ok {
				return errs
			}
			continue
		}
		events[i] = &p
	}
	// Plain statements rather than gorm's model methods: this handler runs
	// for every payment, and each statement costs the worker and the
	// database the same whatever builds it, plus what gorm adds.
	db := tx.WithContext(ctx)
	b := newBook()
	if err := h.read(db, b, events); err != nil {
		return callback.FailBatch(errs, err)
	}
	outcomes := make([]outcome, len(cbs))
	for i, p := range events {
		if p == nil {
			continue
		}
		o, err := h.decide(b, p, cbs[i])
		if err != nil {
			errs[i] = err
			return errs
		}
		outcomes[i] = o
	}
	if err := b.write(db); err != nil {
		return callback.FailBatch(errs, err)
	}
	for i, p := range events {
		if p == nil {
			continue
		}
		for _, msg := range outcomes[i].msgs {
			if err := outs[i].Add(ctx, msg); err != nil {
				errs[i] = err
				return errs
			}
		}
		errs[i] = outcomes[i].result()
	}
	return errs
}

// read loads what the batch's events need: the orders of the payments they
// name only by number, their orders (locked), and, locked too, the
// refunds and disputes of the orders that refund and dispute events touch
// and the payments of the orders a payment may not simply pay, or that a
// refund or dispute names a payment of before they are paid.
func (h Handler) read(db *gorm.DB, b *book, events []*Payload) error {
	var nos []string
	for _, p := range events {
		if p != nil && p.OrderCode == "" && p.PaymentNo != "" {
			nos = append(nos, p.PaymentNo)
		}
	}
	if err := b.lookupPayments(db, nos); err != nil {
		return err
	}
	codesOf := func(p *Payload) []string {
		if p.OrderCode != "" {
			return []string{p.OrderCode}
		}
		return b.byPayment[p.PaymentNo]
	}
	var codes []string
	for _, p := range events {
		if p != nil {
			codes = append(codes, codesOf(p)...)
		}
	}
	if err := b.lockOrders(db, unique(codes)); err != nil {
		return err
	}
	var payments, refunds, disputes []string
	successes := map[string]int{}
	for _, p := range events {
		if p != nil && p.Type == callback.TypePayment && p.Status == callback.PaymentSuccess {
			successes[p.OrderCode]++
		}
	}
	for _, p := range events {
		if p == nil {
			continue
		}
		switch p.Type {
		case callback.TypeRefund, callback.TypeDispute:
			// A refund counts what lost disputes left; a dispute takes
			// what refunds left: each reads both.
			refunds = append(refunds, codesOf(p)...)
			disputes = append(disputes, codesOf(p)...)
			// Of an order not paid yet, the payments recorded say whether
			// it names a payment that did not pay it (otherPayment).
			for _, code := range codesOf(p) {
				if o := b.orders[code]; o != nil && o.PaymentNo == nil && p.PaymentNo != "" {
					payments = append(payments, code)
				}
			}
		case callback.TypePayment:
			// The common case, a payment of an unpaid order of its amount,
			// reads no payments rows.
			o := b.orders[p.OrderCode]
			if p.Status == callback.PaymentSuccess && o != nil && (successes[p.OrderCode] > 1 || o.PaymentStatus != OrderUnpaid && o.PaymentStatus != OrderPaymentFailed ||
				p.Amount != o.Amount || p.Currency != "" && p.Currency != o.Currency) {
				payments = append(payments, p.OrderCode)
			}
		}
	}
	if err := b.lockRows(db, "payments", unique(payments)); err != nil {
		return err
	}
	if err := b.lockRows(db, "refunds", unique(refunds)); err != nil {
		return err
	}
	return b.lockRows(db, "disputes", unique(disputes))
}

// unique drops repeats, keeping the first.
func unique(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
