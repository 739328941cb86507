package payment

import (
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// The statements on the business tables: orders and payment_facts. A
// batch locks the orders its events touch, reads their facts, records
// each new fact and derives each order again, and writes each table back
// with one statement.

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
	// ChargebackAmount is what lost disputes took of what refunds left.
	ChargebackAmount int64 `gorm:"column:chargeback_amount"`
	// DisputeStatus is the status of the order's last changed dispute.
	DisputeStatus *string `gorm:"column:dispute_status"`
	// WarehouseCancelled: warehouse.cancel was published (once in the
	// order's life).
	WarehouseCancelled bool `gorm:"column:warehouse_cancelled"`
	// HasFacts: the order has facts recorded (read with it, not a column:
	// the facts of an order without any, a first payment's, are not read).
	HasFacts bool `gorm:"column:has_facts;->"`
}

// TableName tells gorm the table.
func (Order) TableName() string { return "orders" }

// set makes the order's money columns state s.
func (o *Order) set(s *State, told bool) {
	o.PaymentStatus, o.PaymentNo, o.PaidAt = s.Status, nil, nil
	if s.PaymentNo != "" {
		no := s.PaymentNo
		o.PaymentNo, o.PaidAt = &no, s.PaidAt
	}
	o.RefundedAmount, o.ChargebackAmount = s.Refunded, s.Chargeback
	o.DisputeStatus = nil
	if s.DisputeStatus != "" {
		d := s.DisputeStatus
		o.DisputeStatus = &d
	}
	o.WarehouseCancelled = told
}

const orderColumns = `order_code, user_id, amount, currency, payment_status, payment_no, paid_at, refunded_amount, chargeback_amount,
	dispute_status, warehouse_cancelled,
	EXISTS (SELECT 1 FROM payment_facts f WHERE f.order_code = orders.order_code) AS has_facts`

// book is what a batch read, and what it changed.
type book struct {
	orders map[string]*Order
	// read are the orders as read, to write back only what changed.
	read  map[string]Order
	facts map[string][]Fact // by order
	keys  map[string]bool   // order \x00 fact key
	// byRef maps "kind\x00ref" to the orders facts of that number were
	// recorded for.
	byRef map[string][]string

	changed  []*Order
	seen     map[string]bool
	newFacts []*Fact
}

func newBook() *book {
	return &book{orders: map[string]*Order{}, read: map[string]Order{}, facts: map[string][]Fact{}, keys: map[string]bool{},
		byRef: map[string][]string{}, seen: map[string]bool{}}
}

func (b *book) orderChanged(o *Order) {
	if !b.seen[o.OrderCode] {
		b.seen[o.OrderCode] = true
		b.changed = append(b.changed, o)
	}
}

func (b *book) addFact(f Fact) {
	b.facts[f.OrderCode] = append(b.facts[f.OrderCode], f)
	b.keys[f.OrderCode+"\x00"+f.Key] = true
	b.newFacts = append(b.newFacts, &f)
	if f.Ref != "" && !contains(b.byRef[f.Kind+"\x00"+f.Ref], f.OrderCode) {
		b.byRef[f.Kind+"\x00"+f.Ref] = append(b.byRef[f.Kind+"\x00"+f.Ref], f.OrderCode)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// lookup fills byRef for the numbers events name when their order is not
// named or not found (a plain read: a fact recorded since is not seen,
// and the event that needs it waits and runs again).
func (b *book) lookup(db *gorm.DB, refs map[string][]string) error {
	var conds []string
	var args []any
	for kind, list := range refs {
		if len(list) > 0 {
			conds = append(conds, "(kind = ? AND ref IN ?)")
			args = append(args, kind, list)
		}
	}
	if len(conds) == 0 {
		return nil
	}
	var rows []struct {
		OrderCode string
		Kind      string
		Ref       string
	}
	if err := db.Raw(`SELECT DISTINCT order_code, kind, ref FROM payment_facts WHERE `+strings.Join(conds, " OR "), args...).Scan(&rows).Error; err != nil {
		return fmt.Errorf("error looking up payment facts: %w", err)
	}
	for _, r := range rows {
		k := r.Kind + "\x00" + r.Ref
		if !contains(b.byRef[k], r.OrderCode) {
			b.byRef[k] = append(b.byRef[k], r.OrderCode)
		}
	}
	return nil
}

// lockOrders reads and locks the orders of codes.
func (b *book) lockOrders(db *gorm.DB, codes []string) error {
	var todo []string
	for _, c := range codes {
		if _, ok := b.orders[c]; !ok {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	var found []Order
	if err := db.Raw(`SELECT `+orderColumns+` FROM orders WHERE order_code IN ? FOR UPDATE`, todo).Scan(&found).Error; err != nil {
		return fmt.Errorf("error loading orders: %w", err)
	}
	for i := range found {
		b.orders[found[i].OrderCode] = &found[i]
		b.read[found[i].OrderCode] = found[i]
	}
	for _, c := range todo {
		if _, ok := b.orders[c]; !ok {
			b.orders[c] = nil
		}
	}
	return nil
}

// readFacts reads the facts of the locked orders that have any (READ
// COMMITTED: the latest committed; only a transaction holding its order's
// lock adds one, so has_facts, read with the lock, is still true).
func (b *book) readFacts(db *gorm.DB) error {
	var codes []string
	for c, o := range b.orders {
		if o != nil {
			if _, ok := b.facts[c]; !ok {
				b.facts[c] = nil
				if o.HasFacts {
					codes = append(codes, c)
				}
			}
		}
	}
	if len(codes) == 0 {
		return nil
	}
	var rows []Fact
	if err := db.Raw(`SELECT * FROM payment_facts WHERE order_code IN ?`, codes).Scan(&rows).Error; err != nil {
		return fmt.Errorf("error loading payment facts: %w", err)
	}
	for _, f := range rows {
		b.facts[f.OrderCode] = append(b.facts[f.OrderCode], f)
		b.keys[f.OrderCode+"\x00"+f.Key] = true
	}
	return nil
}

// write stores the new facts and the changed orders: one statement each.
func (b *book) write(db *gorm.DB) error {
	if len(b.newFacts) > 0 {
		cols := []string{"order_code", "fact_key", "kind", "ref", "payment_no", "status", "amount", "currency", "reason", "occurred_at",
			"initiated_at", "source", "callback_log_id", "received_at"}
		// created_at: the database's clock in UTC, one argument less per
		// fact.
		one := "(" + strings.Repeat("?, ", len(cols)) + "UTC_TIMESTAMP(6))"
		var q strings.Builder
		q.WriteString("INSERT INTO payment_facts (" + strings.Join(cols, ", ") + ", created_at) VALUES ")
		args := make([]any, 0, len(cols)*len(b.newFacts))
		for i, f := range b.newFacts {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString(one)
			args = append(args, f.OrderCode, f.Key, f.Kind, f.Ref, f.PaymentNo, f.Status, f.Amount, f.Currency, f.Reason, f.OccurredAt,
				f.InitiatedAt, f.Source, f.CallbackLogID, f.ReceivedAt)
		}
		if err := db.Exec(q.String(), args...).Error; err != nil {
			return fmt.Errorf("error recording payment facts: %w", err)
		}
	}
	return writeOrders(db, b.changed, b.read)
}

// orderColumn is a money column of orders and its value in a row.
type orderColumn struct {
	name  string
	value func(o *Order) any
}

var moneyColumns = []orderColumn{
	{"payment_status", func(o *Order) any { return o.PaymentStatus }},
	{"payment_no", func(o *Order) any { return o.PaymentNo }},
	{"paid_at", func(o *Order) any { return o.PaidAt }},
	{"refunded_amount", func(o *Order) any { return o.RefundedAmount }},
	{"chargeback_amount", func(o *Order) any { return o.ChargebackAmount }},
	{"dispute_status", func(o *Order) any { return o.DisputeStatus }},
	{"warehouse_cancelled", func(o *Order) any { return o.WarehouseCancelled }},
}

// writeOrders stores the money columns of orders in one statement: the
// columns some order changed since it was read (a first payment changes
// three of seven).
func writeOrders(db *gorm.DB, orders []*Order, read map[string]Order) error {
	var cols []orderColumn
	for _, c := range moneyColumns {
		for _, o := range orders {
			r, ok := read[o.OrderCode]
			if !ok || !sameValue(c.value(o), c.value(&r)) {
				cols = append(cols, c)
				break
			}
		}
	}
	if len(cols) == 0 {
		return nil
	}
	var q strings.Builder
	args := make([]any, 0, (2*len(cols)+1)*len(orders))
	q.WriteString("UPDATE orders SET")
	for i, col := range cols {
		if i > 0 {
			q.WriteString(" END,")
		}
		q.WriteString(" " + col.name + " = CASE order_code")
		for _, o := range orders {
			q.WriteString(" WHEN ? THEN ?")
			args = append(args, o.OrderCode, col.value(o))
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

// sameValue compares two column values, through their pointers.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case *string:
		y := b.(*string)
		return x == nil && y == nil || x != nil && y != nil && *x == *y
	case *time.Time:
		y := b.(*time.Time)
		return x == nil && y == nil || x != nil && y != nil && x.Equal(*y)
	}
	return a == b
}
