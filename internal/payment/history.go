package payment

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"callgate/internal/callback"
)

// History is an order's money as on-call reads it: the order, what its
// facts derive, and the facts in the order the fold takes them (by the
// platform's time), each with its rank by arrival.
type History struct {
	Order Order
	State State
	// Facts in fold order; Arrival[i] is the place of Facts[i] by arrival
	// (1 first).
	Facts   []Fact
	Arrival []int
}

// HistoryOf is the money history of the order callback cb is about (by
// its order code, or by the payment, refund or dispute it names), or nil
// when cb is not a payment-kind callback, cannot be read, or names no
// order that exists. Plain reads.
func HistoryOf(ctx context.Context, db *gorm.DB, cb *callback.Log) (*History, error) {
	if cb.Kind != callback.KindPayment {
		return nil, nil
	}
	var ev callback.PaymentEvent
	if err := json.Unmarshal(cb.Event(), &ev); err != nil || ev.Ignored != "" {
		return nil, nil
	}
	db = db.WithContext(ctx)
	b := newBook()
	code := ev.OrderCode
	var orders []Order
	if code != "" {
		if err := db.Raw(`SELECT `+orderColumns+` FROM orders WHERE order_code = ?`, code).Scan(&orders).Error; err != nil {
			return nil, fmt.Errorf("error loading order %s: %w", code, err)
		}
	}
	if len(orders) == 0 {
		refs := map[string][]string{}
		for kind, ref := range refsOf(&ev) {
			refs[kind] = []string{ref}
		}
		if err := b.lookup(db, refs); err != nil {
			return nil, err
		}
		codes := b.codesOf(&ev)
		if len(codes) != 1 {
			return nil, nil
		}
		code = codes[0]
		if err := db.Raw(`SELECT `+orderColumns+` FROM orders WHERE order_code = ?`, code).Scan(&orders).Error; err != nil {
			return nil, fmt.Errorf("error loading order %s: %w", code, err)
		}
		if len(orders) == 0 {
			return nil, nil
		}
	}
	h := &History{Order: orders[0]}
	if err := db.Raw(`SELECT * FROM payment_facts WHERE order_code = ? ORDER BY callback_log_id, fact_key`, code).Scan(&h.Facts).Error; err != nil {
		return nil, fmt.Errorf("error loading the facts of order %s: %w", code, err)
	}
	arrival := map[string]int{}
	for i, f := range h.Facts {
		arrival[f.Key] = i + 1
	}
	h.State = Derive(&h.Order, h.Facts)
	inFoldOrder(h.Facts)
	h.Arrival = make([]int, len(h.Facts))
	for i, f := range h.Facts {
		h.Arrival[i] = arrival[f.Key]
	}
	return h, nil
}
