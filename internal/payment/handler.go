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

var _ callback.Handler = Handler{}

// Errors operators see in last_error.
var (
	ErrOrderNotFound  = errors.New("order not found")
	ErrAmountMismatch = errors.New("amount mismatch")
	ErrPaidByAnother  = errors.New("order already paid by another payment")
)

// Handle implements callback.Handler.
func (Handler) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	var p Payload
	if err := callback.DecodePayload(cb.Event(), &p); err != nil {
		return err
	}
	if p.Ignored != "" {
		return callback.NoEffect(p.Ignored)
	}
	if p.OrderCode == "" || p.PaymentNo == "" {
		return callback.Permanentf("invalid payload: orderCode and paymentNo are required")
	}
	if p.Status != callback.PaymentSuccess && p.Status != callback.PaymentFailed {
		return callback.Permanentf("invalid payload: status %q is not SUCCESS or FAILED", p.Status)
	}

	// Plain statements rather than gorm's model methods: this handler runs
	// for every payment, and each statement costs the worker and the
	// database the same whatever builds it, plus what gorm adds.
	db := tx.WithContext(ctx)
	var found []Order
	err := db.Raw(`SELECT order_code, user_id, amount, payment_status, payment_no, paid_at FROM orders WHERE order_code = ? FOR UPDATE`,
		p.OrderCode).Scan(&found).Error
	if err != nil {
		return fmt.Errorf("error loading order %s: %w", p.OrderCode, err)
	}
	if len(found) == 0 {
		return callback.Permanent(ErrOrderNotFound)
	}
	o := found[0]
	if p.Amount != o.Amount {
		return callback.Permanent(fmt.Errorf("%w: callback %d, order %d", ErrAmountMismatch, p.Amount, o.Amount))
	}

	if o.PaymentStatus == OrderPaid {
		if o.PaymentNo != nil && *o.PaymentNo == p.PaymentNo {
			return nil // the same payment again: already applied
		}
		if p.Status == callback.PaymentFailed {
			return nil // a failed attempt of another payment changes nothing
		}
		return callback.Permanent(ErrPaidByAnother)
	}

	if p.Status == callback.PaymentFailed {
		return db.Exec(`UPDATE orders SET payment_status = ? WHERE order_code = ?`, OrderPaymentFailed, o.OrderCode).Error
	}

	paidAt := cb.ReceivedAt
	if p.PaidAt != nil && !p.PaidAt.IsZero() {
		paidAt = *p.PaidAt
	}
	err = db.Exec(`UPDATE orders SET payment_status = ?, payment_no = ?, paid_at = ? WHERE order_code = ?`,
		OrderPaid, p.PaymentNo, paidAt.UTC(), o.OrderCode).Error
	if err != nil {
		return fmt.Errorf("error marking order %s paid: %w", p.OrderCode, err)
	}
	if err := out.Add(ctx, callback.Message{RoutingKey: RoutingWarehouseShip, Payload: map[string]any{"orderCode": o.OrderCode}}); err != nil {
		return err
	}
	return out.Add(ctx, callback.Message{RoutingKey: RoutingPointsAdd, Payload: map[string]any{
		"orderCode": o.OrderCode, "userId": o.UserID, "amount": o.Amount,
	}})
}
