// Package payment is the demo handler of payment callbacks: it marks an
// order PAID and tells the warehouse to ship it and the loyalty system to
// add points. It is an example of a callback.Handler: it runs inside the
// worker's transaction, is idempotent, and says through its error whether a
// failure is worth retrying.
package payment

import (
	"context"
	"errors"
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
	OrderCode     string     `gorm:"column:order_code;primaryKey"`
	UserID        int64      `gorm:"column:user_id"`
	Amount        int64      `gorm:"column:amount"`
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

// Errors operators see in last_error.
var (
	ErrOrderNotFound  = errors.New("order not found")
	ErrAmountMismatch = errors.New("amount mismatch")
	ErrPaidByAnother  = errors.New("order already paid by another payment")
)

// Handle implements callback.Handler.
func (Handler) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	p, err := event(cb)
	if err != nil {
		return err
	}
	// Plain statements rather than gorm's model methods: this handler runs
	// for every payment, and each statement costs the worker and the
	// database the same whatever builds it, plus what gorm adds.
	db := tx.WithContext(ctx)
	orders, err := lockOrders(db, []string{p.OrderCode})
	if err != nil {
		return err
	}
	o, ok := orders[p.OrderCode]
	if !ok {
		return callback.Permanent(ErrOrderNotFound)
	}
	changed, err := apply(o, p, cb)
	if err != nil || !changed {
		return err
	}
	if err := writeOrders(db, []*Order{o}); err != nil {
		return err
	}
	return notify(ctx, out, o)
}

// HandleBatch implements callback.BatchHandler: one statement locks the
// batch's orders, one writes those that changed, whatever the batch's size.
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
	db := tx.WithContext(ctx)
	orders, err := lockOrders(db, codes)
	if err != nil {
		return callback.FailBatch(errs, err)
	}
	var changed []*Order
	seen := map[string]bool{}
	paid := make([]bool, len(cbs))
	for i, p := range events {
		if p == nil {
			continue
		}
		o, ok := orders[p.OrderCode]
		if !ok {
			errs[i] = callback.Permanent(ErrOrderNotFound)
			return errs
		}
		c, err := apply(o, *p, cbs[i])
		if err != nil {
			errs[i] = err
			return errs
		}
		if c && !seen[o.OrderCode] {
			seen[o.OrderCode] = true
			changed = append(changed, o)
		}
		paid[i] = c && o.PaymentStatus == OrderPaid
	}
	if err := writeOrders(db, changed); err != nil {
		return callback.FailBatch(errs, err)
	}
	for i, p := range events {
		if paid[i] {
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

// apply decides what payment p does to order o, and does it to o: whether
// o changed, or why p cannot be applied.
func apply(o *Order, p Payload, cb *callback.Log) (bool, error) {
	if p.Amount != o.Amount {
		return false, callback.Permanent(fmt.Errorf("%w: callback %d, order %d", ErrAmountMismatch, p.Amount, o.Amount))
	}
	if o.PaymentStatus == OrderPaid {
		if o.PaymentNo != nil && *o.PaymentNo == p.PaymentNo {
			return false, nil // the same payment again: already applied
		}
		if p.Status == callback.PaymentFailed {
			return false, nil // a failed attempt of another payment changes nothing
		}
		return false, callback.Permanent(ErrPaidByAnother)
	}
	if p.Status == callback.PaymentFailed {
		o.PaymentStatus = OrderPaymentFailed
		return true, nil
	}
	paidAt := cb.ReceivedAt
	if p.PaidAt != nil && !p.PaidAt.IsZero() {
		paidAt = *p.PaidAt
	}
	paidAt = paidAt.UTC()
	no := p.PaymentNo
	o.PaymentStatus, o.PaymentNo, o.PaidAt = OrderPaid, &no, &paidAt
	return true, nil
}

// lockOrders reads and locks the orders of codes, by code.
func lockOrders(db *gorm.DB, codes []string) (map[string]*Order, error) {
	out := make(map[string]*Order, len(codes))
	if len(codes) == 0 {
		return out, nil
	}
	var found []Order
	err := db.Raw(`SELECT order_code, user_id, amount, payment_status, payment_no, paid_at FROM orders WHERE order_code IN ? FOR UPDATE`,
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
		"orderCode": o.OrderCode, "userId": o.UserID, "amount": o.Amount,
	}})
}
