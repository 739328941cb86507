package payment

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"callgate/internal/callback"
)

// History is an order's money as on-call reads it: the order, and the
// payments, refunds and disputes recorded for it, each with the callbacks
// that recorded it first and last changed it.
type History struct {
	Order    Order
	Payments []Payment
	Refunds  []Refund
	Disputes []Dispute
}

// HistoryOf is the money history of the order callback cb is about (by
// its order code, or by the payment it names), or nil when cb is not a
// payment-kind callback, cannot be read, or names no order that exists.
// Plain reads, one statement per table.
func HistoryOf(ctx context.Context, db *gorm.DB, cb *callback.Log) (*History, error) {
	if cb.Kind != callback.KindPayment {
		return nil, nil
	}
	var ev callback.PaymentEvent
	if err := json.Unmarshal(cb.Event(), &ev); err != nil || ev.Ignored != "" {
		return nil, nil
	}
	db = db.WithContext(ctx)
	code := ev.OrderCode
	if code == "" {
		if ev.PaymentNo == "" {
			return nil, nil
		}
		var codes []string
		if err := db.Raw(`SELECT DISTINCT order_code FROM payments WHERE payment_no = ?`, ev.PaymentNo).Scan(&codes).Error; err != nil {
			return nil, fmt.Errorf("error looking up payment %s: %w", ev.PaymentNo, err)
		}
		if len(codes) != 1 {
			return nil, nil
		}
		code = codes[0]
	}
	h := &History{}
	var orders []Order
	if err := db.Raw(`SELECT order_code, user_id, amount, currency, payment_status, payment_no, paid_at, refunded_amount, dispute_status
		FROM orders WHERE order_code = ?`, code).Scan(&orders).Error; err != nil {
		return nil, fmt.Errorf("error loading order %s: %w", code, err)
	}
	if len(orders) == 0 {
		return nil, nil
	}
	h.Order = orders[0]
	for _, q := range []struct {
		table string
		dest  any
	}{{"payments", &h.Payments}, {"refunds", &h.Refunds}, {"disputes", &h.Disputes}} {
		if err := db.Raw(`SELECT * FROM `+q.table+` WHERE order_code = ? ORDER BY created_at, callback_log_id`, code).Scan(q.dest).Error; err != nil {
			return nil, fmt.Errorf("error loading the %s of order %s: %w", q.table, code, err)
		}
	}
	return h, nil
}
