package payment

import (
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// The statements on the business tables: orders, payments, refunds and
// disputes. A batch reads what its events touch with one statement per
// table (only the tables it needs), decides every event in id order on
// what it read, and writes each table back with one statement.

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
	// RefundedAmount is what the counted refunds gave back, in minor
	// units: at most Amount.
	RefundedAmount int64 `gorm:"column:refunded_amount"`
	// DisputeStatus is the status of the order's last changed dispute.
	DisputeStatus *string `gorm:"column:dispute_status"`
}

// TableName tells gorm the table.
func (Order) TableName() string { return "orders" }

// paid reports whether a payment paid the order (it may have been
// refunded since).
func (o *Order) paid() bool {
	switch o.PaymentStatus {
	case OrderPaid, OrderPartiallyRefunded, OrderRefunded:
		return true
	}
	return false
}

// paidBy reports whether payment no paid the order.
func (o *Order) paidBy(no string) bool { return o.PaymentNo != nil && *o.PaymentNo == no }

// remaining is what is left to refund.
func (o *Order) remaining() int64 { return max(0, o.Amount-o.RefundedAmount) }

// Payment is one payments row: a payment a platform reported for an order.
type Payment struct {
	OrderCode     string    `gorm:"column:order_code;primaryKey"`
	PaymentNo     string    `gorm:"column:payment_no;primaryKey"`
	Source        string    `gorm:"column:source"`
	Status        string    `gorm:"column:status"`
	Paying        bool      `gorm:"column:paying"`
	Amount        int64     `gorm:"column:amount"`
	Currency      string    `gorm:"column:currency"`
	CallbackLogID int64     `gorm:"column:callback_log_id"`
	LastLogID     int64     `gorm:"column:last_log_id"`
	CreatedAt     time.Time `gorm:"column:created_at"`
	UpdatedAt     time.Time `gorm:"column:updated_at"`
}

// TableName tells gorm the table.
func (Payment) TableName() string { return "payments" }

// Refund is one refunds row: a platform refund, once.
type Refund struct {
	OrderCode string  `gorm:"column:order_code;primaryKey"`
	RefundNo  string  `gorm:"column:refund_no;primaryKey"`
	PaymentNo *string `gorm:"column:payment_no"`
	Source    string  `gorm:"column:source"`
	Status    string  `gorm:"column:status"`
	// Amount is the refund's own amount as the platform gave it (or as its
	// running total implied it).
	Amount int64 `gorm:"column:amount"`
	// Counted is what it added to the order's refunded_amount.
	Counted int64 `gorm:"column:counted"`
	// Matched is what of it a running total without a refund number had
	// already counted.
	Matched       int64     `gorm:"column:matched"`
	Currency      string    `gorm:"column:currency"`
	Reason        *string   `gorm:"column:reason"`
	CallbackLogID int64     `gorm:"column:callback_log_id"`
	LastLogID     int64     `gorm:"column:last_log_id"`
	CreatedAt     time.Time `gorm:"column:created_at"`
	UpdatedAt     time.Time `gorm:"column:updated_at"`
}

// TableName tells gorm the table.
func (Refund) TableName() string { return "refunds" }

// Dispute is one disputes row.
type Dispute struct {
	OrderCode string  `gorm:"column:order_code;primaryKey"`
	DisputeID string  `gorm:"column:dispute_id;primaryKey"`
	PaymentNo *string `gorm:"column:payment_no"`
	Source    string  `gorm:"column:source"`
	Status    string  `gorm:"column:status"`
	Amount    int64   `gorm:"column:amount"`
	// Counted is what a LOST dispute took from what remained of the order.
	Counted       int64     `gorm:"column:counted"`
	Currency      string    `gorm:"column:currency"`
	CallbackLogID int64     `gorm:"column:callback_log_id"`
	LastLogID     int64     `gorm:"column:last_log_id"`
	CreatedAt     time.Time `gorm:"column:created_at"`
	UpdatedAt     time.Time `gorm:"column:updated_at"`
}

// TableName tells gorm the table.
func (Dispute) TableName() string { return "disputes" }

// Statuses of payments, refunds and disputes rows.
const (
	PaymentSucceeded = "SUCCEEDED"
	PaymentFailed    = "FAILED"
	RefundSucceeded  = "SUCCEEDED"
	RefundFailed     = "FAILED"
	RefundReversed   = "REVERSED"
)

// book is what a batch read of the business tables, and what its
// decisions changed, in the order they changed it.
type book struct {
	orders   map[string]*Order
	payments map[string]map[string]*Payment // by order, then payment number: read or written by this batch
	refunds  map[string]map[string]*Refund
	disputes map[string]map[string]*Dispute
	// byPayment maps a payment number to the orders it was recorded for.
	byPayment map[string][]string

	changedOrders   []*Order
	changedPayments []*Payment
	changedRefunds  []*Refund
	changedDisputes []*Dispute
	seenOrder       map[string]bool
}

func newBook() *book {
	return &book{orders: map[string]*Order{}, payments: map[string]map[string]*Payment{}, refunds: map[string]map[string]*Refund{},
		disputes: map[string]map[string]*Dispute{}, byPayment: map[string][]string{}, seenOrder: map[string]bool{}}
}

func (b *book) orderChanged(o *Order) {
	if !b.seenOrder[o.OrderCode] {
		b.seenOrder[o.OrderCode] = true
		b.changedOrders = append(b.changedOrders, o)
	}
}

func (b *book) payment(order, no string) *Payment { return b.payments[order][no] }
func (b *book) refund(order, no string) *Refund   { return b.refunds[order][no] }
func (b *book) dispute(order, id string) *Dispute { return b.disputes[order][id] }

func (b *book) putPayment(p *Payment) {
	if b.payments[p.OrderCode] == nil {
		b.payments[p.OrderCode] = map[string]*Payment{}
	}
	b.payments[p.OrderCode][p.PaymentNo] = p
	if !contains(b.byPayment[p.PaymentNo], p.OrderCode) {
		b.byPayment[p.PaymentNo] = append(b.byPayment[p.PaymentNo], p.OrderCode)
	}
	b.changedPayments = append(b.changedPayments, p)
}

func (b *book) putRefund(r *Refund) {
	if b.refunds[r.OrderCode] == nil {
		b.refunds[r.OrderCode] = map[string]*Refund{}
	}
	if b.refunds[r.OrderCode][r.RefundNo] == nil || b.refunds[r.OrderCode][r.RefundNo] != r {
		b.refunds[r.OrderCode][r.RefundNo] = r
	}
	b.changedRefunds = append(b.changedRefunds, r)
}

func (b *book) putDispute(d *Dispute) {
	if b.disputes[d.OrderCode] == nil {
		b.disputes[d.OrderCode] = map[string]*Dispute{}
	}
	b.disputes[d.OrderCode][d.DisputeID] = d
	b.changedDisputes = append(b.changedDisputes, d)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// lookupPayments fills byPayment for payment numbers (a plain read: a
// payment recorded since this transaction began is not seen, and the event
// that needs it waits and runs again).
func (b *book) lookupPayments(db *gorm.DB, nos []string) error {
	if len(nos) == 0 {
		return nil
	}
	var rows []struct {
		OrderCode string
		PaymentNo string
	}
	if err := db.Raw(`SELECT order_code, payment_no FROM payments WHERE payment_no IN ?`, nos).Scan(&rows).Error; err != nil {
		return fmt.Errorf("error looking up payments: %w", err)
	}
	for _, r := range rows {
		if !contains(b.byPayment[r.PaymentNo], r.OrderCode) {
			b.byPayment[r.PaymentNo] = append(b.byPayment[r.PaymentNo], r.OrderCode)
		}
	}
	return nil
}

// lockOrders reads and locks the orders of codes.
func (b *book) lockOrders(db *gorm.DB, codes []string) error {
	if len(codes) == 0 {
		return nil
	}
	var found []Order
	err := db.Raw(`SELECT order_code, user_id, amount, currency, payment_status, payment_no, paid_at, refunded_amount, dispute_status
		FROM orders WHERE order_code IN ? FOR UPDATE`, codes).Scan(&found).Error
	if err != nil {
		return fmt.Errorf("error loading orders: %w", err)
	}
	for i := range found {
		b.orders[found[i].OrderCode] = &found[i]
	}
	return nil
}

// lockRows reads and locks the payments, refunds or disputes rows of
// orders codes (locking reads: the latest committed rows, which only a
// transaction holding their order's lock writes).
func (b *book) lockRows(db *gorm.DB, table string, codes []string) error {
	if len(codes) == 0 {
		return nil
	}
	q := `SELECT * FROM ` + table + ` WHERE order_code IN ? FOR UPDATE`
	switch table {
	case "payments":
		var rows []Payment
		if err := db.Raw(q, codes).Scan(&rows).Error; err != nil {
			return fmt.Errorf("error loading payments: %w", err)
		}
		for i := range rows {
			p := &rows[i]
			if b.payments[p.OrderCode] == nil {
				b.payments[p.OrderCode] = map[string]*Payment{}
			}
			b.payments[p.OrderCode][p.PaymentNo] = p
		}
	case "refunds":
		var rows []Refund
		if err := db.Raw(q, codes).Scan(&rows).Error; err != nil {
			return fmt.Errorf("error loading refunds: %w", err)
		}
		for i := range rows {
			r := &rows[i]
			if b.refunds[r.OrderCode] == nil {
				b.refunds[r.OrderCode] = map[string]*Refund{}
			}
			b.refunds[r.OrderCode][r.RefundNo] = r
		}
	case "disputes":
		var rows []Dispute
		if err := db.Raw(q, codes).Scan(&rows).Error; err != nil {
			return fmt.Errorf("error loading disputes: %w", err)
		}
		for i := range rows {
			d := &rows[i]
			if b.disputes[d.OrderCode] == nil {
				b.disputes[d.OrderCode] = map[string]*Dispute{}
			}
			b.disputes[d.OrderCode][d.DisputeID] = d
		}
	}
	return nil
}

// write stores what the batch's decisions changed: one statement per
// table that changed.
func (b *book) write(db *gorm.DB) error {
	if err := writeOrders(db, b.changedOrders); err != nil {
		return err
	}
	if err := writePayments(db, b.changedPayments); err != nil {
		return err
	}
	if err := writeRefunds(db, b.changedRefunds); err != nil {
		return err
	}
	return writeDisputes(db, b.changedDisputes)
}

// writeOrders stores the money columns of orders in one statement.
func writeOrders(db *gorm.DB, orders []*Order) error {
	if len(orders) == 0 {
		return nil
	}
	var q strings.Builder
	args := make([]any, 0, 11*len(orders))
	q.WriteString("UPDATE orders SET")
	for i, col := range []string{"payment_status", "payment_no", "paid_at", "refunded_amount", "dispute_status"} {
		if i > 0 {
			q.WriteString(" END,")
		}
		q.WriteString(" " + col + " = CASE order_code")
		for _, o := range orders {
			q.WriteString(" WHEN ? THEN ?")
			var v any
			switch col {
			case "payment_status":
				v = o.PaymentStatus
			case "payment_no":
				v = o.PaymentNo
			case "paid_at":
				v = o.PaidAt
			case "refunded_amount":
				v = o.RefundedAmount
			case "dispute_status":
				v = o.DisputeStatus
			}
			args = append(args, o.OrderCode, v)
		}
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

// writePayments records payments; a payment already recorded keeps
// SUCCEEDED and paying once it had them (its rows apply in order).
func writePayments(db *gorm.DB, rows []*Payment) error {
	values := make([][]any, len(rows))
	for i, p := range rows {
		values[i] = []any{p.OrderCode, p.PaymentNo, p.Source, p.Status, p.Paying, p.Amount, p.Currency, p.CallbackLogID, p.LastLogID, p.CreatedAt, p.UpdatedAt}
	}
	// MariaDB assigns left to right: amount reads the status before.
	return upsert(db, "payments", []string{"order_code", "payment_no", "source", "status", "paying", "amount", "currency", "callback_log_id",
		"last_log_id", "created_at", "updated_at"}, values, `amount = IF(status = 'SUCCEEDED', amount, VALUES(amount)),
		status = IF(status = 'SUCCEEDED', status, VALUES(status)), paying = paying OR VALUES(paying),
		last_log_id = VALUES(last_log_id), updated_at = VALUES(updated_at)`)
}

// writeRefunds stores refunds as the batch left them (it read them locked).
func writeRefunds(db *gorm.DB, rows []*Refund) error {
	rows = lastOf(rows, func(r *Refund) string { return r.OrderCode + "\x00" + r.RefundNo })
	values := make([][]any, len(rows))
	for i, r := range rows {
		values[i] = []any{r.OrderCode, r.RefundNo, r.PaymentNo, r.Source, r.Status, r.Amount, r.Counted, r.Matched, r.Currency, r.Reason,
			r.CallbackLogID, r.LastLogID, r.CreatedAt, r.UpdatedAt}
	}
	return upsert(db, "refunds", []string{"order_code", "refund_no", "payment_no", "source", "status", "amount", "counted", "matched",
		"currency", "reason", "callback_log_id", "last_log_id", "created_at", "updated_at"}, values, `status = VALUES(status),
		amount = VALUES(amount), counted = VALUES(counted), matched = VALUES(matched), reason = VALUES(reason),
		last_log_id = VALUES(last_log_id), updated_at = VALUES(updated_at)`)
}

// writeDisputes stores disputes as the batch left them.
func writeDisputes(db *gorm.DB, rows []*Dispute) error {
	rows = lastOf(rows, func(d *Dispute) string { return d.OrderCode + "\x00" + d.DisputeID })
	values := make([][]any, len(rows))
	for i, d := range rows {
		values[i] = []any{d.OrderCode, d.DisputeID, d.PaymentNo, d.Source, d.Status, d.Amount, d.Counted, d.Currency, d.CallbackLogID, d.LastLogID,
			d.CreatedAt, d.UpdatedAt}
	}
	return upsert(db, "disputes", []string{"order_code", "dispute_id", "payment_no", "source", "status", "amount", "counted", "currency",
		"callback_log_id", "last_log_id", "created_at", "updated_at"}, values, `status = VALUES(status), amount = VALUES(amount), counted = VALUES(counted),
		last_log_id = VALUES(last_log_id), updated_at = VALUES(updated_at)`)
}

// upsert writes rows of table in one multi-row INSERT, updating a row
// that exists by onDuplicate.
func upsert(db *gorm.DB, table string, cols []string, rows [][]any, onDuplicate string) error {
	if len(rows) == 0 {
		return nil
	}
	var q strings.Builder
	q.WriteString("INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES ")
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	args := make([]any, 0, len(cols)*len(rows))
	for i, r := range rows {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(one)
		args = append(args, r...)
	}
	q.WriteString(" ON DUPLICATE KEY UPDATE " + onDuplicate)
	if err := db.Exec(q.String(), args...).Error; err != nil {
		return fmt.Errorf("error recording %s: %w", table, err)
	}
	return nil
}

// lastOf keeps each row once (rows are pointers: the last state is the
// row's own), in the order first changed.
func lastOf[T any](rows []*T, key func(*T) string) []*T {
	seen := map[string]bool{}
	out := rows[:0:0]
	for _, r := range rows {
		if k := key(r); !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}
