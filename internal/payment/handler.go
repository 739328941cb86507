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

var (
	_ callback.BatchHandler = Handler{}
	_ callback.EventChecker = Handler{}
)

// OrderGraceDefault is worker.order_grace's default.
const OrderGraceDefault = 10 * time.Minute

// Handle implements callback.Handler: HandleBatch applied to a batch of
// one, so a callback is decided by the same code whether it runs alone
// (worker.batch_size 1, a message carrying one id, a batch's fallback) or
// in a batch.
func (h Handler) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	return h.HandleBatch(ctx, tx, []*callback.Log{cb}, []callback.Outbox{out})[0]
}

// HandleBatch implements callback.BatchHandler: one statement reads and
// locks the orders the batch's events touch, one reads their facts; each
// callback's fact is recorded and its order derived again, in id order,
// on the facts the callbacks before it left; one statement per table
// writes what changed.
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
	results := make([]result, len(cbs))
	for i, p := range events {
		if p == nil {
			continue
		}
		r, err := h.record(b, p, cbs[i])
		if err != nil {
			errs[i] = err
			return errs
		}
		results[i] = r
	}
	if err := b.write(db); err != nil {
		return callback.FailBatch(errs, err)
	}
	for i, p := range events {
		if p == nil {
			continue
		}
		for _, msg := range results[i].msgs {
			if err := outs[i].Add(ctx, msg); err != nil {
				errs[i] = err
				return errs
			}
		}
		errs[i] = results[i].err()
	}
	return errs
}

// read locks the orders the batch's events name, finds the orders of
// those that name none (or one that does not exist) by the numbers they
// name, locks those, and reads the facts of all of them.
func (h Handler) read(db *gorm.DB, b *book, events []*Payload) error {
	var codes []string
	for _, p := range events {
		if p != nil && p.OrderCode != "" {
			codes = append(codes, p.OrderCode)
		}
	}
	if err := b.lockOrders(db, unique(codes)); err != nil {
		return err
	}
	refs := map[string][]string{}
	for _, p := range events {
		if p == nil || p.OrderCode != "" && b.orders[p.OrderCode] != nil {
			continue
		}
		for kind, ref := range refsOf(p) {
			refs[kind] = append(refs[kind], ref)
		}
	}
	if err := b.lookup(db, refs); err != nil {
		return err
	}
	codes = codes[:0]
	for _, p := range events {
		if p != nil && (p.OrderCode == "" || b.orders[p.OrderCode] == nil) {
			codes = append(codes, b.codesOf(p)...)
		}
	}
	if err := b.lockOrders(db, unique(codes)); err != nil {
		return err
	}
	return b.readFacts(db)
}

// refsOf are the numbers an event can be found by, by fact kind: its
// payment, and its refund or dispute.
func refsOf(p *Payload) map[string]string {
	refs := map[string]string{}
	if p.PaymentNo != "" {
		refs[KindPayment] = p.PaymentNo
	}
	if p.Type == callback.TypeRefund && p.RefundNo != "" {
		refs[KindRefund] = p.RefundNo
	}
	if p.Type == callback.TypeDispute && p.DisputeID != "" {
		refs[KindDispute] = p.DisputeID
	}
	return refs
}

// codesOf are the orders recorded for what p names, first by its payment,
// else by its refund or dispute.
func (b *book) codesOf(p *Payload) []string {
	if p.PaymentNo != "" {
		if codes := b.byRef[KindPayment+"\x00"+p.PaymentNo]; len(codes) > 0 {
			return codes
		}
	}
	switch {
	case p.Type == callback.TypeRefund && p.RefundNo != "":
		return b.byRef[KindRefund+"\x00"+p.RefundNo]
	case p.Type == callback.TypeDispute && p.DisputeID != "":
		return b.byRef[KindDispute+"\x00"+p.DisputeID]
	}
	return nil
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
