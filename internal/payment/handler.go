// Package payment is the demo handler of payment callbacks: it marks an
// order PAID and tells the warehouse to ship it and the loyalty system to
// add points. It is an example of a callback.Handler: it runs inside the
// worker's transaction, is idempotent, and says through its error whether a
// failure is worth retrying.
package payment

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"callgate/internal/callback"
)

// Routing keys of the notifications this handler writes.
const (
	RoutingWarehouseShip = "warehouse.ship"
	RoutingPointsAdd     = "points.add"
)

// Payment statuses of orders.payment_status.
const (
	OrderUnpaid = "UNPAID"
	OrderPaid   = "PAID"
	// OrderPaymentFailed: the platform reported a failed payment for an
	// unpaid order; a later successful payment still pays it.
	OrderPaymentFailed = "FAILED"
)

// Order is one orders row.
type Order struct {
	OrderCode string `gorm:"column:order_code;primaryKey"`
	UserID    int64  `gorm:"column:user_id"`
	// Amount is in the minor units of Currency.
	Amount int64 `gorm:"column:amount"`
	// Currency is the ISO 4217 code, upper case.
	Currency      string     `gorm:"column:currency"`
	PaymentStatus string     `gorm:"column:payment_status"`
	PaymentNo     *string    `gorm:"column:payment_no"`
	PaidAt        *time.Time `gorm:"column:paid_at"`
}

// TableName tells gorm the table.
func (Order) TableName() string { return "orders" }

// Payload is the canonical payment event: what the demo source paydemo
// sends, and what every payment preset (Alipay, WeChat Pay, Stripe, Adyen,
// Shopify) maps its notification to.
type Payload = callback.PaymentEvent

// Handler processes payment callbacks.
type Handler struct{}

var _ callback.BatchHandler = Handler{}

// Errors operators see in last_error; each is counted by its code in
// callgate_callback_failed_reasons_total.
var (
	ErrOrderNotFound    = callback.NewReason("order_not_found", "order not found")
	ErrAmountMismatch   = callback.NewReason("amount_mismatch", "amount mismatch")
	ErrCurrencyMismatch = callback.NewReason("currency_mismatch", "currency mismatch")
	ErrPaidByAnother    = callback.NewReason("paid_by_another", "order already paid by another payment")
)

// Handle implements callback.Handler: HandleBatch applied to a batch of
// one, so a callback is decided by the same code whether it runs alone
// (worker.batch_size 1, a message carrying one id, a batch's fallback) or
// in a batch.
func (h Handler) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	return h.HandleBatch(ctx, tx, []*callback.Log{cb}, []callback.Outbox{out})[0]
}

// HandleBatch implements callback.BatchHandler: one statement locks the
// batch's orders, one writes those that changed, whatever the batch's size.
// Each callback is decided by decide, in id order, on the orders as the
// callbacks before it left them.
func (Handler) HandleBatch(ctx context.Context, tx *gorm.DB, cbs []*callback.Log, outs []callback.Outbox) []error {
	errs := make([]error, len(cbs))
	events := make([]*Payload, len(cbs))
	codes := make([]string, 0, len(cbs))
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
		codes = append(codes, p.OrderCode)
	}
	// Plain statements rather than gorm's model methods: this handler runs
	// for every payment, and each statement costs the worker and the
	// database the same whatever builds it, plus what gorm adds.
	db := tx.WithContext(ctx)
	orders, err := lockOrders(db, codes)
	if err != nil {
		return callback.FailBatch(errs, err)
	}
	var changed []*Order
	seen := map[string]bool{}
	effects := make([]effect, len(cbs))
	for i, p := range events {
		if p == nil {
			continue
		}
		o := orders[p.OrderCode] // nil: no such order
		e, err := decide(o, *p, cbs[i])
		if err != nil {
			errs[i] = err
			return errs
		}
		if e.changed && !seen[o.OrderCode] {
			seen[o.OrderCode] = true
			changed = append(changed, o)
		}
		effects[i] = e
	}
	if err := writeOrders(db, changed); err != nil {
		return callback.FailBatch(errs, err)
	}
	for i, p := range events {
		if effects[i].paid {
			if err := notify(ctx, outs[i], orders[p.OrderCode]); err != nil {
				errs[i] = err
				return errs
			}
		}
	}
	return errs
}

// event decodes and checks a callback's payment event.
func event(cb *callback.Log) (Payload, error) {
	var p Payload
	if err := callback.DecodePayload(cb.Event(), &p); err != nil {
		return p, err
	}
	if p.Ignored != "" {
		return p, callback.NoEffect(p.Ignored)
	}
	if p.OrderCode == "" || p.PaymentNo == "" {
		return p, callback.Permanentf("invalid payload: orderCode and paymentNo are required")
	}
	if p.Status != callback.PaymentSuccess && p.Status != callback.PaymentFailed {
		return p, callback.Permanentf("invalid payload: status %q is not SUCCESS or FAILED", p.Status)
	}
	return p, nil
}

// effect is what one payment does to its order.
type effect struct {
	// changed: the order's row changed (it is written back).
	changed bool
	// paid: this payment paid the order, so the warehouse ships it and the
	// loyalty system adds its points. Only a SUCCESS that moves an order
	// to PAID does; a FAILED payment never does.
	paid bool
}

// decide is the one place that decides what payment p does to order o
// (nil when no such order exists), and does it to o: the order's change
// and whether it is notified, or why p cannot be applied. Both paths of
// the handler come here, callback by callback.
func decide(o *Order, p Payload, cb *callback.Log) (effect, error) {
	if o == nil {
		return effect{}, callback.Permanent(ErrOrderNotFound)
	}
	// A payment is in a currency: the event's, or, from a configured JSON
	// source that sends none, the order's. The presets always send one.
	currency := o.Currency
	if p.Currency != "" {
		c, err := callback.Currency(p.Currency)
		if err != nil {
			return effect{}, callback.Permanent(fmt.Errorf("invalid payload: %w", err))
		}
		currency = c
	}
	if currency != o.Currency {
		return effect{}, callback.Permanent(fmt.Errorf("%w: payment in %s, order in %s", ErrCurrencyMismatch, currency, o.Currency))
	}
	if p.Amount != o.Amount {
		return effect{}, callback.Permanent(fmt.Errorf("%w: callback %d, order %d (%s minor units)", ErrAmountMismatch, p.Amount, o.Amount, currency))
	}
	if o.PaymentStatus == OrderPaid {
		if o.PaymentNo != nil && *o.PaymentNo == p.PaymentNo {
			return effect{}, nil // the same payment again: already applied
		}
		if p.Status == callback.PaymentFailed {
			return effect{}, nil // a failed attempt of another payment changes nothing
		}
		return effect{}, callback.Permanent(ErrPaidByAnother)
	}
	if p.Status == callback.PaymentFailed {
		if o.PaymentStatus == OrderPaymentFailed {
			return effect{}, nil // already marked failed
		}
		o.PaymentStatus = OrderPaymentFailed
		return effect{changed: true}, nil
	}
	paidAt := cb.ReceivedAt
	if p.PaidAt != nil && !p.PaidAt.IsZero() {
		paidAt = *p.PaidAt
	}
	paidAt = paidAt.UTC()
	no := p.PaymentNo
	o.PaymentStatus, o.PaymentNo, o.PaidAt = OrderPaid, &no, &paidAt
	return effect{changed: true, paid: true}, nil
}

// lockOrders reads and locks the orders of codes, by code.
func lockOrders(db *gorm.DB, codes []string) (map[string]*Order, error) {
	out := make(map[string]*Order, len(codes))
	if len(codes) == 0 {
		return out, nil
	}
	var found []Order
	err := db.Raw(`SELECT order_code, user_id, amount, currency, payment_status, payment_no, paid_at FROM orders WHERE order_code IN ? FOR UPDATE`,
		codes).Scan(&found).Error
	if err != nil {
		return nil, fmt.Errorf("error loading orders: %w", err)
	}
	for i := range found {
		out[found[i].OrderCode] = &found[i]
	}
	return out, nil
}

// writeOrders stores the payment columns of orders in one statement.
func writeOrders(db *gorm.DB, orders []*Order) error {
	if len(orders) == 0 {
		return nil
	}
	var q strings.Builder
	args := make([]any, 0, 7*len(orders))
	q.WriteString("UPDATE orders SET payment_status = CASE order_code")
	for _, o := range orders {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, o.OrderCode, o.PaymentStatus)
	}
	q.WriteString(" END, payment_no = CASE order_code")
	for _, o := range orders {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, o.OrderCode, o.PaymentNo)
	}
	q.WriteString(" END, paid_at = CASE order_code")
	for _, o := range orders {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, o.OrderCode, o.PaidAt)
	}
	q.WriteString(" END WHERE order_code IN ?")
	codes := make([]string, len(orders))
	for i, o := range orders {
		codes[i] = o.OrderCode
	}
	args = append(args, codes)
	if err := db.Exec(q.String(), args...).Error; err != nil {
		return fmt.Errorf("error updating orders: %w", err)
	}
	return nil
}

// notify writes a paid order's notifications: ship it, add the points.
func notify(ctx context.Context, out callback.Outbox, o *Order) error {
	if err := out.Add(ctx, callback.Message{RoutingKey: RoutingWarehouseShip, Payload: map[string]any{"orderCode": o.OrderCode}}); err != nil {
		return err
	}
	return out.Add(ctx, callback.Message{RoutingKey: RoutingPointsAdd, Payload: map[string]any{
		"orderCode": o.OrderCode, "userId": o.UserID, "amount": o.Amount, "currency": o.Currency,
	}})
}
